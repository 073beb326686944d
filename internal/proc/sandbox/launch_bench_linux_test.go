package sandbox

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkLaunch compares the two ways of making a confined command's namespaces (see
// launchWithUnshare) with the command's parent holding heaps of growing size, as factory does by
// the time it runs commands:
//
//	go test -run '^$' -bench Launch -count 3 ./internal/proc/sandbox/
func BenchmarkLaunch(b *testing.B) {
	if !hooked.Load() {
		b.Skip("this test binary has no sandbox.Init hook")
	}
	dir := b.TempDir()
	p, err := Prepare(Request{Mode: ModeRequired, WorkTree: dir})
	if err != nil {
		b.Skip(err)
	}
	initMu.Lock()
	tool := unshareTool
	initMu.Unlock()
	if tool == "" {
		b.Skip("util-linux's unshare does not make the namespaces here")
	}
	defer setUnshareTool(tool)
	var heap [][]byte
	for _, mb := range []int{0, 50, 150} {
		for len(heap) < mb*16 {
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = 1
			}
			heap = append(heap, chunk)
		}
		for _, how := range []string{"fork", "unshare"} {
			b.Run(fmt.Sprintf("%s/heap=%dMB", how, mb), func(b *testing.B) {
				setUnshareTool(map[string]string{"fork": "", "unshare": tool}[how])
				before := CPUTime()
				for b.Loop() {
					for _, chunk := range heap {
						chunk[0]++ // a program at work writes to its heap
					}
					cmd := exec.Command("/bin/true")
					cmd.Dir = dir
					cleanup, err := p.Wrap(cmd)
					if err != nil {
						b.Fatal(err)
					}
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("confined true: %v: %s", err, out)
					}
					cleanup()
				}
				b.ReportMetric(float64(CPUTime()-before)/float64(b.N)/1e6, "cpu-ms/op")
			})
		}
	}
}

// CPUTime is the user and system time of this process and of its children waited for (for the
// benchmarks of this package and of package sandbox_test).
func CPUTime() int64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano()
}
