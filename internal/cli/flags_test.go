package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/planner"
)

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"repo", "repo", 0}, {"repoo", "repo", 1}, {"rnu", "run", 1}, {"sepc", "spec", 1}, {"sepc", "repo", 2},
		{"", "out", 3}, {"outdr", "out", 2}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSuggestFlag(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("repo", "", "")
	fs.String("out", "", "")
	fs.Bool("json", false, "")
	aliasFlag(fs, "out", "outdir")
	for _, tt := range []struct{ typed, want string }{
		{"repoo", "repo"}, {"REPO", "repo"}, {"rpeo", "repo"}, {"jsn", "json"}, {"ou", "out"},
		{"outdr", "out"}, // the hidden alias is never suggested
		{"bogus", ""}, {"repository", ""},
	} {
		if got := suggestFlag(fs, tt.typed); got != tt.want {
			t.Errorf("suggestFlag(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}

func TestRequireFlags(t *testing.T) {
	for _, tt := range []struct {
		flags []required
		want  string
	}{
		{[]required{{"--a", "x"}, {"--b", "y"}}, ""},
		{[]required{{"--a", ""}, {"--b", "y"}}, "--a is required (see 'factory cmd --help')"},
		{[]required{{"--a", ""}, {"--b", ""}}, "--a and --b are required (see 'factory cmd --help')"},
		{[]required{{"--a", ""}, {"--b", ""}, {"--c", "z"}, {"--d", ""}}, "--a, --b and --d are required (see 'factory cmd --help')"},
	} {
		err := requireFlags("cmd", tt.flags...)
		got := ""
		if err != nil {
			got = err.Error()
			if exitCode(err, &bytes.Buffer{}) != ExitUsage {
				t.Errorf("%v: not a usage error", err)
			}
		}
		if got != tt.want {
			t.Errorf("requireFlags(%v) = %q, want %q", tt.flags, got, tt.want)
		}
	}
}

func TestResolveAlias(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		out     string
		json    bool
		wantErr string
	}{
		{[]string{"--out", "a"}, "a", false, ""},
		{[]string{"--outdir", "a"}, "a", false, ""},
		{[]string{"--out", "a", "--outdir", "a"}, "a", false, ""},
		{[]string{"--out", "a", "--outdir", "b"}, "a", false, "given different values"},
		{[]string{"--print-summary"}, "", true, ""},
		{[]string{"--json", "--print-summary"}, "", true, ""},
		{[]string{"--json=false", "--print-summary"}, "", false, "given different values"},
	} {
		var out string
		var js bool
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.StringVar(&out, "out", "", "")
		fs.BoolVar(&js, "json", false, "")
		aliasFlag(fs, "out", "outdir")
		aliasFlag(fs, "json", "print-summary")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		err := resolveAlias(fs, "out", "outdir")
		if err == nil {
			err = resolveAlias(fs, "json", "print-summary")
		}
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err %v, want %q", tt.args, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tt.args, err)
		case out != tt.out || js != tt.json:
			t.Errorf("%v: out %q json %v, want %q %v", tt.args, out, js, tt.out, tt.json)
		}
	}
}

// TestRecoverJSONFields pins the field names of recover --json.
func TestRecoverJSONFields(t *testing.T) {
	data, err := json.Marshal(recoverJSON{Found: true, Tool: "factory run", RunDir: "/o/r", Killed: true,
		Rollback: factory.RollbackRecord{RemovedFiles: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(data, &got)
	for _, k := range []string{"found", "tool", "run_dir", "killed", "rollback"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s lacks %q", data, k)
		}
	}
	if rb, _ := got["rollback"].(map[string]any); rb["removed_files"] == nil {
		t.Errorf("rollback = %v", got["rollback"])
	}
}

// TestRunJSONPrintsSummary: run --json prints run_summary.json and nothing else.
func TestRunJSONPrintsSummary(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	res := f.run(t, "--json")
	if res.code != ExitPass {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout, "verdict: ") || strings.Contains(res.stdout, "run summary: ") {
		t.Errorf("stdout has the human lines:\n%s", res.stdout)
	}
	var s factory.RunSummary
	if err := json.Unmarshal([]byte(res.stdout), &s); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, res.stdout)
	}
	if s.Verdict != "PASS" || s.RunID == "" {
		t.Errorf("summary = %+v", s)
	}
	file, err := os.ReadFile(filepath.Join(f.out, s.RunID, "run_summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(file)) != strings.TrimSpace(res.stdout) {
		t.Errorf("stdout differs from run_summary.json:\n%s\n---\n%s", res.stdout, file)
	}
}

// TestPlanJSONPrintsSummary: plan --out DIR --json prints compile_summary.json
// and nothing else on stdout; --print-summary is the same flag.
func TestPlanJSONPrintsSummary(t *testing.T) {
	for _, flag := range []string{"--json", "--print-summary"} {
		t.Run(flag, func(t *testing.T) {
			f := newPlanFixture(t, done(validPlan(t)))
			res := runFactory(t, []string{"OPENAI_API_KEY=test-key"}, "plan", "--spec", f.spec, "--out", f.out,
				"--artifacts-dir", f.arts, "--llm-model", "planner-model", "--llm-base-url", f.srv.URL,
				"--poll-interval", "5ms", "--retry-backoff", "5ms", "--no-review", flag)
			if res.code != 0 {
				t.Fatalf("exit %d\n%s", res.code, res.stderr)
			}
			var s planner.Summary
			if err := json.Unmarshal([]byte(res.stdout), &s); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, res.stdout)
			}
			file, _ := os.ReadFile(filepath.Join(f.arts, "compile_summary.json"))
			if strings.TrimSpace(string(file)) != strings.TrimSpace(res.stdout) {
				t.Errorf("stdout differs from compile_summary.json:\n%s\n---\n%s", res.stdout, file)
			}
			if _, err := os.Stat(filepath.Join(f.out, planner.ManifestName)); err != nil {
				t.Errorf("plan not written to --out: %v", err)
			}
		})
	}
}

// TestSubcommandHelpExitCodes: every subcommand's help documents exit codes
// that mean what the root help says they mean.
func TestSubcommandHelpExitCodes(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want []string
	}{
		{"run", []string{"0 PASS", "1 FAIL", "2 usage or preflight error (nothing modified)", "3 provider unreachable"}},
		{"plan", []string{"0 plan written", "1 the plan is still invalid", "2 refused before anything was created", "3 error"}},
		{"validate", []string{"0 no errors", "1 errors found", "2 usage error"}},
		{"recover", []string{"0 recovered", "2 refused", "3 the restore failed"}},
		{"eval", []string{"0 the eval ran", "1 --min-solve-rate given", "2 usage (nothing created)", "3 interrupted or internal error", "5 budget reached"}},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), []string{tt.cmd, "--help"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }})
		if code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", tt.cmd, code, stderr.String())
		}
		help := strings.Join(strings.Fields(stdout.String()), " ")
		if !strings.Contains(help, "Exit codes:") {
			t.Errorf("%s --help has no exit codes", tt.cmd)
		}
		for _, w := range tt.want {
			if !strings.Contains(help, w) {
				t.Errorf("%s --help lacks %q", tt.cmd, w)
			}
		}
	}
}
