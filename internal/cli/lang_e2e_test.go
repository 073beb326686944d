package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/llmtest"
)

const (
	goMod      = "module example.com/calc\n\ngo 1.26\n"
	goCalcV1   = "package calc\n\n// Add returns a + b.\nfunc Add(a, b int) int { return a + b }\n"
	goCalcV2   = goCalcV1 + "\n// Mul returns a * b.\nfunc Mul(a, b int) int { return a * b }\n"
	goCalcTest = "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(3, 4) != 12 {\n\t\tt.Fatal(\"Mul(3, 4) != 12\")\n\t}\n}\n"
	goFmtGood  = "package format\n\nimport (\n\t\"strconv\"\n\n\t\"example.com/calc/calc\"\n)\n\n// Product formats a * b.\nfunc Product(a, b int) string { return strconv.Itoa(calc.Mul(a, b)) }\n"
	// goFmtBad does not compile; it is outside the package the acceptance
	// command tests, so only global verification can catch it.
	goFmtBad = "package format\n\nimport \"example.com/calc/calc\"\n\n// Product formats a * b.\nfunc Product(a, b int) string { return calc.Mul(a, b) }\n"
)

// TestRunGoRepoWithoutVerifyScript drives the real binary on a Go module
// without scripts/verify.sh: global verification is `go vet ./...` and
// `go test ./...`, so a file that does not compile in a package the
// acceptance command does not name fails the attempt, and the corrected
// second attempt passes. The SE prompt states that verification.
func TestRunGoRepoWithoutVerifyScript(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go toolchain is not on PATH")
	}
	for _, mode := range []string{"off", "auto"} {
		t.Run("sandbox "+mode, func(t *testing.T) {
			if mode != "off" && testing.Short() {
				t.Skip("-short: a confined go build starts from an empty build cache (tens of seconds)")
			}
			repo := newRepo(t, map[string]string{"go.mod": goMod, "calc/calc.go": goCalcV1, "README.md": "calc\n"})
			wo := map[string]any{
				"id":                  "WO-01",
				"title":               "Add Mul and a formatter",
				"intent":              "Add calc.Mul and format.Product.",
				"allowed_files":       []string{"calc/calc.go", "calc/calc_test.go", "format/format.go"},
				"forbidden":           []string{"go.mod"},
				"acceptance_commands": []string{`go test ./calc -run "^TestMul$" -v`},
				"context_files":       []string{"calc/calc.go", "go.mod"},
			}
			woPath := filepath.Join(t.TempDir(), "wo.json")
			data, _ := json.Marshal(wo)
			if err := os.WriteFile(woPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			empty := sha("")
			attempt := func(format string) llmtest.Reply {
				return llmtest.Reply{Content: llmtest.Proposal("mul and formatter",
					llmtest.Write{Path: "calc/calc.go", BaseSHA256: sha(goCalcV1), Content: goCalcV2},
					llmtest.Write{Path: "calc/calc_test.go", BaseSHA256: empty, Content: goCalcTest},
					llmtest.Write{Path: "format/format.go", BaseSHA256: empty, Content: format})}
			}
			srv := llmtest.Start(t, attempt(goFmtBad), attempt(goFmtGood))
			out := filepath.Join(t.TempDir(), "out")
			start := time.Now()
			res := runFactory(t, []string{"OPENAI_API_KEY=test-key"}, "run", "--repo", repo, "--work-order", woPath, "--out", out,
				"--llm-model", "test-model", "--llm-base-url", srv.URL, "--timeout-seconds", "300", "--max-attempts", "2", "--sandbox", mode)
			t.Logf("sandbox %s: %s", mode, time.Since(start).Round(time.Millisecond))
			if mode == "auto" && strings.Contains(res.stderr, "unconfined") {
				t.Logf("this machine cannot confine commands; ran unconfined")
			}
			if res.code != ExitPass {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			var s struct {
				TotalAttempts int `json:"total_attempts"`
			}
			readJSON(t, summaryPath(t, res), &s)
			if s.TotalAttempts != 2 {
				t.Fatalf("total_attempts = %d, want 2 (the first must fail verification)", s.TotalAttempts)
			}
			// The first attempt failed in global verification, on the
			// formatter, before the acceptance command ran.
			var first struct {
				Stage   string `json:"stage"`
				Command string `json:"command"`
				Excerpt string `json:"primary_error_excerpt"`
			}
			briefs, _ := filepath.Glob(filepath.Join(out, "*", "attempt_1", "failure_brief.json"))
			if len(briefs) != 1 {
				t.Fatalf("attempt 1 failure brief: found %q", briefs)
			}
			readJSON(t, briefs[0], &first)
			if first.Stage != "verify_failed" || first.Command != "go vet ./..." || !strings.Contains(first.Excerpt, "format") {
				t.Errorf("attempt 1 brief = %+v, want verify_failed on `go vet ./...` about format/", first)
			}
			prompt := srv.UserPrompt(0)
			if !strings.Contains(prompt, "`go vet ./...` and `go test ./...`") || strings.Contains(prompt, "compileall") {
				t.Errorf("the SE prompt does not state the Go verification:\n%s", prompt)
			}
			if got := git(t, repo, "status", "--porcelain"); !strings.Contains(got, "format/") {
				t.Errorf("the passing attempt's files are not in the work tree: %q", got)
			}
		})
	}
}

// goPlan is a one-order Go plan; pkg is the package its acceptance command tests.
func goPlan(pkg string) string {
	plan := map[string]any{"work_orders": []any{map[string]any{
		"id": "WO-01", "title": "Mul", "intent": "Add calc.Mul.",
		"preconditions":       []any{map[string]any{"kind": "file_exists", "path": "go.mod"}},
		"postconditions":      []any{map[string]any{"kind": "file_exists", "path": "calc/calc.go"}, map[string]any{"kind": "file_exists", "path": "calc/calc_test.go"}},
		"allowed_files":       []string{"calc/calc.go", "calc/calc_test.go"},
		"forbidden":           []string{"go.mod"},
		"acceptance_commands": []string{"go test ./" + pkg + ` -run "^TestMul$" -v`},
		"context_files":       []string{"calc/calc.go", "calc/calc_test.go", "go.mod"},
		"notes":               "func Mul(a, b int) int",
	}}}
	data, _ := json.Marshal(plan)
	return string(data)
}

// TestPlanGoRepo compiles a plan for a Go repository: the prompt speaks Go
// (its verification, examples and acceptance commands, no Python), and an
// acceptance command naming a package directory nothing creates is sent
// back as E107.
func TestPlanGoRepo(t *testing.T) {
	repo := newRepo(t, map[string]string{"go.mod": goMod, "calc/calc.go": goCalcV1})
	f := newPlanFixture(t, done(goPlan("calcx")), done(goPlan("calc")))
	res := f.run(t, "--no-review", "--repo", repo)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	first, err := os.ReadFile(filepath.Join(f.arts, "prompt_attempt_1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The repository holds Go (go.mod).", "- `go vet ./...`\n- `go test ./...`", "_test.go", `go test ./calc -run \"^TestAdd$\" -v`} {
		if !strings.Contains(string(first), want) {
			t.Errorf("the planner prompt lacks %q", want)
		}
	}
	if strings.Contains(strings.ToLower(string(first)), "python") {
		t.Errorf("the planner prompt for a Go repository mentions Python")
	}
	second, _ := os.ReadFile(filepath.Join(f.arts, "prompt_attempt_2.txt"))
	if !strings.Contains(string(second), "[E107]") || !strings.Contains(string(second), "package directory calcx") {
		t.Errorf("the revision prompt lacks E107 for ./calcx:\n%s", second)
	}
	if s := f.summary(t); !s.Success || s.Attempts != 2 {
		t.Errorf("summary = %+v", s)
	}
}
