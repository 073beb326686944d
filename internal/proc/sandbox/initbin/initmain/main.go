//go:build linux

// Command initmain is the sandbox's init as a program of its own: package initproc and nothing
// else. Its builds are embedded in factory (package initbin), so that a confined command pays for
// starting this small program instead of the whole factory binary.
package main

import "github.com/factory-harness/factory/internal/proc/sandbox/initproc"

func main() { initproc.Run() }
