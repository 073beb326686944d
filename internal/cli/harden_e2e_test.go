package cli

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llmtest"
)

// Model-written code that plants a filter driver in git's config (or
// config.worktree) fails the attempt, even on exit 0, is not retried, and
// the driver never runs: the metadata is restored before the harness runs
// git again, and git never sees the API key anyway.
func TestRunGitMetadataChanged(t *testing.T) {
	for _, tt := range []struct {
		name, script string
		exit         int
		changed      string
	}{
		{"config and attributes, command passes", `
import os, sys
leak = sys.argv[1]
open(".git/config", "a").write("[filter \"x\"]\n\tclean = sh -c 'env > %s'\n" % leak)
os.makedirs(".git/info", exist_ok=True)
open(".git/info/attributes", "a").write("* filter=x\n")
`, 0, ".git/config"},
		{"config.worktree smudge, command fails", `
import subprocess, sys
leak = sys.argv[1]
subprocess.run(["git", "config", "extensions.worktreeConfig", "true"], check=True)
open(".git/config.worktree", "w").write("[filter \"x\"]\n\tsmudge = sh -c 'env > %s'\n\tclean = sh -c 'env > %s'\n" % (leak, leak))
open(".gitattributes", "w").write("* filter=x\n")
sys.exit(1)
`, 1, ".git/config.worktree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leak := filepath.Join(t.TempDir(), "leak")
			wo := workOrder()
			wo["acceptance_commands"] = []string{"python3 tools/plant.py " + leak}
			f := newFixture(t, wo, good(calcV2), good(calcV2))
			writeFiles(t, f.repo, map[string]string{"tools/plant.py": tt.script})
			git(t, f.repo, "add", "tools/plant.py")
			git(t, f.repo, "commit", "-q", "-m", "tools")
			f.baseline = treeSnapshot(t, f.repo)

			// Unconfined: the metadata check is what stands when no sandbox
			// can (see TestSandboxKeepsGitReadOnly for the confined run).
			res := f.run(t, "--max-attempts", "2", "--sandbox", "off")
			if res.code != ExitFail {
				t.Fatalf("exit %d, want %d\n%s", res.code, ExitFail, res.stderr)
			}
			s := f.summary(t, res)
			if s.TotalAttempts != 1 || s.Attempts[0].FailureBrief == nil || s.Attempts[0].FailureBrief.Stage != factory.StageGitMetadataChanged {
				t.Fatalf("attempts = %+v, want one attempt failed at %s", s.Attempts, factory.StageGitMetadataChanged)
			}
			if got := s.Attempts[0].Acceptance; len(got) != 1 || got[0].ExitCode != tt.exit {
				t.Errorf("acceptance = %+v, want the command recorded with exit %d", got, tt.exit)
			}
			if !strings.Contains(s.Attempts[0].FailureBrief.PrimaryErrorExcerpt, tt.changed) {
				t.Errorf("brief %q does not name %s", s.Attempts[0].FailureBrief.PrimaryErrorExcerpt, tt.changed)
			}
			if data, err := os.ReadFile(leak); err == nil {
				t.Fatalf("the planted filter ran (leaked %d bytes)", len(data))
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

// A repository with submodules is refused before anything is modified.
func TestRunRefusesSubmodules(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	head := git(t, f.repo, "rev-parse", "HEAD")
	git(t, f.repo, "update-index", "--add", "--cacheinfo", "160000,"+head+",vendor/sub")
	git(t, f.repo, "commit", "-q", "-m", "submodule")
	if err := os.MkdirAll(filepath.Join(f.repo, "vendor", "sub"), 0o755); err != nil { // an unpopulated submodule
		t.Fatal(err)
	}
	f.baseline = treeSnapshot(t, f.repo)
	res := f.run(t)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "submodule") {
		t.Fatalf("exit %d, want %d naming the submodule\n%s", res.code, ExitUsage, res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("model called %d times", n)
	}
}

// A file name that is not UTF-8 could not go through the journal unchanged
// (a recovery would take the user's ignored file for one the attempt made):
// refused before any model call, naming the file, nothing touched.
func TestRunRefusesNameNotUTF8(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	writeFiles(t, f.repo, map[string]string{".venv/caf\xe9.txt": "keep me\n"})
	f.baseline = treeSnapshot(t, f.repo)
	res := f.run(t)
	if res.code != ExitUsage || !strings.Contains(res.stderr, `".venv/caf\xe9.txt"`) || !strings.Contains(res.stderr, "not valid UTF-8") {
		t.Fatalf("exit %d, want %d naming the file\n%s", res.code, ExitUsage, res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("model called %d times", n)
	}
}

// --out inside the main repository's git directory, seen from a linked
// worktree, is refused.
func TestRunRefusesOutInsideGitDir(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, f.repo, "worktree", "add", "-q", "-b", "feature", wt)
	res := runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", wt, "--work-order", f.woPath,
		"--out", filepath.Join(f.repo, ".git", "factory-out"), "--llm-model", "m", "--llm-base-url", f.srv.URL)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "inside the git directory") {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitUsage, res.stderr)
	}
}

// slowAccept is an acceptance command that keeps changing the repository
// until it is killed.
const slowAccept = `python3 -c "import time
while True:
    open('calc.py', 'a').write('# x\n'); time.sleep(0.05)"`

// waitFor polls until cond holds or fails the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, 20*time.Second, what, cond)
}

