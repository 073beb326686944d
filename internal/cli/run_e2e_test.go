package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llmtest"
)

const (
	calcV1 = "def add(a, b):\n    return a + b\n"
	calcV2 = "def add(a, b):\n    return a + b\n\n\ndef multiply(a, b):\n    return a * b\n"
	// calcBad defines multiply but gets it wrong: acceptance fails.
	calcBad = "def add(a, b):\n    return a + b\n\n\ndef multiply(a, b):\n    return a + b\n"
)

// baseFiles is the committed baseline of most tests. Global verification is
// scripts/verify.sh, which also leaves ignored __pycache__ files behind.
var baseFiles = map[string]string{
	"calc.py":           calcV1,
	"scripts/verify.sh": "set -e\npython3 -m compileall -q calc.py\n",
	".gitignore":        ".env\n.venv/\n__pycache__/\n",
	"README.md":         "demo\n",
}

// workOrder is the default work order; tests adjust it.
func workOrder() map[string]any {
	return map[string]any{
		"id":                  "WO-01",
		"title":               "Add multiply",
		"intent":              "Add multiply(a, b) to calc.py.",
		"allowed_files":       []string{"calc.py", "test_calc.py"},
		"forbidden":           []string{"README.md"},
		"acceptance_commands": []string{`python3 -c "from calc import multiply; assert multiply(3, 4) == 12"`},
		"context_files":       []string{"calc.py"},
	}
}

type fixture struct {
	repo, out, woPath string
	srv               *llmtest.Server
	baseline          map[string]string
}

