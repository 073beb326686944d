package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemonScript double-forks a daemon that calls setsid(), so it leaves the command's process group and
// session, and then keeps appending to the file "grow". Each daemon writes its pid to the file given as
// an argument; with "nested", the daemon starts a second one the same way, which killing the first
// re-parents. The command exits once the daemons run.
const daemonScript = `
import os, sys, time

def daemon(pidfile, then):
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            with open(pidfile + '.tmp', 'w') as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + '.tmp', pidfile)
            then()
            while True:
                with open('grow', 'a') as f:
                    f.write('x\n')
                time.sleep(0.05)
        os._exit(0)
    os.wait()

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)

if len(sys.argv) > 1 and sys.argv[1] == 'nested':
    daemon('daemon.pid', lambda: daemon('daemon2.pid', lambda: None))
    wait_for('daemon2.pid')
else:
    daemon('daemon.pid', lambda: None)
wait_for('daemon.pid')
wait_for('grow')
`

func becomeSubreaper(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
}

func TestSubreaperKillsSetsidDaemon(t *testing.T) {
	becomeSubreaper(t)
	tests := []struct {
		name    string
		pidFile []string // written by the daemons
		run     func(dir string, argv []string) error
	}{
		{"Run", []string{"daemon.pid"}, func(dir string, argv []string) error {
			if res := Run(context.Background(), Spec{Argv: argv, Dir: dir, Timeout: hangLimit}); res.ExitCode != 0 {
				return errors.New(res.Err)
			}
			return nil
		}},
		{"Run, daemon of a daemon", []string{"daemon.pid", "daemon2.pid"}, func(dir string, argv []string) error {
			argv = append(argv, "nested")
			if res := Run(context.Background(), Spec{Argv: argv, Dir: dir, Timeout: hangLimit}); res.ExitCode != 0 {
				return errors.New(res.Err)
			}
			return nil
		}},
		{"Output", []string{"daemon.pid"}, func(dir string, argv []string) error {
			_, err := Output(context.Background(), dir, argv, nil)
			return err
		}},
		{"Run timing out", []string{"daemon.pid"}, func(dir string, argv []string) error {
			argv = []string{"sh", "-c", `python3 -c "$0" && exec sleep 30`, argv[2]}
			// The timeout must outlast python's start and the daemon's fork
			// on a loaded machine (2 s did not at a load of 9 on 2 cores).
			if res := Run(context.Background(), Spec{Argv: argv, Dir: dir, Timeout: 8 * time.Second}); !res.TimedOut {
				return errors.New("did not time out: " + res.Err)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.run(dir, []string{"python3", "-c", daemonScript}); err != nil {
				t.Fatalf("the command failed: %v", err)
			}
			size := fileSize(t, filepath.Join(dir, "grow"))
			for _, name := range tt.pidFile {
				pid := readPid(t, filepath.Join(dir, name))
				// Run has reaped it, so not even a zombie is left.
				if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("daemon %d (%s) survived the command: kill -0 = %v", pid, name, err)
				}
			}
			time.Sleep(300 * time.Millisecond)
			if after := fileSize(t, filepath.Join(dir, "grow")); after != size {
				t.Errorf("the daemon's file grew from %d to %d bytes after the command returned", size, after)
			}
		})
	}
}

