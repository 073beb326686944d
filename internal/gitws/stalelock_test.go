package gitws

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRemoveStaleLocks(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		locks   map[string]time.Duration // path under the git dir -> age
		removed []string
		young   string
	}{
		{"none", nil, nil, ""},
		{"stale index and branch locks", map[string]time.Duration{"index.lock": time.Minute, "refs/heads/loop/t1.lock": StaleLockAge}, []string{"index.lock", "refs/heads/loop/t1.lock"}, ""},
		{"a young lock keeps them all", map[string]time.Duration{"index.lock": time.Hour, "HEAD.lock": time.Second}, nil, "HEAD.lock"},
		{"another branch's lock is not ours", map[string]time.Duration{"refs/heads/main.lock": time.Hour}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := &Repo{Root: dir, GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}
			for p, age := range c.locks {
				full := filepath.Join(r.GitDir, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(full, now.Add(-age), now.Add(-age)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.RemoveStaleLocks("loop/t1", now)
			var young *YoungLockError
			if c.young != "" {
				if !errors.As(err, &young) || young.Path != filepath.Join(r.GitDir, c.young) {
					t.Fatalf("err = %v, want a YoungLockError for %s", err, c.young)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range c.removed {
				want = append(want, filepath.Join(r.GitDir, p))
			}
			if len(got) != len(want) {
				t.Fatalf("removed %q, want %q", got, want)
			}
			for p := range c.locks {
				_, err := os.Stat(filepath.Join(r.GitDir, p))
				gone := os.IsNotExist(err)
				wantGone := false
				for _, w := range c.removed {
					wantGone = wantGone || w == p
				}
				if gone != wantGone {
					t.Errorf("%s removed: %v, want %v", p, gone, wantGone)
				}
			}
		})
	}
}
