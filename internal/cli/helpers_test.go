package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitEnv pins identity, dates and config so repos are byte-for-byte
// reproducible and the machine's git config cannot interfere.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Factory Test", "GIT_AUTHOR_EMAIL=test@factory.invalid",
		"GIT_COMMITTER_NAME=Factory Test", "GIT_COMMITTER_EMAIL=test@factory.invalid",
		"GIT_AUTHOR_DATE=2001-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2001-01-01T00:00:00Z",
	)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo creates a committed git repo holding files (path → content).
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	writeFiles(t, dir, files)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "baseline")
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// treeSnapshot maps every path under dir (including .git, to catch changes
// to refs, index or hooks) to its type, mode and content hash or link target.
// The repository map's parse cache (.git/factory/repomap), which a run or
// build may create, is left out: it holds parses by blob hash, nothing of
// the repository's state.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	factoryDir := filepath.Join(".git", "factory")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch rel {
		case filepath.Join(factoryDir, "repomap"):
			return filepath.SkipDir
		case factoryDir: // its files are still compared
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			snap[rel] = "link " + target
		case info.IsDir():
			snap[rel] = "dir " + info.Mode().Perm().String()
		default:
			// Rollback's `git reset` rewrites the index (same entries, new
			// stat data) and records itself in ORIG_HEAD and the reflog;
			// everything else in .git must stay byte-identical.
			if rel == filepath.Join(".git", "index") || rel == filepath.Join(".git", "ORIG_HEAD") ||
				strings.HasPrefix(rel, filepath.Join(".git", "logs")+string(filepath.Separator)) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			snap[rel] = "file " + info.Mode().Perm().String() + " " + hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("repository differs from baseline (-want +got):\n%s", diff)
	}
}

type runOut struct {
	code           int
	stdout, stderr string
}

// factoryCmd runs the real binary (the re-executed test binary on PATH).
func factoryCmd(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("factory", args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

func runFactory(t testing.TB, env []string, args ...string) runOut {
	t.Helper()
	cmd := factoryCmd(t, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	code := 0
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("run factory: %v", err)
	}
	return runOut{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
