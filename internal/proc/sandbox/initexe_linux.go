package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/factory-harness/factory/internal/proc/sandbox/initbin"
)

// selfExe is the running binary, whatever has become of its path since it started: the init when
// no smaller one can be had (it serves as one because it calls Init).
const selfExe = "/proc/self/exe"

var (
	initMu   sync.Mutex
	initPath string   // what Wrap executes as the init; "" until first asked
	initFile *os.File // the embedded init's memfd, when initPath is it
	// unshareTool is util-linux's unshare when the probe found that the
	// namespaces can be made through it (see launchWithUnshare); "" to
	// have the fork make them.
	unshareTool string
)

// initExe returns the program Wrap executes as the init: the embedded small init (package
// initbin) in a sealed memfd when this platform has one and the kernel lets it be executed, else
// the running binary.
func initExe() string {
	initMu.Lock()
	defer initMu.Unlock()
	return initExeLocked()
}

func initExeLocked() string {
	if initPath == "" {
		var err error
		if initPath, initFile, err = memfdInit(initbin.Binary); err != nil {
			initPath = selfExe
		}
	}
	return initPath
}

// useSelfExe makes Wrap execute the running binary as the init from now on, and reports whether
// that is a change.
func useSelfExe() bool {
	initMu.Lock()
	defer initMu.Unlock()
	changed := initPath != selfExe
	initPath, unshareTool = selfExe, ""
	return changed
}

// launcher returns the unshare program to make a command's namespaces with, and the embedded
// init's memfd for it to execute; "" and nil when the fork must make them.
func launcher() (string, *os.File) {
	initMu.Lock()
	defer initMu.Unlock()
	if unshareTool == "" || initExeLocked() == selfExe {
		return "", nil
	}
	return unshareTool, initFile
}

// setUnshareTool sets what launcher returns.
func setUnshareTool(path string) {
	initMu.Lock()
	defer initMu.Unlock()
	unshareTool = path
}

// memfdInit writes bin into a sealed memfd and returns a path that executes it, valid in this
// process and in the children it forks until they execute something, and the memfd itself.
func memfdInit(bin []byte) (string, *os.File, error) {
	if len(bin) == 0 {
		return "", nil, errors.New("no init is embedded for this platform")
	}
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	// MFD_EXEC makes a kernel that forbids executing memfds (vm.memfd_noexec) refuse here rather than
	// at the first command; kernels older than the flag reject it as unknown.
	fd, err := unix.MemfdCreate("factory-sandbox-init", flags|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate("factory-sandbox-init", flags)
	}
	if err != nil {
		return "", nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	for rest := bin; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			return "", nil, fmt.Errorf("write the init: %w", err)
		}
		rest = rest[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return "", nil, fmt.Errorf("seal the init: %w", err)
	}
	// Far above the descriptors a child is given (0-2 and ExtraFiles from 3 on), which the fork
	// moves into place before the exec resolves this path.
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return "", nil, fmt.Errorf("move the init's descriptor: %w", err)
	}
	return "/proc/self/fd/" + strconv.Itoa(high), os.NewFile(uintptr(high), "factory-sandbox-init"), nil
}
