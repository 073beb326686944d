package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// daemonScript starts a daemon the way test code does: a double fork, setsid, SIGTERM and SIGHUP
// ignored; the daemon is `sleep` with argv[0] token, so that it can be found from outside its PID
// namespace. Then it marks started and waits.
func daemonScript(token, started string) string {
	return fmt.Sprintf(`import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['%s', '1000'])
    os._exit(0)
os.wait()
open('%s', 'w').close()
time.sleep(1000)`, token, started)
}

// alive lists the processes whose command line contains token and that are not zombies.
func alive(token string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if _, rest, ok := bytes.Cut(stat, []byte(") ")); ok && len(rest) > 0 && rest[0] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

func killAll(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// The helper process of TestDaemonDiesWithFactory: factory running a confined command (or, with
// SANDBOX_TEST_OFF, an unconfined one) until it is killed.
func TestHelperFactory(t *testing.T) {
	repo := os.Getenv("SANDBOX_TEST_REPO")
	if repo == "" {
		t.Skip("a helper process for TestDaemonDiesWithFactory")
	}
	var p *sandbox.Policy
	if os.Getenv("SANDBOX_TEST_OFF") == "" {
		var err error
		if p, err = sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: repo}); err != nil {
			t.Fatal(err)
		}
	}
	proc.Run(context.Background(), proc.Spec{Argv: []string{"python3", "-c", os.Getenv("SANDBOX_TEST_SCRIPT")}, Dir: repo, Sandbox: p})
}

// A daemon a confined command starts (double fork, setsid, SIGTERM and SIGHUP ignored) dies with
// factory when factory is SIGKILLed: the command runs under an init that is PID 1 of its own PID
// namespace and dies with factory. Unconfined, the same daemon outlives factory (which is why
// --sandbox off keeps the process group kill and journal-based recovery).
func TestDaemonDiesWithFactory(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "confined", true: "off"}[off], func(t *testing.T) {
			f := newFixture(t)
			if !off {
				prepare(t, f)
			}
			token := fmt.Sprintf("factory-test-daemon-%d-%d", os.Getpid(), time.Now().UnixNano())
			cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperFactory$")
			cmd.Env = append(os.Environ(), "SANDBOX_TEST_REPO="+f.repo, "SANDBOX_TEST_SCRIPT="+daemonScript(token, "started"))
			if off {
				cmd.Env = append(cmd.Env, "SANDBOX_TEST_OFF=1")
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { killAll(alive(token)) })
			deadline := time.Now().Add(20 * time.Second)
			for !exists(filepath.Join(f.repo, "started")) || len(alive(token)) < 2 {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("the command and its daemon did not start (alive: %v)", alive(token))
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			time.Sleep(time.Second)
			left := alive(token)
			if off {
				if len(left) == 0 {
					t.Errorf("unconfined, the daemon died with factory: this test cannot tell")
				}
				return
			}
			if len(left) != 0 {
				t.Errorf("1 s after factory's SIGKILL, processes of the command are alive: %v", left)
			}
		})
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// The command runs as PID 2 under the init, sees only its namespace's processes in /proc, and its
// exit code, death by a signal and the process group's SIGTERM (TermGrace) are as without the
// PID namespace.
func TestCommandRunsUnderItsOwnInit(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	res, out := sh(t, p, f.repo, `echo "pid $$"; ls /proc | grep '^[0-9]' | wc -l`)
	pid, n, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if res.ExitCode != 0 || pid != "pid 2" || n > "5" || len(n) != 1 {
		t.Errorf("exit %d, output %q: want pid 2 and at most 5 processes in /proc", res.ExitCode, out)
	}
	for script, want := range map[string]string{
		"kill -SEGV $$": "killed by signal: segmentation fault",
		"kill -KILL $$": "killed by signal: killed",
		"kill -USR1 $$": "killed by signal: user defined signal 1", // not HUP: nohup would have the command ignore it
	} {
		if res, _ := sh(t, p, f.repo, script); res.ExitCode != -1 || res.Err != want {
			t.Errorf("%s: exit %d, %q; want %q", script, res.ExitCode, res.Err, want)
		}
	}
	if res, _ := sh(t, p, f.repo, "exit 255"); res.ExitCode != 255 || res.Err != "" {
		t.Errorf("exit 255: exit %d, %q", res.ExitCode, res.Err)
	}
	// A timeout with TermGrace: the command's SIGTERM handler runs and it exits on its own.
	log := filepath.Join(t.TempDir(), "out.txt")
	res = proc.Run(context.Background(), proc.Spec{Argv: []string{"sh", "-c", `trap 'echo term > term.txt; exit 0' TERM; while :; do sleep 0.05; done`},
		Dir: f.repo, Stdout: log, Stderr: log, Timeout: 300 * time.Millisecond, TermGrace: 5 * time.Second, Sandbox: p})
	if !res.TimedOut || res.Duration > 4*time.Second || !exists(filepath.Join(f.repo, "term.txt")) {
		t.Errorf("SIGTERM on timeout: %+v, term.txt written: %v", res, exists(filepath.Join(f.repo, "term.txt")))
	}
}
