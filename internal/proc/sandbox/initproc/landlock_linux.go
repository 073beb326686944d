//go:build linux

package initproc

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is applied with its system calls directly, on the calling thread only: the command is
// executed from this thread, and a per-thread domain is what it inherits. A library that restricts
// every thread of the process (go-landlock, through libpsx) signals and waits for each one, which
// cost milliseconds per command and added nothing here.

// Access rights for files (<linux/landlock.h>), with the ABI version that introduced them.
const (
	fsExecute    = 1 << 0 // ABI 1, as all up to fsMakeSym
	fsWriteFile  = 1 << 1
	fsReadFile   = 1 << 2
	fsReadDir    = 1 << 3
	fsRemoveDir  = 1 << 4
	fsRemoveFile = 1 << 5
	fsMakeChar   = 1 << 6
	fsMakeDir    = 1 << 7
	fsMakeReg    = 1 << 8
	fsMakeSock   = 1 << 9
	fsMakeFifo   = 1 << 10
	fsMakeBlock  = 1 << 11
	fsMakeSym    = 1 << 12
	fsRefer      = 1 << 13 // ABI 2
	fsTruncate   = 1 << 14 // ABI 3
	fsIoctlDev   = 1 << 15 // ABI 5

	netConnectTCP = 1 << 1 // ABI 4

	scopeAbstractUnixSocket = 1 << 0 // ABI 6
	scopeSignal             = 1 << 1
)

// The sets the rules grant, as go-landlock's RODirs, RWDirs and RWFiles define them.
const (
	fsRead    = fsExecute | fsReadFile | fsReadDir
	fsWrite   = fsWriteFile | fsRemoveDir | fsRemoveFile | fsMakeChar | fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym | fsTruncate
	fsFile    = fsExecute | fsWriteFile | fsTruncate | fsReadFile
	fsHandled = 1<<16 - 1 // every right up to ABI 7 (ABI 6 and 7 added no file rights)
)

// handledFS is what a kernel of Landlock ABI abi can handle of fsHandled.
func handledFS(abi int) uint64 {
	switch {
	case abi >= 5:
		return fsHandled
	case abi >= 3:
		return 1<<15 - 1
	case abi == 2:
		return 1<<14 - 1
	case abi == 1:
		return 1<<13 - 1
	}
	return 0
}

// rulesetAttr is struct landlock_ruleset_attr (ABI 6); older kernels accept it with the fields they do
// not know left zero.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// pathBeneath is struct landlock_path_beneath_attr, which the kernel reads packed (12 bytes): Go's
// trailing padding is not read.
type pathBeneath struct {
	allowed  uint64
	parentFD int32
}

// netPort is struct landlock_net_port_attr, for a rule of type landlockRuleNetPort.
type netPort struct {
	allowed, port uint64
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT (<linux/landlock.h>, ABI 4).
const landlockRuleNetPort = 2

// Devices are the device files commands may write, as any program expects.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// LandlockABI returns the kernel's Landlock ABI version, 0 without Landlock, and why.
func LandlockABI() (int, string) {
	v, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, "landlock_create_ruleset: " + errno.Error()
	}
	return int(v), ""
}

// restrictLandlock adds the second layer: read and execute everywhere, write only to the writable
// paths. Inside namespaces the network is already cut; alone, Landlock denies TCP connections (ABI 4
// and later). Signals and abstract unix sockets stay inside the sandbox (ABI 6 and later). On a kernel
// of an older ABI it restricts what that ABI can; on ABI 1, which cannot grant the right to link or
// rename files between directories (refer), it does not restrict, as go-landlock's best effort did.
func restrictLandlock(pl Plan) error {
	if pl.ABI < 2 {
		return nil
	}
	writable := append([]string{pl.Tmp}, pl.Writable...)
	if pl.Namespaces {
		writable = append([]string{HostTmp()}, pl.Writable...)
		if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
			writable = append(writable, "/dev/shm")
		}
	}
	attr := rulesetAttr{handledFS: handledFS(pl.ABI)}
	if (!pl.Namespaces || pl.HostNet) && pl.ABI >= 4 {
		// Binding stays allowed (tests listen on 127.0.0.1); connecting is what reaches out, and
		// with the host's network only to pl.Ports.
		attr.handledNet = netConnectTCP
	}
	if pl.ABI >= 6 {
		attr.scoped = scopeAbstractUnixSocket | scopeSignal
	}
	fd, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("cannot apply the Landlock ruleset: landlock_create_ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	if err := allow(ruleset, attr.handledFS, fsRead, false, "/"); err != nil {
		return err
	}
	if err := allow(ruleset, attr.handledFS, fsRead|fsWrite|fsRefer, false, writable...); err != nil {
		return err
	}
	if err := allow(ruleset, attr.handledFS, fsFile, true, devices...); err != nil {
		return err
	}
	if pl.HostNet && attr.handledNet != 0 {
		for _, port := range pl.Ports {
			rule := netPort{allowed: netConnectTCP, port: uint64(port)}
			_, _, errno := syscall.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
			if errno != 0 {
				return fmt.Errorf("cannot apply the Landlock ruleset: allow TCP connect to port %d: %w", port, errno)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot apply the Landlock ruleset: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("cannot apply the Landlock ruleset: landlock_restrict_self: %w", errno)
	}
	return nil
}

// allow adds to the ruleset a rule granting access (as far as handled) beneath each path; a missing
// path is an error unless ignoreMissing.
func allow(ruleset int, handled, access uint64, ignoreMissing bool, paths ...string) error {
	for _, path := range paths {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if ignoreMissing && err == unix.ENOENT {
				continue
			}
			return fmt.Errorf("cannot apply the Landlock ruleset: open %s: %w", path, err)
		}
		rule := pathBeneath{allowed: access & handled, parentFD: int32(fd)}
		_, _, errno := syscall.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(fd)
		if errno != 0 {
			return fmt.Errorf("cannot apply the Landlock ruleset: landlock_add_rule %s: %w", path, errno)
		}
	}
	return nil
}
