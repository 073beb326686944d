package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkLaunch measures the CPU a confined command costs (cpu-ms/op: this process's and its
// children's user and system time per run of /bin/true), against the same command unconfined, with
// the command's parent holding heaps of growing size, as factory does by the time it runs
// commands. "confined" runs the command under the init's own PID namespace (the init forks PID 1,
// which forks the command); "pids" is the fork's way of making the namespaces (agent CLIs):
//
//	go test -run '^$' -bench Launch -count 3 ./internal/proc/sandbox/
//
// With FACTORY_BENCH_BASELINE_INIT set to another build of the init (say, one from before a change:
// git show REV:internal/proc/sandbox/initbin/init-linux-amd64 > /tmp/init-before), "baseline" runs
// the same confined command with that init, executed from a sealed memfd as the embedded one is, so
// that both are measured side by side in one run.
func BenchmarkLaunch(b *testing.B) {
	dir := b.TempDir()
	confined, err := Prepare(Request{Mode: ModeRequired, WorkTree: dir})
	if err != nil || confined.Mechanism() != MechanismNamespaces {
		b.Skipf("user namespaces unavailable here: %v", err)
	}
	pids, err := Prepare(Request{Mode: ModeRequired, WorkTree: dir, PrivatePIDs: true})
	if err != nil {
		b.Skip(err)
	}
	baseline := ""
	if path := os.Getenv("FACTORY_BENCH_BASELINE_INIT"); path != "" {
		bin, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if baseline, err = memfdInit(bin); err != nil {
			b.Fatal(err)
		}
	}
	var heap [][]byte
	for _, mb := range []int{0, 150} {
		for len(heap) < mb*16 {
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = 1
			}
			heap = append(heap, chunk)
		}
		cases := []struct {
			name, init string
			p          *Policy
		}{{"unconfined", "", nil}, {"confined", "", confined}, {"pids", "", pids}}
		if baseline != "" {
			cases = append(cases, struct {
				name, init string
				p          *Policy
			}{"baseline", baseline, confined})
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/heap=%dMB", c.name, mb), func(b *testing.B) {
				before := CPUTime()
				for b.Loop() {
					for _, chunk := range heap {
						chunk[0]++ // a program at work writes to its heap
					}
					cmd := exec.Command("/bin/true")
					cmd.Dir = dir
					cleanup, err := c.p.Wrap(cmd)
					if err != nil {
						b.Fatal(err)
					}
					if c.init != "" {
						cmd.Path = c.init
					}
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("true: %v: %s", err, out)
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