// waitUntil polls until cond holds or fails the test after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// A second factory on the same repository, directly or through a linked
// worktree, exits 2 at once naming the holder's pid, with nothing modified.
func TestRunLockHeld(t *testing.T) {
	wo := workOrder()
	wo["acceptance_commands"] = []string{slowAccept}
	f := newFixture(t, wo, good(calcV2))
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, f.repo, "worktree", "add", "-q", "-b", "feature", wt)
	f.baseline = treeSnapshot(t, f.repo)
	first := factoryCmd(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "m", "--llm-base-url", f.srv.URL, "--timeout-seconds", "15", "--max-attempts", "1")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	// The command's 15 s outlast both refusals, even on a loaded machine.
	waitFor(t, "the first run's command", func() bool { return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) })
	wtBefore := treeSnapshot(t, wt)
	for _, repo := range []string{f.repo, wt} {
		res := runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", repo, "--work-order", f.woPath,
			"--out", filepath.Join(t.TempDir(), "out2"), "--llm-model", "m", "--llm-base-url", f.srv.URL)
		if res.code != ExitUsage || !strings.Contains(res.stderr, "pid "+strconv.Itoa(first.Process.Pid)) {
			t.Errorf("second run via %s: exit %d, want %d naming pid %d\n%s", repo, res.code, ExitUsage, first.Process.Pid, res.stderr)
		}
	}
	sameTree(t, wtBefore, treeSnapshot(t, wt))
	if err := first.Wait(); err == nil || first.ProcessState.ExitCode() != ExitFail {
		t.Errorf("first run: %v, want exit %d (its command times out)", err, ExitFail)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

// SIGKILL in the middle of a command leaves a journal; the next run refuses
// and points at `factory recover`, which kills the orphaned command and
// restores the baseline exactly, including an ignored file the attempt
// overwrote.
func TestRunKilledThenRecover(t *testing.T) {
	wo := workOrder()
	wo["allowed_files"] = []string{"calc.py", ".env"}
	wo["acceptance_commands"] = []string{slowAccept}
	reply := llmtest.Reply{Content: llmtest.Proposal("x",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: calcV2},
		llmtest.Write{Path: ".env", BaseSHA256: sha("SECRET=1\n"), Content: "SECRET=overwritten\n"})}
	f := newFixture(t, wo, reply)
	run := factoryCmd(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "m", "--llm-base-url", f.srv.URL, "--timeout-seconds", "60")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// Until the command itself runs (a confined one starts as factory's
	// sandbox init), a kill of factory may take it down too.
	waitFor(t, "the command to run", func() bool {
		data, _ := os.ReadFile(filepath.Join(f.repo, "calc.py"))
		return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && strings.Contains(string(data), "# x")
	})
	run.Process.Kill()
	run.Wait()

	res := f.run(t)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "factory recover --repo") {
		t.Fatalf("run after the kill: exit %d, want %d pointing at factory recover\n%s", res.code, ExitUsage, res.stderr)
	}
	rec := runFactory(t, nil, "recover", "--repo", f.repo)
	// Confined in a PID namespace, the command may be gone already: it dies with factory.
	if rec.code != ExitPass || !strings.Contains(rec.stdout, "recovered") || !strings.Contains(rec.stderr, "killed the command") && !inPIDNamespaces() {
		t.Fatalf("recover: exit %d\nstdout: %s\nstderr: %s", rec.code, rec.stdout, rec.stderr)
	}
	time.Sleep(300 * time.Millisecond) // a surviving command would append meanwhile
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))

	again := runFactory(t, nil, "recover", "--repo", f.repo)
	if again.code != ExitPass || !strings.Contains(again.stdout, "nothing to recover") {
		t.Errorf("second recover: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
}

// File modes come back after rollback: a 0600 file the attempt rewrote, a
// file a command chmodded, a directory a command locked.
func TestRunRestoresModes(t *testing.T) {
	wo := workOrder()
	wo["acceptance_commands"] = []string{`python3 -c "import os; os.chmod('README.md', 0o666); os.makedirs('locked/in'); os.chmod('locked', 0); raise SystemExit(1)"`}
	f := newFixture(t, wo, good(calcV2))
	for p, mode := range map[string]os.FileMode{"calc.py": 0o600, "README.md": 0o444, ".env": 0o600, "scripts": 0o750} {
		if err := os.Chmod(filepath.Join(f.repo, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	f.baseline = treeSnapshot(t, f.repo)
	res := f.run(t, "--max-attempts", "1")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

// A command that creates a nested repository gets its verdict from its
// exit code, and the repository is removed like any new directory.
func TestRunRemovesNestedRepository(t *testing.T) {
	wo := workOrder()
	wo["acceptance_commands"] = []string{`python3 -c "import subprocess; subprocess.run(['git', 'init', '-q', 'scratch'], check=True); raise SystemExit(1)"`}
	f := newFixture(t, wo, good(calcV2), good(calcV2))
	res := f.run(t, "--max-attempts", "2")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitFail, res.stderr)
	}
	s := f.summary(t, res)
	if s.TotalAttempts != 2 || !slices.Contains(s.Attempts[0].Rollback.RemovedFiles, "scratch/") {
		t.Errorf("summary attempts = %+v", s.Attempts)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

// A reader that goes away (factory run ... 2>&1 | head -1) does not kill
// the run: it finishes, writes its summary, and exits with the verdict's code.
func TestRunSurvivesClosedOutput(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	cmd := factoryCmd(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "m", "--llm-base-url", f.srv.URL)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	r.Close()
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("factory was killed by %v", ws.Signal())
	}
	if err != nil {
		t.Fatalf("factory: %v (want exit 0, the PASS verdict)", err)
	}
	runs, _ := filepath.Glob(filepath.Join(f.out, "*", "run_summary.json"))
	if len(runs) != 1 {
		t.Fatalf("run summaries: %q", runs)
	}
	var s factory.RunSummary
	readJSON(t, runs[0], &s)
	if s.Verdict != factory.VerdictPass {
		t.Errorf("verdict %s", s.Verdict)
	}
}

// A provider failure is not the model's fault: no attempt is counted, the
// run ends at once as ERROR (exit 3) with a hint, nothing was written, and
// no provider text reaches a prompt. 503s are retried without an attempt.
func TestRunProviderErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replies  []llmtest.Reply
		hint     string
		requests int
	}{
		{"401", []llmtest.Reply{{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: sk-abc","type":"invalid_request_error","code":"invalid_api_key"}}`}}, "OPENAI_API_KEY", 1},
		{"404 model", []llmtest.Reply{{Status: 404, Body: `{"error":{"message":"The model 'm' does not exist","type":"invalid_request_error","code":"model_not_found"}}`}}, "--llm-model", 1},
		{"context too long", []llmtest.Reply{{Status: 400, Body: `{"error":{"message":"maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`}}, "context is too long", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, workOrder(), tt.replies...)
			res := f.run(t)
			if res.code != ExitInternal || !strings.Contains(res.stderr, tt.hint) || !strings.Contains(res.stderr, "nothing was written") {
				t.Fatalf("exit %d, want %d with %q and \"nothing was written\"\n%s", res.code, ExitInternal, tt.hint, res.stderr)
			}
			s := f.summary(t, res)
			if s.Verdict != factory.VerdictError || s.TotalAttempts != 0 {
				t.Errorf("verdict %s, attempts %d; want ERROR, 0", s.Verdict, s.TotalAttempts)
			}
			if n := len(f.srv.Requests()); n != tt.requests {
				t.Errorf("requests = %d, want %d", n, tt.requests)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
	t.Run("closed port", func(t *testing.T) {
		f := newFixture(t, workOrder())
		url := "http://127.0.0.1:1/v1"
		res := runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", f.repo, "--work-order", f.woPath,
			"--out", f.out, "--llm-model", "m", "--llm-base-url", url)
		if res.code != ExitInternal || !strings.Contains(res.stderr, "--llm-base-url") || !strings.Contains(res.stderr, "127.0.0.1:1") {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
	})
	t.Run("503 twice then success", func(t *testing.T) {
		busy := llmtest.Reply{Status: 503, Body: `{"error":{"message":"overloaded"}}`}
		f := newFixture(t, workOrder(), busy, busy, good(calcV2))
		res := f.run(t)
		if res.code != ExitPass {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		if s := f.summary(t, res); s.TotalAttempts != 1 {
			t.Errorf("attempts = %d, want 1", s.TotalAttempts)
		}
		if strings.Contains(f.srv.UserPrompt(2), "overloaded") {
			t.Error("provider text reached the prompt")
		}
	})
}
