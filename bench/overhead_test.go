// Package bench measures the factory's per-attempt overhead against a plain
// script doing the same git, fsync and exec work. See README.md.
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

const (
	// target is the one file every attempt overwrites.
	target = "pkg/d00/f0000.py"
	// newContent must match $content in plain_attempt.sh, so both sides write
	// the same bytes.
	newContent = "print('written by bench')\n"
)

// shape is a repository layout: dirs×files tracked files under pkg/ and
// venv ignored files under .venv/.
type shape struct{ dirs, files, venv int }

var (
	// big is the benchmark repository: 10,000 tracked files, 200 ignored.
	big = shape{dirs: 100, files: 100, venv: 200}
	// small keeps the smoke test fast.
	small = shape{dirs: 2, files: 10, venv: 5}
)

// scratch holds the isolated HOME and the shared benchmark repository.
var scratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "factory-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	scratch = dir
	isolateGit(dir)
	m.Run()
}

// isolateGit pins git identity and dates and hides the machine's config, for
// both the factory's git calls and the plain script (they inherit os.Environ).
func isolateGit(dir string) {
	home := filepath.Join(dir, "home")
	for k, v := range map[string]string{
		"HOME":                    home,
		"XDG_CONFIG_HOME":         filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM":     "1",
		"GIT_CONFIG_GLOBAL":       filepath.Join(home, ".gitconfig"),
		"GIT_CEILING_DIRECTORIES": dir,
		"GIT_AUTHOR_NAME":         "Factory Bench",
		"GIT_AUTHOR_EMAIL":        "bench@factory.invalid",
		"GIT_AUTHOR_DATE":         "2001-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME":      "Factory Bench",
		"GIT_COMMITTER_EMAIL":     "bench@factory.invalid",
		"GIT_COMMITTER_DATE":      "2001-01-01T00:00:00Z",
	} {
		os.Setenv(k, v)
	}
	// Set when go test runs from a git hook; they would point git elsewhere.
	for _, k := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
		"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"} {
		os.Unsetenv(k)
	}
}

var bigRepo struct {
	sync.Mutex
	path string
}

// benchRepo returns the 10,000-file repository, built on first use and then
// shared by all benchmarks (each leaves it clean), so every side is measured
// on the same repository and setup is paid once per process.
func benchRepo(b *testing.B) string {
	b.Helper()
	bigRepo.Lock()
	defer bigRepo.Unlock()
	if bigRepo.path == "" {
		dir := filepath.Join(scratch, "repo")
		makeRepo(b, dir, big)
		bigRepo.path = dir
	}
	requireClean(b, bigRepo.path)
	return bigRepo.path
}

// makeRepo writes and commits a repository of the given shape in dir.
func makeRepo(tb testing.TB, dir string, s shape) {
	tb.Helper()
	// Old mtimes keep index entries from being "racily clean": otherwise
	// every git status would rehash all files and swamp the measurement.
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			tb.Fatal(err)
		}
	}
	for d := range s.dirs {
		for f := range s.files {
			n := d*s.files + f
			write(fmt.Sprintf("pkg/d%02d/f%04d.py", d, n), fmt.Sprintf("# module %d\nVALUE = %d\n", n, n))
		}
	}
	write(".gitignore", ".venv/\n")
	write(".venv/pyvenv.cfg", "home = /usr/bin\n")
	for i := range s.venv - 1 {
		write(fmt.Sprintf(".venv/lib/site-packages/p%02d/m%03d.py", i/10, i), fmt.Sprintf("M = %d\n", i))
	}
	gitRun(tb, dir, "init", "-q", "-b", "main")
	gitRun(tb, dir, "add", "-A")
	gitRun(tb, dir, "commit", "-q", "-m", "baseline")
}

// gitRun runs git in dir for setup and checks, returning stdout.
func gitRun(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

func requireClean(tb testing.TB, repo string) {
	tb.Helper()
	if st := gitRun(tb, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		tb.Fatalf("repository %s is not clean:\n%s", repo, st)
	}
}

// restore undoes a PASS attempt's write; benchmarks call it off the timer.
func restore(tb testing.TB, repo string) {
	tb.Helper()
	gitRun(tb, repo, "checkout", "-q", "--", ".")
}

// scriptedModel answers instantly with a fixed write proposal, so the
// benchmark measures the harness, not a model.
type scriptedModel struct{ reply string }

func (m scriptedModel) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{Content: m.reply, FinishReason: "stop", Model: "bench"}, nil
}

