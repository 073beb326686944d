package sandbox_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// BenchmarkRun measures what confinement adds to one short command (/bin/true): run the pairs
// together, several times, on a quiet machine:
//
//	go test -run '^$' -bench Run -count 5 ./internal/proc/sandbox/
func BenchmarkRun(b *testing.B) {
	dir := b.TempDir()
	confined, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: dir})
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name string
		p    *sandbox.Policy
	}{{"unconfined", nil}, {string(confined.Mechanism()), confined}} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime()
			for b.Loop() {
				if res := proc.Run(context.Background(), proc.Spec{Argv: []string{"true"}, Dir: dir, Sandbox: c.p}); res.ExitCode != 0 {
					b.Fatalf("Run(true) = %+v", res)
				}
			}
			// CPU time of this process and its children: unlike ns/op, it hardly depends on what else
			// the machine runs.
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// cpuTime is the user and system time of this process and of its children waited for.
func cpuTime() int64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano()
}
