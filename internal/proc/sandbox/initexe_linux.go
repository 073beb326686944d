package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/factory-harness/factory/internal/proc/sandbox/initbin"
)

// initExe returns the path Wrap executes as the init: the embedded init (package initbin) in a
// sealed memfd, which no command can replace or modify, or why this platform has none.
var initExe = sync.OnceValues(func() (string, error) { return memfdInit(initbin.Binary) })

// memfdInit writes bin into a sealed memfd and returns a path that executes it, valid in this
// process and in the children it forks until they execute something (the descriptor closes on
// exec: the command does not inherit it).
func memfdInit(bin []byte) (string, error) {
	if len(bin) == 0 {
		return "", errors.New("no init is embedded for this platform (only linux/amd64 and linux/arm64 have one)")
	}
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	// MFD_EXEC makes a kernel that forbids executing memfds (vm.memfd_noexec) refuse here rather than
	// at the first command; kernels older than the flag reject it as unknown.
	fd, err := unix.MemfdCreate("factory-sandbox-init", flags|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate("factory-sandbox-init", flags)
	}
	if err != nil {
		return "", fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	for rest := bin; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			return "", fmt.Errorf("write the init: %w", err)
		}
		rest = rest[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return "", fmt.Errorf("seal the init: %w", err)
	}
	// Far above the descriptors a child is given (0-2 and ExtraFiles from 3 on), which the fork
	// moves into place before the exec resolves this path.
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return "", fmt.Errorf("move the init's descriptor: %w", err)
	}
	return "/proc/self/fd/" + strconv.Itoa(high), nil
}