// newScriptedModel proposes newContent for target, with the base_sha256 of
// target as it is in repo now (the baseline every iteration starts from).
func newScriptedModel(tb testing.TB, repo string) scriptedModel {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(target)))
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	reply, err := json.Marshal(workorder.WriteProposal{
		Summary: "overwrite one file",
		Writes:  []workorder.FileWrite{{Path: target, BaseSHA256: hex.EncodeToString(sum[:]), Content: newContent}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return scriptedModel{reply: string(reply)}
}

// options builds a one-attempt run whose acceptance command is accept
// ("true" or "false"); out must be fresh for each attempt.
func options(tb testing.TB, repo, out, accept string, model llm.Model) factory.Options {
	tb.Helper()
	wo := &workorder.WorkOrder{
		ID:                 "WO-01",
		Title:              "bench",
		Intent:             "Overwrite one file.",
		AllowedFiles:       []string{target},
		AcceptanceCommands: []string{accept},
	}
	if err := wo.Normalize(); err != nil {
		tb.Fatal(err)
	}
	return factory.Options{
		Repo:           repo,
		WorkOrder:      wo,
		Out:            out,
		Model:          model,
		ModelName:      "bench",
		MaxAttempts:    1,
		CommandTimeout: 60 * time.Second,
		// Replaces compileall/pip/pytest: the benchmark is about the harness.
		VerifyCommands: []string{"true"},
	}
}

// attempt is one factory run as the CLI does it: Preflight, then Execute.
func attempt(ctx context.Context, opts factory.Options) (string, error) {
	run, err := factory.Preflight(ctx, opts)
	if err != nil {
		return "", err
	}
	res, err := run.Execute(ctx)
	return res.Verdict, err
}

func benchAttempt(b *testing.B, accept, want string) {
	repo := benchRepo(b)
	model := newScriptedModel(b, repo)
	outRoot := b.TempDir() // outside the repository, as Preflight requires
	ctx := context.Background()
	benchLoop(b, repo, want, func(i int) string {
		verdict, err := attempt(ctx, options(b, repo, filepath.Join(outRoot, strconv.Itoa(i)), accept, model))
		if err != nil {
			b.Fatalf("attempt %d: %v", i, err)
		}
		return verdict
	})
}

// benchLoop times one attempt per iteration and undoes a passing attempt's
// write off the timer, so every iteration starts from the same clean tree.
func benchLoop(b *testing.B, repo, want string, attempt func(i int) string) {
	b.ResetTimer()
	for i := range b.N {
		if verdict := attempt(i); verdict != want {
			b.Fatalf("iteration %d: verdict %q, want %s", i, verdict, want)
		}
		if want == factory.VerdictPass {
			b.StopTimer()
			restore(b, repo)
			b.StartTimer()
		}
	}
	b.StopTimer()
	requireClean(b, repo)
}

func BenchmarkAttemptPass(b *testing.B)         { benchAttempt(b, "true", factory.VerdictPass) }
func BenchmarkAttemptFailRollback(b *testing.B) { benchAttempt(b, "false", factory.VerdictFail) }

// plainScript is the absolute path of plain_attempt.sh; go test runs in the
// package directory.
func plainScript(tb testing.TB) string {
	tb.Helper()
	p, err := filepath.Abs("plain_attempt.sh")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// runPlain runs one plain attempt and returns its first word: PASS or FAIL.
func runPlain(tb testing.TB, script, repo, mode string) string {
	tb.Helper()
	cmd := exec.Command("bash", script, repo, mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("plain_attempt.sh %s: %v\n%s", mode, err, stderr.String())
	}
	verdict, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	return verdict
}

func benchPlain(b *testing.B, mode, want string) {
	repo := benchRepo(b)
	script := plainScript(b)
	benchLoop(b, repo, want, func(int) string { return runPlain(b, script, repo, mode) })
}

func BenchmarkPlainScriptPass(b *testing.B) { benchPlain(b, "pass", factory.VerdictPass) }
func BenchmarkPlainScriptFail(b *testing.B) { benchPlain(b, "fail", factory.VerdictFail) }

// TestAttemptSmoke runs every benchmarked path once on a small repository so
// that the benchmark code cannot rot unnoticed by plain go test.
func TestAttemptSmoke(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo")
	makeRepo(t, repo, small)
	path := filepath.Join(repo, filepath.FromSlash(target))
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	venvFile := filepath.Join(repo, ".venv", "pyvenv.cfg")
	// finish checks the attempt's effect, then resets for the next one. A
	// FAIL must have restored the tree by itself; a PASS keeps its write.
	finish := func(t *testing.T, verdict string) {
		t.Helper()
		want := string(original)
		if verdict == factory.VerdictPass {
			want = newContent
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s = %q, want %q", target, got, want)
		}
		if _, err := os.Stat(venvFile); err != nil {
			t.Errorf("ignored file lost: %v", err)
		}
		if verdict == factory.VerdictFail {
			requireClean(t, repo)
		}
		restore(t, repo)
		requireClean(t, repo)
	}
	model := newScriptedModel(t, repo)
	ctx := context.Background()
	script := plainScript(t)

	for _, tc := range []struct {
		name, accept, mode, want string
	}{
		{"pass", "true", "pass", factory.VerdictPass},
		{"fail", "false", "fail", factory.VerdictFail},
	} {
		t.Run("harness/"+tc.name, func(t *testing.T) {
			verdict, err := attempt(ctx, options(t, repo, t.TempDir(), tc.accept, model))
			if err != nil || verdict != tc.want {
				t.Fatalf("verdict %q, error %v; want %s", verdict, err, tc.want)
			}
			finish(t, verdict)
		})
		t.Run("plain/"+tc.name, func(t *testing.T) {
			if verdict := runPlain(t, script, repo, tc.mode); verdict != tc.want {
				t.Fatalf("verdict %q, want %s", verdict, tc.want)
			}
			finish(t, tc.want)
		})
	}
}
