package proc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRunWithIdleProcesses measures what one short command costs in a subreaper, with and without
// 1,000 unrelated idle processes on the machine: the end of each command looks for orphans, and that
// search must not grow with the processes of others.
//
// The idle processes must not be this process's descendants, or the orphan search would rightly kill
// them; so they are started before this process becomes a subreaper, which needs a fresh test binary:
//
//	go test -run '^$' -bench RunWithIdleProcesses ./internal/proc/
func BenchmarkRunWithIdleProcesses(b *testing.B) {
	if subreaper.Load() {
		b.Skip("this process is already a subreaper; run the benchmark alone with -run '^$'")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		b.Skip("sleep is not installed")
	}
	// The sleeps live in their own process group, and their shell exits at once, so init adopts them.
	const idle = 1000
	spawn := exec.Command("sh", "-c", "i=0; while [ $i -lt "+strconv.Itoa(idle)+" ]; do sleep 3600 & i=$((i+1)); done")
	spawn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spawn.Run(); err != nil {
		b.Fatalf("cannot start %d idle processes: %v", idle, err)
	}
	pgid := spawn.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	if err := BecomeSubreaper(); err != nil {
		b.Fatal(err)
	}
	each := func(b *testing.B) {
		b.Run("run", func(b *testing.B) {
			for b.Loop() {
				if res := Run(context.Background(), Spec{Argv: []string{"true"}}); res.ExitCode != 0 {
					b.Fatalf("Run(true) = %+v", res)
				}
			}
		})
		// The search for children alone, as on kernels without children files: from a baseline, and
		// without one (reading every process, as before).
		search := func(f *childFinder) func(*testing.B) {
			return func(b *testing.B) {
				for b.Loop() {
					if _, ok := f.children(os.Getpid()); !ok {
						b.Fatal("cannot list the children")
					}
				}
			}
		}
		baseline := &childFinder{probed: true, childless: true}
		baseline.starting(true)
		b.Run("search-from-baseline", search(baseline))
		b.Run("search-all", search(&childFinder{probed: true}))
	}
	b.Run("idle=1000", each)
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		b.Fatalf("cannot kill the idle processes: %v", err)
	}
	// Until init has reaped them all, they are still there to be scanned.
	for deadline := time.Now().Add(hangLimit); syscall.Kill(-pgid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the killed idle processes are still there")
		}
	}
	b.Run("idle=0", each)
}
