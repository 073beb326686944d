//go:build !linux

package proc

import "syscall"

// setParentDeath does nothing: only Linux has a parent-death signal.
func setParentDeath(*syscall.SysProcAttr) {}

func onSpawnThread(start func() error) error { return start() }
