//go:build cgo

package gitsrc

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/repomap"
)

// BenchmarkMap maps HEAD of the repository FACTORY_BENCH_REPO names (skipped
// without) and renders it ranked for the text of FACTORY_BENCH_FOCUS, as
// `factory run` does for its baseline commit: cold (no cache in the git
// directory) and warm.
func BenchmarkMap(b *testing.B) {
	dir := os.Getenv("FACTORY_BENCH_REPO")
	if dir == "" {
		b.Skip("FACTORY_BENCH_REPO names no repository")
	}
	ctx := context.Background()
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	focus := os.Getenv("FACTORY_BENCH_FOCUS")
	run := func(b *testing.B) {
		m, err := Build(ctx, repo, head)
		if err != nil || len(m.Files) == 0 {
			b.Fatalf("%v, %d files", err, len(m.Files))
		}
		m.Render(m.FocusFromText(focus), repomap.DefaultTokens)
	}
	b.Run("cold", func(b *testing.B) {
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			if err := os.RemoveAll(repo.FactoryFile("repomap")); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			c := cpuTime()
			run(b)
			cpu += cpuTime() - c
		}
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	b.Run("warm", func(b *testing.B) {
		run(b)
		c := cpuTime()
		for b.Loop() {
			run(b)
		}
		b.ReportMetric(float64((cpuTime()-c).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
}

// cpuTime is the user and system time of this process and its waited-for
// children (git) so far: unlike wall time, it hardly depends on what else
// the machine runs.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	var d time.Duration
	for _, r := range []syscall.Rusage{self, kids} {
		d += time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return d
}
