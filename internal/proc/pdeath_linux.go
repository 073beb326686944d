package proc

import (
	"runtime"
	"sync"
	"syscall"
)

// Commands die with factory, even when it is SIGKILLed: each gets SIGKILL
// as its parent-death signal. The kernel sends that signal when the
// *thread* that forked the command exits, not the process, and Go ends an
// OS thread when a goroutine locked to it returns; so every command is
// forked from one goroutine locked to its thread for the life of the
// process.
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

var spawner = sync.OnceValue(func() chan<- func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range ch {
			f()
		}
	}()
	return ch
})

// onSpawnThread runs start (an exec.Cmd's Start) on the spawning thread.
func onSpawnThread(start func() error) error {
	done := make(chan error, 1)
	spawner() <- func() { done <- start() }
	return <-done
}
