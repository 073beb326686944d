package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