// TestSubreaperSparesConcurrentCommands runs quick commands that leave daemons behind while slower
// commands run: each end of a quick one scans for orphans, and must kill neither the other commands nor
// what they started, not even their daemons. All daemons are dead once the last command has ended.
func TestSubreaperSparesConcurrentCommands(t *testing.T) {
	becomeSubreaper(t)
	slowDir := t.TempDir()
	var wg sync.WaitGroup
	var slow Result
	wg.Go(func() {
		// The background sleep is orphaned at once (its subshell exits), but stays in this command's
		// process group, so it must survive the other commands' scans; kill -0 checks it did.
		slow = Run(context.Background(), Spec{
			Argv: []string{"bash", "-c", "(sleep 30 & echo $! > pid); sleep 1; kill -0 $(cat pid)"},
			Dir:  slowDir, Timeout: hangLimit, Stderr: filepath.Join(slowDir, "err"),
		})
	})
	var slowOutputErr error
	wg.Go(func() {
		_, slowOutputErr = Output(context.Background(), "", []string{"sleep", "1"}, nil)
	})
	var quickDirs []string
	var mu sync.Mutex
	for range 3 {
		wg.Go(func() {
			for range 3 {
				dir := t.TempDir()
				res := Run(context.Background(), Spec{Argv: []string{"python3", "-c", daemonScript}, Dir: dir, Timeout: hangLimit})
				if res.ExitCode != 0 {
					t.Errorf("quick command: %+v", res)
				}
				mu.Lock()
				quickDirs = append(quickDirs, dir)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if slow.ExitCode != 0 || slow.Err != "" {
		t.Errorf("slow Run = %+v (stderr %q), want a normal exit with code 0", slow, readFile(t, filepath.Join(slowDir, "err")))
	}
	if slow.Duration < time.Second {
		t.Errorf("slow Run took %v, want at least its 1s sleep", slow.Duration)
	}
	if slowOutputErr != nil {
		t.Errorf("slow Output: %v", slowOutputErr)
	}
	checkGrandchildKilled(t, slowDir)
	for _, dir := range quickDirs {
		pid := readPid(t, filepath.Join(dir, "daemon.pid"))
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("daemon %d survived its command: kill -0 = %v", pid, err)
		}
	}
}

// TestSubreaperKillsOlderOrphanDuringNewerCommand checks that an orphan which started before every
// running command is killed when its own command ends, although another command is still running.
func TestSubreaperKillsOlderOrphanDuringNewerCommand(t *testing.T) {
	becomeSubreaper(t)
	dir := t.TempDir()
	first := make(chan Result)
	go func() {
		first <- Run(context.Background(), Spec{
			Argv: []string{"python3", "-c", daemonScript + "wait_for('go')\n"}, Dir: dir, Timeout: hangLimit,
		})
	}()
	waitForFile(t, filepath.Join(dir, "daemon.pid"))
	pid := readPid(t, filepath.Join(dir, "daemon.pid"))
	time.Sleep(50 * time.Millisecond) // several clock ticks, so the next command surely starts later
	second := make(chan Result)
	go func() {
		second <- Run(context.Background(), Spec{Argv: []string{"sleep", "1"}, Timeout: hangLimit})
	}()
	time.Sleep(100 * time.Millisecond) // let the second command start
	writeFile(t, filepath.Join(dir, "go"), "", 0o644)
	if res := <-first; res.ExitCode != 0 {
		t.Fatalf("first command: %+v", res)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("daemon %d survived its command: kill -0 = %v", pid, err)
	}
	select {
	case res := <-second:
		t.Errorf("the second command ended before the first: %+v", res)
	default:
	}
	if res := <-second; res.ExitCode != 0 || res.Err != "" {
		t.Errorf("second command = %+v, want a normal exit with code 0", res)
	}
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(hangLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear", path)
}

func TestParseStat(t *testing.T) {
	const rest = " 4194304 101 0 0 0 0 0 0 0 20 0 1 0 387044 3133440 413 18446744073709551615 0 0 0 0 0 0 0 0 0 17 0 0"
	tests := []struct {
		stat string
		want procStat
		ok   bool
	}{
		{"9314 (cat) R 9270 9271 10083 0 -1" + rest, procStat{state: 'R', ppid: 9270, pgid: 9271, start: 387044}, true},
		{"9314 (a) b (c)) Z 1 2 3 0 -1" + rest, procStat{state: 'Z', ppid: 1, pgid: 2, start: 387044}, true},
		{"9314 (x) R 1 2 3", procStat{}, false},
		{"garbage", procStat{}, false},
	}
	for _, tt := range tests {
		if got, ok := parseStat(tt.stat); got != tt.want || ok != tt.ok {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.stat, got, ok, tt.want, tt.ok)
		}
	}
	self, ok := StartTicks(os.Getpid())
	if !ok || self == 0 {
		t.Errorf("StartTicks(self) = %d, %v; want a positive time", self, ok)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

func TestPidSnapshotSuspects(t *testing.T) {
	base := &pidSnapshot{pids: []int{1, 100, 500, 900}, lastPid: 500, tasks: 10, forks: 1000, pidMax: 32768}
	all := []int{1, 100, 500, 600, 900}
	tests := []struct {
		name string
		base *pidSnapshot
		now  pidSnapshot
		want []int
	}{
		{"no baseline", nil, pidSnapshot{pids: all, lastPid: 600, forks: 1001, pidMax: 32768}, all},
		{"a new pid", base, pidSnapshot{pids: all, lastPid: 600, forks: 1001, pidMax: 32768}, []int{600}},
		{"nothing new", base, pidSnapshot{pids: []int{1, 100, 900}, lastPid: 500, forks: 1000, pidMax: 32768}, nil},
		// 900 may have exited and been allocated again: the allocator went past it.
		{"a pid maybe reused", base, pidSnapshot{pids: []int{1, 100, 900}, lastPid: 901, forks: 1050, pidMax: 32768}, []int{900}},
		{"allocator wrapped to the start", base, pidSnapshot{pids: all, lastPid: 350, forks: 1100, pidMax: 32768}, []int{1, 100, 600, 900}},
		// (32768-300-10)/2 = 16229 forks can go all the way round.
		{"enough forks to go round", base, pidSnapshot{pids: all, lastPid: 500, forks: 1000 + 16229, pidMax: 32768}, all},
		{"just too few forks to go round", base, pidSnapshot{pids: all, lastPid: 500, forks: 1000 + 16228, pidMax: 32768}, []int{600}},
		{"pid_max changed", base, pidSnapshot{pids: all, lastPid: 600, forks: 1001, pidMax: 4194304}, all},
		{"fork count went back", base, pidSnapshot{pids: all, lastPid: 600, forks: 999, pidMax: 32768}, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.now.suspects(tt.base); !slices.Equal(got, tt.want) {
				t.Errorf("suspects = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChildFinderWithoutChildFiles checks the search for children on kernels that do not list them: a
// child started after the baseline is found, and the processes of the baseline are not even read.
func TestChildFinderWithoutChildFiles(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	f := &childFinder{probed: true, childFiles: false, childless: true}
	f.starting(true)
	if f.base == nil {
		t.Fatal("starting took no baseline")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	start, _ := StartTicks(cmd.Process.Pid)
	kids, ok := f.children(os.Getpid())
	if !ok || !slices.Contains(kids, child{pid: cmd.Process.Pid, start: start}) {
		t.Errorf("children = %v, %v; want %d, started at %d, among them", kids, ok, cmd.Process.Pid, start)
	}
	now, err := takeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if suspects := now.suspects(f.base); slices.Contains(suspects, os.Getppid()) || slices.Contains(suspects, os.Getpid()) {
		t.Errorf("suspects %v include this process or its parent, which the baseline has", suspects)
	}

	f.scanned(true, len(kids))
	f.starting(true)
	if f.childless {
		t.Errorf("childless after a start")
	}
	f.scanned(true, 0)
	if !f.childless {
		t.Errorf("not childless after a scan that found no child while no command ran")
	}
}
