package sandbox

import (
	"os"

	"github.com/factory-harness/factory/internal/proc/sandbox/initproc"
)

// Init must be the first statement of main, and of TestMain in test binaries that run confined
// commands: it records that the binary can serve as the sandbox's init. The init itself runs earlier,
// in package initproc's initializer, before the initializers of the rest of the binary; should a
// process started by Wrap reach Init all the same, Init confines it and executes the command, never
// returning.
func Init() {
	if len(os.Args) >= 2 && os.Args[0] == initproc.Arg0 {
		initproc.Run()
	}
	hooked.Store(true)
}

// landlockABI returns the kernel's Landlock ABI version, 0 without Landlock, and why.
func landlockABI() (int, string) { return initproc.LandlockABI() }
