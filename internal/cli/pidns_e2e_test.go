package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// The tests of issue 32: nothing a confined command starts outlives the
// factory process that started it, on the default sandbox. The command
// starts a daemon the way test code does — a double fork, setsid, SIGTERM
// and SIGHUP ignored — then factory (run, build, a Temporal worker) is
// killed: 1 s later no process of the command is alive, without `factory
// recover`.

// daemonCommand is an acceptance command that starts such a daemon (sleep,
// with argv[0] token, so that it can be found from outside its PID
// namespace; the command's own command line holds token too), creates
// started in the work tree and waits until release exists.
func daemonCommand(token, started, release string) string {
	return `python3 -c "import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['` + token + `', '1000'])
    os._exit(0)
os.wait()
open('` + started + `', 'w').close()
while not os.path.exists('` + release + `'): time.sleep(0.05)"`
}

// daemonToken is a token no other process's command line holds.
func daemonToken(t *testing.T) string {
	token := fmt.Sprintf("factory-test-daemon-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, pid := range aliveWith(token) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return token
}

// aliveWith lists the processes, zombies aside, whose command line holds
// token.
func aliveWith(token string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
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

// inPIDNamespaces reports whether factory's default sandbox here gives each
// command a PID namespace that dies with factory (so a recovery after a
// SIGKILL finds nothing of the command left to kill).
func inPIDNamespaces() bool { return sandbox.Detect().UserNamespaces }

// waitForDaemon waits until the command marked started and both it and its
// daemon run.
func waitForDaemon(t *testing.T, token, started string) {
	t.Helper()
	waitFor(t, "the command and its daemon", func() bool { return exists(started) && len(aliveWith(token)) >= 2 })
}

// nothingAliveAfter checks, 1 s after factory died, that no process of the
// command is alive.
//
// Only the processes alive before (those of the killed process's command)
// count: a successor may already run the same command again.
func nothingAliveAfter(t *testing.T, token string, before []int, what string) {
	t.Helper()
	time.Sleep(time.Second)
	var left []int
	for _, pid := range aliveWith(token) {
		if slices.Contains(before, pid) {
			left = append(left, pid)
		}
	}
	if len(left) != 0 {
		t.Errorf("1 s after %s, processes of the command are alive: %v", what, left)
	}
}

func TestRunSIGKILLLeavesNoDaemon(t *testing.T) {
	needNamespaces(t)
	token := daemonToken(t)
	wo := workOrder()
	wo["acceptance_commands"] = []string{daemonCommand(token, "daemon-started", ".git/never")}
	f := newFixture(t, wo, good(calcV2))
	run := factoryCmd(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "m", "--llm-base-url", f.srv.URL, "--timeout-seconds", "60")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	waitForDaemon(t, token, filepath.Join(f.repo, "daemon-started"))
	before := aliveWith(token)
	_ = run.Process.Kill()
	_ = run.Wait()
	nothingAliveAfter(t, token, before, "factory run's SIGKILL")
}

func TestBuildSIGKILLLeavesNoDaemon(t *testing.T) {
	needNamespaces(t)
	token := daemonToken(t)
	plan := buildPlan(releaseFile)
	wo02 := plan["work_orders"].([]any)[1].(map[string]any)
	wo02["acceptance_commands"].([]string)[0] = daemonCommand(token, startedFile, releaseFile)
	f := newBuildFixture(t, plan)
	srv := llmtest.Start(t, replyWO01, replyWO02)
	b := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(srv.URL)...)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	waitForDaemon(t, token, filepath.Join(f.repo, startedFile))
	before := aliveWith(token)
	_ = b.Process.Kill()
	_ = b.Wait()
	nothingAliveAfter(t, token, before, "factory build's SIGKILL")
}

// A worker SIGKILLed, or stopped with SIGTERM, while WO-02's command and
// its daemon run: 1 s after the worker is gone nothing of the step is
// alive; the other worker takes WO-02 over and the build passes as in
// TestTemporalWorkerKilled.
func TestTemporalWorkerLeavesNoDaemon(t *testing.T) {
	needNamespaces(t)
	addr := startTemporal(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			token := daemonToken(t)
			plan := buildPlan(releaseFile)
			wo02 := plan["work_orders"].([]any)[1].(map[string]any)
			wo02["acceptance_commands"].([]string)[0] = daemonCommand(token, startedFile, releaseFile)
			f := newBuildFixture(t, plan)
			url, remote := bareRemote(t, f.repo)
			routes := newRoutes(passingReplies)
			srv := llmtest.StartRouted(t, routes.route)
			env := []string{"OPENAI_API_KEY=k"}
			a := startWorker(t, addr, "worker-a", env, "--llm-base-url", srv.URL)
			s := submit(t, nil, temporalBuildArgs(addr, url, f, "--heartbeat-timeout", "5s")...)
			id := s.workflowID(t)
			waitUntil(t, time.Minute, "WO-02's command and its daemon on worker-a", func() bool {
				return exists(filepath.Join(a.cache(id), startedFile)) && len(aliveWith(token)) >= 2
			})
			b := startWorker(t, addr, "worker-b", env, "--llm-base-url", srv.URL)
			before := aliveWith(token)
			if err := a.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.done:
			case <-time.After(time.Minute):
				t.Fatalf("worker-a did not exit on %v\n%s", sig, a.out.String())
			}
			nothingAliveAfter(t, token, before, "worker-a's "+sig.String())
			waitUntil(t, time.Minute, "WO-02's command on worker-b", func() bool { return exists(filepath.Join(b.cache(id), startedFile)) })
			writeFiles(t, b.cache(id), map[string]string{releaseFile: ""})
			if code := s.wait(t, 60*time.Second); code != ExitPass {
				t.Fatalf("exit %d\n%s%s\nworker-a:\n%s", code, s.stdout.String(), s.stderr.String(), a.out.String())
			}
			res := temporalStatus(t, addr, id)
			if res.Verdict != builder.VerdictPass || res.WorkOrders[1].Worker != "worker-b" {
				t.Errorf("status: %+v", res)
			}
			clone := remoteBranch(t, remote, res.Branch)
			checkCommits(t, clone, git(t, f.repo, "rev-parse", "HEAD"), committed)
			// worker-b's command ended normally: its daemon went with it.
			if left := aliveWith(token); len(left) != 0 {
				t.Errorf("after the build, processes of WO-02's commands are alive: %v", left)
			}
		})
	}
}
