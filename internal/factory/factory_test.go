package factory

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

func TestQuoteArgvRoundTrips(t *testing.T) {
	for _, argv := range [][]string{
		{"python3", "-c", "import x; print(1)"},
		{"echo", ""},
		{"a'b", `c"d`, `e\f`, "$HOME", "*.py", "~", "x y"},
		{"bash", "scripts/verify.sh"},
	} {
		got, err := proc.ParseCommand(lang.Quote(argv))
		if err != nil {
			t.Errorf("lang.Quote(%q) = %q does not parse: %v", argv, lang.Quote(argv), err)
			continue
		}
		if diff := cmp.Diff(argv, got); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", argv, diff)
		}
	}
}

func TestFence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"x", "```\nx\n```"},
		{"a ``` b\n", "````\na ``` b\n````"},
		{"`````", "``````\n`````\n``````"},
	}
	for _, tt := range tests {
		if got := fence(tt.in); got != tt.want {
			t.Errorf("fence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBriefsAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 10_000)
	b := newBrief(StageLLMOutputInvalid, nil, nil, huge)
	if n := utf8.RuneCountInString(b.PrimaryErrorExcerpt); n > MaxExcerptChars {
		t.Errorf("excerpt has %d chars", n)
	}
	if !strings.HasSuffix(b.PrimaryErrorExcerpt, "[... truncated]") || b.ConstraintsReminder == "" {
		t.Errorf("brief = %q...", b.PrimaryErrorExcerpt[:40])
	}
	cb := commandBrief(StageAcceptanceFailed, CmdResult{Command: []string{"python3", "-c", "x"}, ExitCode: 2, StderrTrunc: huge + "END-ERR", StdoutTrunc: "out"}, "")
	if n := utf8.RuneCountInString(cb.PrimaryErrorExcerpt); n > MaxExcerptChars {
		t.Errorf("command excerpt has %d chars", n)
	}
	if !strings.Contains(cb.PrimaryErrorExcerpt, "END-ERR") || *cb.ExitCode != 2 || *cb.Command != "python3 -c x" {
		t.Errorf("command brief lost the tail or the command: %+v", cb)
	}
	small := commandBrief(StageVerifyFailed, CmdResult{Command: []string{"false"}, ExitCode: 1, StderrTrunc: "bad\n", StdoutTrunc: "context\n"}, "")
	if !strings.Contains(small.PrimaryErrorExcerpt, "bad") || !strings.Contains(small.PrimaryErrorExcerpt, "context") {
		t.Errorf("short brief lacks stderr or stdout: %q", small.PrimaryErrorExcerpt)
	}
}

// gitRepo makes a committed repo with fixed identity.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func testOrder() *workorder.WorkOrder {
	wo, err := workorder.ParseWorkOrder([]byte(`{"id":"WO-01","title":"t","intent":"i","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["true"],"context_files":[]}`))
	if err != nil {
		panic(err)
	}
	return wo
}

func TestVerifyCommands(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		exempt   bool
		override []string
		want     [][]string
	}{
		{name: "fallback", files: map[string]string{"a.py": ""},
			want: [][]string{{"py", "-m", "compileall", "-q", "."}, {"py", "-m", "pip", "--version"}, {"py", "-m", "pytest", "-q"}}},
		{name: "verify.sh", files: map[string]string{"scripts/verify.sh": "true\n"}, want: [][]string{{"bash", "scripts/verify.sh"}}},
		{name: "exempt beats verify.sh", files: map[string]string{"scripts/verify.sh": "true\n"}, exempt: true, want: [][]string{{"py", "-m", "compileall", "-q", "."}}},
		{name: "override beats all", files: map[string]string{"scripts/verify.sh": "true\n"}, exempt: true, override: []string{"make check"}, want: [][]string{{"make", "check"}}},
		{name: "no files: python fallback", files: map[string]string{"README.md": ""},
			want: [][]string{{"py", "-m", "compileall", "-q", "."}, {"py", "-m", "pip", "--version"}, {"py", "-m", "pytest", "-q"}}},
		{name: "python project", files: map[string]string{"pyproject.toml": "", "pkg/a.py": ""},
			want: [][]string{{"py", "-m", "compileall", "-q", "."}, {"py", "-m", "pip", "--version"}, {"py", "-m", "pytest", "-q"}}},
		{name: "python exempt", files: map[string]string{"pyproject.toml": ""}, exempt: true, want: [][]string{{"py", "-m", "compileall", "-q", "."}}},
		{name: "go", files: map[string]string{"go.mod": "module x\n", "a.go": "package x\n"}, want: [][]string{{"go", "vet", "./..."}, {"go", "test", "./..."}}},
		{name: "go exempt builds", files: map[string]string{"go.mod": "module x\n"}, exempt: true, want: [][]string{{"go", "build", "./..."}}},
		{name: "go with verify.sh", files: map[string]string{"go.mod": "module x\n", "scripts/verify.sh": "true\n"}, want: [][]string{{"bash", "scripts/verify.sh"}}},
		{name: "rust", files: map[string]string{"Cargo.toml": ""}, want: [][]string{{"cargo", "build", "--all-targets"}, {"cargo", "test"}}},
		{name: "typescript with a test script", files: map[string]string{"package.json": `{"scripts":{"test":"vitest run"}}`, "tsconfig.json": "{}", "yarn.lock": ""},
			want: [][]string{{"npx", "--no", "tsc", "--noEmit"}, {"yarn", "test"}}},
		{name: "javascript exempt runs nothing", files: map[string]string{"package.json": "{}"}, exempt: true, want: nil},
		{name: "cmake", files: map[string]string{"CMakeLists.txt": ""},
			want: [][]string{{"cmake", "-S", ".", "-B", "build"}, {"cmake", "--build", "build"}, {"ctest", "--test-dir", "build", "--output-on-failure"}}},
		{name: "makefile", files: map[string]string{"Makefile": "", "a.c": ""}, want: [][]string{{"make", "test"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wo := testOrder()
			wo.VerifyExempt = tt.exempt
			r, err := Preflight(context.Background(), Options{Repo: gitRepo(t, tt.files), WorkOrder: wo, Out: t.TempDir(),
				MaxAttempts: 1, CommandTimeout: time.Second, Python: "py", VerifyCommands: tt.override})
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.verifyCommands()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerifyRuleStatesWhatRuns(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		exempt bool
		want   string
	}{
		{name: "python, the seeds' words", files: map[string]string{"a.py": ""},
			want: "If scripts/verify.sh exists after your writes, the harness runs `bash scripts/verify.sh`; otherwise `py -m compileall -q .`, `py -m pip --version` and `py -m pytest -q`."},
		{name: "python exempt", files: map[string]string{"a.py": ""}, exempt: true,
			want: "This work order is verify-exempt: the harness runs only `py -m compileall -q .`."},
		{name: "go", files: map[string]string{"go.mod": "module x\n"},
			want: "If scripts/verify.sh exists after your writes, the harness runs `bash scripts/verify.sh`; otherwise, for this Go (go.mod) repository, `go vet ./...` and `go test ./...`, in this order, each of which must exit 0 for the whole repository."},
		{name: "go exempt", files: map[string]string{"go.mod": "module x\n"}, exempt: true,
			want: "This work order is verify-exempt: the harness runs only `go build ./...`."},
		{name: "rust", files: map[string]string{"Cargo.toml": ""},
			want: "If scripts/verify.sh exists after your writes, the harness runs `bash scripts/verify.sh`; otherwise, for this Rust (Cargo.toml) repository, `cargo build --all-targets` and `cargo test`, in this order, each of which must exit 0 for the whole repository."},
		{name: "javascript exempt", files: map[string]string{"package.json": "{}"}, exempt: true,
			want: "This work order is verify-exempt: the harness runs no global verification, only the acceptance commands."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wo := testOrder()
			wo.VerifyExempt = tt.exempt
			r, err := Preflight(context.Background(), Options{Repo: gitRepo(t, tt.files), WorkOrder: wo, Out: t.TempDir(),
				MaxAttempts: 1, CommandTimeout: time.Second, Python: "py"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := r.verifyRule()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("verifyRule:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestPreflightRefusesOutInsideRepo(t *testing.T) {
	repo := gitRepo(t, map[string]string{"a.py": ""})
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(repo, link)
	for _, out := range []string{repo, filepath.Join(repo, "out"), filepath.Join(repo, "x", "y"), filepath.Join(link, "out")} {
		_, err := Preflight(context.Background(), Options{Repo: repo, WorkOrder: testOrder(), Out: out, MaxAttempts: 1, CommandTimeout: time.Second})
		if _, ok := err.(*PreflightError); !ok || !strings.Contains(err.Error(), "inside the repository") {
			t.Errorf("--out %s: err = %v", out, err)
		}
	}
	_, err := Preflight(context.Background(), Options{Repo: repo, WorkOrder: testOrder(), Out: t.TempDir(),
		RecordPath: filepath.Join(repo, "t.jsonl"), MaxAttempts: 1, CommandTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "--record") {
		t.Errorf("--record inside the repo: err = %v", err)
	}
	if _, err := Preflight(context.Background(), Options{Repo: repo, WorkOrder: testOrder(), Out: repo + "-out", MaxAttempts: 1, CommandTimeout: time.Second}); err != nil {
		t.Errorf("a sibling directory sharing the repo's name prefix is outside: %v", err)
	}
}

type replyModel struct{ reply string }

func (m replyModel) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{Content: m.reply}, nil
}

// panicWriter panics when the progress line mentions marker: a stand-in for
// an internal bug at that point of the run.
type panicWriter struct{ marker string }

func (w panicWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.marker) {
		panic("injected bug")
	}
	return len(p), nil
}

func TestPanicAfterWritesRollsBackAndWritesSummary(t *testing.T) {
	repo := gitRepo(t, map[string]string{"a.py": "old\n"})
	reply := `{"summary":"s","writes":[{"path":"a.py","base_sha256":"` + sha("old\n") + `","content":"new\n"}]}`
	r, err := Preflight(context.Background(), Options{Repo: repo, WorkOrder: testOrder(), Out: t.TempDir(),
		Model: replyModel{reply}, ModelName: "m", MaxAttempts: 2, CommandTimeout: 10 * time.Second,
		VerifyCommands: []string{"true"}, Python: "python3", Progress: panicWriter{marker: "tr: wrote"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "injected bug") || res.Verdict != VerdictError {
		t.Fatalf("Execute = %+v, %v; want ERROR with the panic", res, err)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "a.py")); string(got) != "old\n" {
		t.Errorf("a.py = %q, want the baseline restored", got)
	}
	data, err := os.ReadFile(res.SummaryPath)
	if err != nil || !strings.Contains(string(data), `"verdict": "ERROR"`) {
		t.Errorf("summary: %v\n%s", err, data)
	}
}

func sha(s string) string {
	return canon.SHA256Hex([]byte(s))
}
