package builder

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
)

// gitStepRepo is a repository on branch factory/p1 with one commit.
func gitStepRepo(t *testing.T) *gitws.Repo {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "factory/p1")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "start")
	repo, err := gitws.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func touch(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A build killed while it switched to its branch left git's locks and the
// note, but no journal: the next build removes them, young as they are.
// A lock without either is not the build's: it refuses with its own advice.
func TestRecoverGitLocksBeforeBuild(t *testing.T) {
	t.Run("noted", func(t *testing.T) {
		repo := gitStepRepo(t)
		if err := repo.RecordGitStep(gitws.GitStep{Step: "switch branch", Branch: "factory/p2"}); err != nil {
			t.Fatal(err)
		}
		locks := []string{filepath.Join(repo.GitDir, "index.lock"), filepath.Join(repo.GitDir, "HEAD.lock"),
			filepath.Join(repo.CommonDir, "refs", "heads", "factory", "p2.lock")}
		touch(t, locks...)
		var progress bytes.Buffer
		if err := Recover(context.Background(), repo, &progress); err != nil {
			t.Fatal(err)
		}
		for _, p := range locks {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left: %v", p, err)
			}
		}
		if _, noted, _ := repo.RecordedGitStep(); noted {
			t.Error("note left")
		}
		if !strings.Contains(progress.String(), "removed the lock files git left when the previous build was killed: .git/index.lock, .git/HEAD.lock, .git/refs/heads/factory/p2.lock") {
			t.Errorf("progress:\n%s", progress.String())
		}
	})
	t.Run("not noted", func(t *testing.T) {
		repo := gitStepRepo(t)
		lock := filepath.Join(repo.GitDir, "index.lock")
		touch(t, lock)
		err := Recover(context.Background(), repo, nil)
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "is not factory's to remove") || strings.Contains(err.Error(), "Another git process") {
			t.Fatalf("err = %v, want a refusal with factory's advice", err)
		}
		if _, err := os.Lstat(lock); err != nil {
			t.Errorf("the lock was removed: %v", err)
		}
	})
}
