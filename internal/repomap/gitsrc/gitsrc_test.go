//go:build cgo

package gitsrc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/repomap"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func commit(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "c")
	return git(t, dir, "rev-parse", "HEAD")
}

// The map of a commit comes from git's objects, whatever the work tree
// holds; the cache in the git directory makes a second map parse nothing
// and a new commit parse only what changed.
func TestBuildFromCommits(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	first := commit(t, dir, map[string]string{"a.go": "package a\n\nfunc Alpha() {}\n", "b.py": "def beta():\n    pass\n", "README.md": "x\n"})
	second := commit(t, dir, map[string]string{"a.go": "package a\n\nfunc Alpha() {}\n\nfunc Gamma(n int) int { return n }\n"})
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nfunc Uncommitted() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rev            string
		parsed, cached int
		want, not      string
	}{
		{first, 2, 0, "func Alpha()", "Gamma"},
		{first, 0, 2, "def beta():", "Gamma"},
		{second, 1, 1, "func Gamma(n int) int", "Uncommitted"},
	} {
		m, err := Build(ctx, repo, tc.rev)
		if err != nil {
			t.Fatal(err)
		}
		text := m.Render(repomap.Focus{}, repomap.DefaultTokens).Text
		if m.Parsed != tc.parsed || m.Cached != tc.cached || !strings.Contains(text, tc.want) || strings.Contains(text, tc.not) {
			t.Errorf("%s: %d parsed, %d cached (want %d, %d):\n%s", tc.rev[:7], m.Parsed, m.Cached, tc.parsed, tc.cached, text)
		}
	}
	if _, err := os.Stat(repo.FactoryFile("repomap")); err != nil {
		t.Errorf("no cache in the git directory: %v", err)
	}
	v, _, err := ForSpec(ctx, repo, "rename beta in b.py", 200)
	if err != nil || len(v.Files) == 0 || v.Files[0].Path != "b.py" {
		t.Errorf("ForSpec: %v, %+v", err, v.Files)
	}
}