// newFixture makes a repo with the baseline files plus ignored user files
// (.env and a .venv tree) that every rollback must keep.
func newFixture(t *testing.T, wo map[string]any, replies ...llmtest.Reply) *fixture {
	t.Helper()
	f := &fixture{repo: newRepo(t, baseFiles), out: filepath.Join(t.TempDir(), "out")}
	writeFiles(t, f.repo, map[string]string{
		".env":                      "SECRET=1\n",
		".venv/lib/site.py":         "# user venv\n",
		".venv/bin/activate":        "# activate\n",
		".venv/lib/deep/nested.txt": "x\n",
	})
	f.woPath = filepath.Join(t.TempDir(), "wo.json")
	data, _ := json.Marshal(wo)
	if err := os.WriteFile(f.woPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv = llmtest.Start(t, replies...)
	f.baseline = treeSnapshot(t, f.repo)
	return f
}

func (f *fixture) run(t *testing.T, extra ...string) runOut {
	t.Helper()
	args := append([]string{"run", "--repo", f.repo, "--work-order", f.woPath, "--out", f.out,
		"--llm-model", "test-model", "--llm-base-url", f.srv.URL, "--timeout-seconds", "20"}, extra...)
	return runFactory(t, []string{"OPENAI_API_KEY=test-key"}, args...)
}

func (f *fixture) summary(t *testing.T, res runOut) factory.RunSummary {
	t.Helper()
	path := summaryPath(t, res)
	var s factory.RunSummary
	readJSON(t, path, &s)
	return s
}

func summaryPath(t *testing.T, res runOut) string {
	t.Helper()
	for _, line := range strings.Split(res.stdout, "\n") {
		if p, ok := strings.CutPrefix(line, "run summary: "); ok {
			return p
		}
	}
	t.Fatalf("no run summary path in stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	return ""
}

func good(content string) llmtest.Reply {
	return llmtest.Reply{Content: llmtest.Proposal("add multiply", llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: content})}
}

func TestRunPassFirstAttempt(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	res := f.run(t)
	if res.code != ExitPass {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "verdict: PASS") {
		t.Errorf("stdout lacks the verdict: %q", res.stdout)
	}
	s := f.summary(t, res)
	if s.Verdict != "PASS" || s.TotalAttempts != 1 || s.RepoTreeHashAfter == nil || len(*s.RepoTreeHashAfter) != 40 {
		t.Errorf("summary = %+v", s)
	}
	got, _ := os.ReadFile(filepath.Join(f.repo, "calc.py"))
	if string(got) != calcV2 {
		t.Errorf("calc.py = %q", got)
	}
	if st := git(t, f.repo, "status", "--porcelain"); st != "M calc.py" {
		t.Errorf("git status = %q, want the change left uncommitted", st)
	}
	if *s.RepoTreeHashAfter == git(t, f.repo, "rev-parse", "HEAD^{tree}") {
		t.Errorf("tree hash after equals the baseline tree")
	}
	runDir := filepath.Dir(summaryPath(t, res))
	for _, name := range []string{
		"work_order.json", "run_summary.json",
		"attempt_1/se_prompt.txt", "attempt_1/llm_response_raw.txt", "attempt_1/llm_response.json",
		"attempt_1/proposed_writes.json", "attempt_1/write_result.json",
		"attempt_1/verify_result.json", "attempt_1/acceptance_result.json",
		"attempt_1/logs/verify_1.stdout.txt", "attempt_1/logs/acceptance_1.stderr.txt",
	} {
		if _, err := os.Stat(filepath.Join(runDir, name)); err != nil {
			t.Errorf("artifact missing: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(runDir, "attempt_1/failure_brief.json")); err == nil {
		t.Errorf("failure_brief.json written for a passing attempt")
	}
	prompt := f.srv.UserPrompt(0)
	for _, want := range []string{"calc.py (sha256 " + sha(calcV1), "test_calc.py (does not exist yet; current sha256 " + sha(""), "bash scripts/verify.sh", "README.md"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	rf, _ := f.srv.Requests()[0]["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Errorf("response_format = %v, want strict json_schema", rf)
	}
}

func TestRunPassOnSecondAttemptAfterRollback(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcBad), good(calcV2))
	res := f.run(t)
	if res.code != ExitPass {
		t.Fatalf("exit %d, want 0\n%s", res.code, res.stderr)
	}
	s := f.summary(t, res)
	if s.TotalAttempts != 2 || s.Attempts[0].FailureBrief == nil || s.Attempts[0].FailureBrief.Stage != factory.StageAcceptanceFailed {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	// Attempt 2 started from the baseline: its base hash was the v1 hash,
	// which only matches if attempt 1's write was rolled back.
	prompt := f.srv.UserPrompt(1)
	for _, want := range []string{"The previous attempt failed", "stage: acceptance_failed", "AssertionError", "calc.py (sha256 " + sha(calcV1)} {
		if !strings.Contains(prompt, want) {
			t.Errorf("second prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(f.srv.UserPrompt(0), "previous attempt") {
		t.Errorf("first prompt mentions a previous attempt")
	}
	runDir := filepath.Dir(summaryPath(t, res))
	var brief factory.FailureBrief
	readJSON(t, filepath.Join(runDir, "attempt_1", "failure_brief.json"), &brief)
	if brief.Stage != factory.StageAcceptanceFailed || brief.ExitCode == nil || *brief.ExitCode != 1 || len([]rune(brief.PrimaryErrorExcerpt)) > factory.MaxExcerptChars {
		t.Errorf("brief = %+v", brief)
	}
}

func TestRunFailRestoresBaselineExactly(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcBad), good(calcBad))
	res := f.run(t)
	if res.code != ExitFail {
		t.Fatalf("exit %d, want 1\n%s", res.code, res.stderr)
	}
	s := f.summary(t, res)
	if s.Verdict != "FAIL" || s.TotalAttempts != 2 || s.RepoTreeHashAfter != nil {
		t.Errorf("summary = %+v", s)
	}
	// verify.sh ran compileall, which left ignored __pycache__ files; rollback
	// removed those and kept the user's .env and .venv.
	if s.Attempts[1].Rollback == nil || len(s.Attempts[1].Rollback.RemovedFiles) == 0 {
		t.Errorf("rollback removed no ignored files; expected __pycache__ from compileall")
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if st := git(t, f.repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status after FAIL = %q", st)
	}
}

// TestRunFailureStages produces every failure stage on purpose and checks
// the stage, whether it was retried, and that the repo is back at baseline.
func TestRunFailureStages(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(wo map[string]any)
		replies  []llmtest.Reply
		stage    string
		attempts int
		requests int
		excerpt  string
	}{
		{
			name: "preflight: precondition false, model never called, not retried",
			edit: func(wo map[string]any) {
				wo["preconditions"] = []map[string]string{{"kind": "file_absent", "path": "calc.py"}}
			},
			stage:    factory.StagePreflight,
			attempts: 1, requests: 0, excerpt: "PLANNER-CONTRACT BUG",
		},
		{
			name:     "llm_output_invalid: reply wrapped in prose",
			replies:  []llmtest.Reply{{Content: "Sure! Here it is:\n" + good(calcV2).Content}, {Content: "```json\n" + good(calcV2).Content + "\n```"}},
			stage:    factory.StageLLMOutputInvalid,
			attempts: 2, requests: 2, excerpt: "no prose or markdown fences",
		},
		{
			name:     "write_scope_violation: file outside allowed_files",
			replies:  []llmtest.Reply{scopeReply("other.py"), scopeReply("other.py")},
			stage:    factory.StageWriteScopeViolation,
			attempts: 2, requests: 2, excerpt: "not in allowed_files",
		},
		{
			name: "stale_context: wrong base hash",
			replies: []llmtest.Reply{
				{Content: llmtest.Proposal("x", llmtest.Write{Path: "calc.py", BaseSHA256: sha("old"), Content: calcV2})},
				{Content: llmtest.Proposal("x", llmtest.Write{Path: "calc.py", BaseSHA256: sha(""), Content: calcV2})},
			},
			stage:    factory.StageStaleContext,
			attempts: 2, requests: 2, excerpt: "does not match the current content",
		},
		{
			name:     "verify_failed: syntax error caught by scripts/verify.sh",
			replies:  []llmtest.Reply{good("def broken(:\n"), good("def broken(:\n")},
			stage:    factory.StageVerifyFailed,
			attempts: 2, requests: 2, excerpt: "SyntaxError",
		},
		{
			name: "acceptance_failed: postcondition not satisfied",
			edit: func(wo map[string]any) {
				wo["postconditions"] = []map[string]string{{"kind": "file_exists", "path": "test_calc.py"}}
			},
			replies:  []llmtest.Reply{good(calcV2), good(calcV2)},
			stage:    factory.StageAcceptanceFailed,
			attempts: 2, requests: 2, excerpt: "postcondition failed",
		},
		{
			// The first write creates file "lib"; the second needs "lib" to
			// be a directory. Both pass the checks, which see neither yet.
			name: "write_failed: a later write fails after an earlier one landed; not retried",
			edit: func(wo map[string]any) { wo["allowed_files"] = []string{"calc.py", "lib", "lib/util.py"} },
			replies: []llmtest.Reply{{Content: llmtest.Proposal("x",
				llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: calcV2},
				llmtest.Write{Path: "lib", BaseSHA256: sha(""), Content: "x = 1\n"},
				llmtest.Write{Path: "lib/util.py", BaseSHA256: sha(""), Content: "y = 2\n"},
			)}},
			stage:    factory.StageWriteFailed,
			attempts: 1, requests: 1, excerpt: "not a directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wo := workOrder()
			if tt.edit != nil {
				tt.edit(wo)
			}
			f := newFixture(t, wo, tt.replies...)
			res := f.run(t)
			if res.code != ExitFail {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			s := f.summary(t, res)
			last := s.Attempts[len(s.Attempts)-1].FailureBrief
			if s.TotalAttempts != tt.attempts || last == nil || last.Stage != tt.stage {
				t.Fatalf("attempts=%d stage=%+v, want %d %s", s.TotalAttempts, last, tt.attempts, tt.stage)
			}
			if !strings.Contains(last.PrimaryErrorExcerpt, tt.excerpt) {
				t.Errorf("excerpt %q lacks %q", last.PrimaryErrorExcerpt, tt.excerpt)
			}
			if n := len(f.srv.Requests()); n != tt.requests {
				t.Errorf("model requests = %d, want %d", n, tt.requests)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

func scopeReply(path string) llmtest.Reply {
	return llmtest.Reply{Content: llmtest.Proposal("x", llmtest.Write{Path: path, BaseSHA256: sha(""), Content: "x = 1\n"})}
}

// TestRunRefusesEscapingWrites proposes writes that would leave the allowed
// area; each is refused before anything is written, inside or outside the repo.
func TestRunRefusesEscapingWrites(t *testing.T) {
	tests := []struct {
		name, path, excerpt string
		allowed             []string
	}{
		{name: "parent directory", path: "../outside/evil.py", excerpt: "escapes the repository"},
		{name: "absolute path", path: "OUTSIDE/abs.py", excerpt: "is absolute"},
		{name: "symlinked directory", path: "link/evil.py", allowed: []string{"calc.py", "link/evil.py"}, excerpt: "is a symlink"},
		{name: "git hooks", path: ".git/hooks/pre-commit", excerpt: "inside a .git directory"},
		{name: "forbidden file", path: "README.md", excerpt: "forbidden"},
		{name: "dot-dot inside", path: "sub/../../outside/evil.py", excerpt: "escapes the repository"},
		{name: "allowed file not written as listed", path: "./test_calc.py", excerpt: "not written as listed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			wo := workOrder()
			if tt.allowed != nil {
				wo["allowed_files"] = tt.allowed
			}
			path := strings.ReplaceAll(tt.path, "OUTSIDE", outside)
			// Both the bad write and a legitimate one: nothing may be written.
			reply := llmtest.Reply{Content: llmtest.Proposal("x",
				llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: calcV2},
				llmtest.Write{Path: path, BaseSHA256: sha(""), Content: "import os\n"},
			)}
			f := newFixture(t, wo, reply)
			if err := os.Symlink(outside, filepath.Join(f.repo, "link")); err != nil {
				t.Fatal(err)
			}
			git(t, f.repo, "add", "link")
			git(t, f.repo, "commit", "-q", "-m", "link")
			// Put the outside dir next to the repo so ../outside resolves to it.
			if err := os.Symlink(outside, filepath.Join(filepath.Dir(f.repo), "outside")); err != nil {
				t.Fatal(err)
			}
			f.baseline = treeSnapshot(t, f.repo)
			res := f.run(t, "--max-attempts", "1")
			if res.code != ExitFail {
				t.Fatalf("exit %d\n%s", res.code, res.stderr)
			}
			brief := f.summary(t, res).Attempts[0].FailureBrief
			if brief == nil || brief.Stage != factory.StageWriteScopeViolation || !strings.Contains(brief.PrimaryErrorExcerpt, tt.excerpt) {
				t.Errorf("brief = %+v, want %s mentioning %q", brief, factory.StageWriteScopeViolation, tt.excerpt)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("something was written outside the repo: %v", entries)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

// TestRunCommandTimeouts checks that a command sleeping past its timeout and
// one whose grandchild keeps stdout open both end promptly. The elapsed-time
// bound is a hang detector, far above the expected second or two.
func TestRunCommandTimeouts(t *testing.T) {
	tests := []struct {
		name, command string
		timedOut      bool
	}{
		{name: "sleeps past the timeout", command: "sleep 60", timedOut: true},
		{name: "grandchild holds stdout after the child fails", command: `bash -c "sleep 60 & echo started; exit 1"`},
		{name: "grandchild holds stdout past the timeout", command: `bash -c "sleep 60 & sleep 60"`, timedOut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wo := workOrder()
			wo["acceptance_commands"] = []string{tt.command}
			f := newFixture(t, wo, good(calcV2))
			start := time.Now()
			// Verification is a trivial command: the default one (Python)
			// can itself take more than the 1 s timeout on a loaded machine.
			res := f.run(t, "--max-attempts", "1", "--timeout-seconds", "1", "--verify-command", "true")
			if elapsed := time.Since(start); elapsed > 30*time.Second {
				t.Fatalf("run took %v: a command was not killed", elapsed)
			}
			if res.code != ExitFail {
				t.Fatalf("exit %d\n%s", res.code, res.stderr)
			}
			a := f.summary(t, res).Attempts[0]
			if len(a.Acceptance) != 1 || a.Acceptance[0].TimedOut != tt.timedOut || a.Acceptance[0].ExitCode == 0 {
				t.Errorf("acceptance = %+v", a.Acceptance)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

func TestRunMissingBinaryIsExitMinusOne(t *testing.T) {
	wo := workOrder()
	wo["acceptance_commands"] = []string{"no-such-binary-factory-test --flag"}
	f := newFixture(t, wo, good(calcV2))
	res := f.run(t, "--max-attempts", "1")
	a := f.summary(t, res).Attempts[0]
	if res.code != ExitFail || a.Acceptance[0].ExitCode != -1 || !strings.Contains(a.Acceptance[0].Error, "not found") {
		t.Errorf("exit %d, acceptance = %+v", res.code, a.Acceptance)
	}
}

// TestRunRestoresOverwrittenIgnoredFile: an allowed file that is ignored by
// git cannot be restored by git; the harness keeps its bytes itself.
func TestRunRestoresOverwrittenIgnoredFile(t *testing.T) {
	wo := workOrder()
	wo["allowed_files"] = []string{"calc.py", ".env"}
	reply := llmtest.Reply{Content: llmtest.Proposal("x",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: calcBad},
		llmtest.Write{Path: ".env", BaseSHA256: sha("SECRET=1\n"), Content: "SECRET=overwritten\n"},
	)}
	f := newFixture(t, wo, reply)
	res := f.run(t, "--max-attempts", "1")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

func TestRunRecordReplayReproducesArtifacts(t *testing.T) {
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	// A reply that is not a proposal, then code whose traceback names a file
	// by its absolute path, then a pass: the retry prompts must not depend on
	// where the repo is.
	calcRaises := calcV1 + "\n\ndef multiply(a, b):\n    raise ValueError('nope')\n"
	rec := newFixture(t, workOrder(), llmtest.Reply{Content: "I cannot do that."}, good(calcRaises), good(calcV2))
	res := rec.run(t, "--record", transcript, "--max-attempts", "3")
	if res.code != ExitPass {
		t.Fatalf("recording run: exit %d\n%s", res.code, res.stderr)
	}
	recorded := summaryPath(t, res)

	// The same baseline in a fresh place, answered from the transcript with
	// the server gone: a replay needs neither network nor key.
	rep := newFixture(t, workOrder())
	if git(t, rep.repo, "rev-parse", "HEAD") != git(t, rec.repo, "rev-parse", "HEAD") {
		t.Fatal("fixtures do not share a baseline commit")
	}
	res2 := runFactory(t, []string{"OPENAI_API_KEY="}, "run", "--repo", rep.repo, "--work-order", rep.woPath, "--out", rep.out,
		"--llm-model", "test-model", "--llm-base-url", "http://127.0.0.1:9/v1", "--timeout-seconds", "20", "--replay", transcript, "--max-attempts", "3")
	if res2.code != ExitPass {
		t.Fatalf("replay run: exit %d\n%s", res2.code, res2.stderr)
	}
	replayed := summaryPath(t, res2)
	recDir, repDir := filepath.Dir(recorded), filepath.Dir(replayed)
	if filepath.Base(recDir) != filepath.Base(repDir) {
		t.Errorf("run ids differ: %s vs %s", recDir, repDir)
	}
	files := listDir(t, recDir)
	if diff := cmp.Diff(files, listDir(t, repDir)); diff != "" {
		t.Fatalf("artifact lists differ (-recorded +replayed):\n%s", diff)
	}
	for _, name := range files {
		a, b := normalized(t, filepath.Join(recDir, name), rec.repo), normalized(t, filepath.Join(repDir, name), rep.repo)
		if a != b {
			t.Errorf("artifact %s differs between recording and replay", name)
		}
	}
	var s1, s2 factory.RunSummary
	readJSON(t, recorded, &s1)
	readJSON(t, replayed, &s2)
	if s1.TotalAttempts != 3 || !strings.Contains(s1.Attempts[1].FailureBrief.PrimaryErrorExcerpt, `File "calc.py"`) {
		t.Errorf("attempts = %d, second brief %+v; want 3 attempts and a repo-relative traceback", s1.TotalAttempts, s1.Attempts[1].FailureBrief)
	}
	if *s1.RepoTreeHashAfter != *s2.RepoTreeHashAfter {
		t.Errorf("tree hashes differ: %s vs %s", *s1.RepoTreeHashAfter, *s2.RepoTreeHashAfter)
	}
}

var durationField = regexp.MustCompile(`"duration_seconds": [0-9.e+-]+`)

// normalized is an artifact without what legitimately differs between a
// recording and its replay: durations, and the repo's absolute path in the
// full command logs.
func normalized(t *testing.T, path, repo string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(repo)
	text := strings.ReplaceAll(string(data), root, "REPO")
	return durationField.ReplaceAllString(text, `"duration_seconds": 0`)
}

func TestRunReplayMismatchNamesTheRequest(t *testing.T) {
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	rec := newFixture(t, workOrder(), good(calcV2))
	if res := rec.run(t, "--record", transcript); res.code != ExitPass {
		t.Fatalf("recording run: exit %d\n%s", res.code, res.stderr)
	}
	wo := workOrder()
	wo["intent"] = "Add multiply(a, b) to calc.py, and document it."
	rep := newFixture(t, wo)
	res := runFactory(t, nil, "run", "--repo", rep.repo, "--work-order", rep.woPath, "--out", rep.out,
		"--llm-model", "test-model", "--replay", transcript)
	if res.code != ExitInternal || !strings.Contains(res.stderr, "request #1 differs") || !strings.Contains(res.stderr, "messages[1].content") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if s := rep.summary(t, res); s.Verdict != factory.VerdictError || !strings.Contains(s.Error, "request #1") {
		t.Errorf("summary = %+v", s)
	}
	sameTree(t, rep.baseline, treeSnapshot(t, rep.repo))
}

// TestRunInterruptRollsBack sends each stop signal while an acceptance
// command runs: the repo is rolled back and the summary says why.
func TestRunInterruptRollsBack(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			wo := workOrder()
			wo["acceptance_commands"] = []string{"sleep 60"}
			f := newFixture(t, wo, good(calcV2))
			cmd := factoryCmd(t, []string{"OPENAI_API_KEY=test-key"}, "run", "--repo", f.repo, "--work-order", f.woPath, "--out", f.out,
				"--llm-model", "test-model", "--llm-base-url", f.srv.URL)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the writes landed and the command is running.
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(stderr.String(), "tr: wrote") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the write never landed")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != ExitInternal {
				t.Fatalf("wait: %v, want exit %d\nstderr: %s", err, ExitInternal, stderr.String())
			}
			res := runOut{code: exitErr.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
			s := f.summary(t, res)
			if s.Verdict != factory.VerdictError || !strings.Contains(s.Error, "interrupted by "+sig.String()) {
				t.Errorf("summary verdict %s error %q", s.Verdict, s.Error)
			}
			if s.TotalAttempts != 1 || s.Attempts[0].FailureBrief == nil || !s.Attempts[0].WriteOK {
				t.Errorf("the interrupted attempt is missing from the summary: %+v", s.Attempts)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

func TestRunRerunKeepsEarlierArtifacts(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcBad), good(calcBad))
	first := f.run(t, "--max-attempts", "1")
	second := f.run(t, "--max-attempts", "1")
	p1, p2 := summaryPath(t, first), summaryPath(t, second)
	if filepath.Dir(p2) != filepath.Dir(p1)+".2" {
		t.Errorf("re-run summary at %s, want next to %s with suffix .2", p2, p1)
	}
	if _, err := os.Stat(p1); err != nil {
		t.Errorf("first run's summary is gone: %v", err)
	}
}

func TestRunCommandsDoNotSeeCredentials(t *testing.T) {
	wo := workOrder()
	wo["acceptance_commands"] = []string{`python3 -c "import os, sys; sys.exit(1 if {'OPENAI_API_KEY', 'GITHUB_TOKEN'} & set(os.environ) else 0)"`}
	f := newFixture(t, wo, good(calcV2))
	t.Setenv("GITHUB_TOKEN", "ghp_secret")
	if res := f.run(t, "--max-attempts", "1"); res.code != ExitPass {
		t.Fatalf("exit %d: a command saw a credential\n%s", res.code, res.stderr)
	}
}

// messScript is model-written code at its worst: run by an acceptance
// command, it plants a git hook, edits .git/config, deletes the user's .env,
// starts a setsid daemon that keeps rewriting calc.py, and fails.
const messScript = `import os, sys, time
open(".git/hooks/pre-commit", "w").write("#!/bin/sh\ntouch PWNED\n")
os.chmod(".git/hooks/pre-commit", 0o755)
open(".git/config", "a").write("[alias]\n\tst = !touch PWNED\n")
os.remove(".env")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            open("calc.py", "a").write("# daemon\n")
            time.sleep(0.05)
    os._exit(0)
sys.exit(1)
`

// newMessFixture is a fixture whose acceptance command is messScript,
// committed as tools/mess.py.
func newMessFixture(t *testing.T) *fixture {
	t.Helper()
	wo := workOrder()
	wo["acceptance_commands"] = []string{"python3 tools/mess.py"}
	f := newFixture(t, wo, good(calcV2))
	writeFiles(t, f.repo, map[string]string{"tools/mess.py": messScript})
	git(t, f.repo, "add", "tools/mess.py")
	git(t, f.repo, "commit", "-q", "-m", "tools")
	f.baseline = treeSnapshot(t, f.repo)
	return f
}

func TestRunUndoesWhatCommandsDo(t *testing.T) {
	f := newMessFixture(t)

	// Unconfined: rollback and the metadata check are what stand when no
	// sandbox can (see TestSandboxKeepsGitReadOnly for the confined run).
	res := f.run(t, "--max-attempts", "1", "--sandbox", "off")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	time.Sleep(300 * time.Millisecond) // a surviving daemon would write meanwhile
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	a := f.summary(t, res).Attempts[0]
	if a.FailureBrief == nil || a.FailureBrief.Stage != factory.StageGitMetadataChanged {
		t.Errorf("brief = %+v, want stage %s", a.FailureBrief, factory.StageGitMetadataChanged)
	}
	rb := a.Rollback
	if rb == nil || !slices.Contains(rb.RestoredFiles, ".env") || !slices.Contains(rb.RemovedFiles, ".git/hooks/pre-commit") {
		t.Errorf("rollback record = %+v", rb)
	}
}
