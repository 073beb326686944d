package sandbox

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// landlockABI returns the kernel's Landlock ABI version, 0 without Landlock, and why.
func landlockABI() (int, string) {
	v, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, "landlock_create_ruleset: " + errno.Error()
	}
	return int(v), ""
}
