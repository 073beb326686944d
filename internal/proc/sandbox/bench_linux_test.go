package sandbox_test

import (
	"context"
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
			before := sandbox.CPUTime()
			for b.Loop() {
				if res := proc.Run(context.Background(), proc.Spec{Argv: []string{"true"}, Dir: dir, Sandbox: c.p}); res.ExitCode != 0 {
					b.Fatalf("Run(true) = %+v", res)
				}
			}
			// CPU time of this process and its children: unlike ns/op, it hardly depends on what else
			// the machine runs.
			b.ReportMetric(float64(sandbox.CPUTime()-before)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
