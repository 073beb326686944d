package gitws

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRecoverGitLocks covers the decision on git's lock files before a
// factory that holds the repository lock goes on: a git step note removes
// them whatever their age; a journal alone removes them once stale; with
// neither, nothing is removed and the error is factory's own.
func TestRecoverGitLocks(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const head = "factory/0123456789abcdef"
	headLock := "refs/heads/" + head + ".lock"
	for _, c := range []struct {
		name    string
		note    *GitStep                 // the git step noted as running
		journal bool                     // the caller found its journal
		locks   map[string]time.Duration // path under the git dir -> age
		removed []string
		young   string // a *YoungLockError for this lock
		held    string // a *GitLockError for this lock
	}{
		{name: "nothing"},
		{name: "killed in the commit: young locks go", note: &GitStep{Step: "commit WO-01", Branch: head}, journal: true,
			locks:   map[string]time.Duration{"index.lock": 0, "HEAD.lock": time.Millisecond, headLock: -time.Second},
			removed: []string{"index.lock", "HEAD.lock", headLock}},
		{name: "killed switching branch: no journal, the new branch's lock goes", note: &GitStep{Step: "switch branch", Branch: "factory/new"},
			locks:   map[string]time.Duration{"index.lock": 0, "refs/heads/factory/new.lock": 0, headLock: 0, "refs/heads/main.lock": 0},
			removed: []string{"index.lock", "refs/heads/factory/new.lock"}},
		{name: "a note with no lock left", note: &GitStep{Step: "commit WO-02"}, journal: true},
		{name: "a note cannot point outside refs/heads", note: &GitStep{Step: "commit", Branch: "../../../victim"},
			locks: map[string]time.Duration{"index.lock": 0, "../victim.lock": 0}, removed: []string{"index.lock"}},
		{name: "journal without a note: stale locks go", journal: true,
			locks: map[string]time.Duration{"index.lock": time.Hour, headLock: StaleLockAge}, removed: []string{"index.lock", headLock}},
		{name: "journal without a note: a young lock keeps them all", journal: true,
			locks: map[string]time.Duration{"index.lock": time.Hour, "HEAD.lock": time.Second}, young: "HEAD.lock"},
		{name: "no journal, no note: an old lock stays", locks: map[string]time.Duration{"index.lock": time.Hour}, held: "index.lock"},
		{name: "no journal, no note: a young lock stays", locks: map[string]time.Duration{headLock: 0}, held: headLock},
		{name: "another branch's lock is not ours", journal: true, locks: map[string]time.Duration{"refs/heads/main.lock": time.Hour}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := &Repo{Root: dir, GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}
			writeTestFile(t, filepath.Join(r.GitDir, "HEAD"), "ref: refs/heads/"+head+"\n", now)
			if c.note != nil {
				if err := r.RecordGitStep(*c.note); err != nil {
					t.Fatal(err)
				}
			}
			for p, age := range c.locks {
				writeTestFile(t, filepath.Join(r.GitDir, p), "", now.Add(-age))
			}
			got, err := r.RecoverGitLocks(c.journal, now)
			var young *YoungLockError
			var held *GitLockError
			switch {
			case c.young != "":
				if !errors.As(err, &young) || young.Path != filepath.Join(r.GitDir, c.young) {
					t.Fatalf("err = %v, want a YoungLockError for %s", err, c.young)
				}
			case c.held != "":
				if !errors.As(err, &held) || held.Path != filepath.Join(r.GitDir, c.held) {
					t.Fatalf("err = %v, want a GitLockError for %s", err, c.held)
				}
				if msg := err.Error(); strings.Contains(msg, "Another git process") || !strings.Contains(msg, "remove the file, then run factory again") {
					t.Errorf("message %q is not factory's own", msg)
				}
			case err != nil:
				t.Fatal(err)
			}
			var want []string
			for _, p := range c.removed {
				want = append(want, filepath.Join(r.GitDir, p))
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("removed %q, want %q", got, want)
			}
			for p := range c.locks {
				_, err := os.Lstat(filepath.Join(r.GitDir, p))
				if gone := errors.Is(err, os.ErrNotExist); gone != slices.Contains(c.removed, p) {
					t.Errorf("%s removed: %v, want %v", p, gone, !gone)
				}
			}
			if _, noted, err := r.RecordedGitStep(); err != nil || noted {
				t.Errorf("after recovery: note left %v (err %v)", noted, err)
			}
		})
	}
}

func TestGitStepNote(t *testing.T) {
	dir := t.TempDir()
	r := &Repo{Root: dir, GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}
	if _, noted, err := r.RecordedGitStep(); noted || err != nil {
		t.Fatalf("before: noted %v, err %v", noted, err)
	}
	writeTestFile(t, filepath.Join(r.GitDir, "HEAD"), "ref: refs/heads/factory/x\n", time.Now())
	if err := r.RecordGitStep(GitStep{Step: "commit WO-01"}); err != nil {
		t.Fatal(err)
	}
	s, noted, err := r.RecordedGitStep()
	if want := (GitStep{Step: "commit WO-01", Branch: "factory/x", PID: os.Getpid()}); !noted || err != nil || s != want {
		t.Fatalf("noted %+v (%v, %v), want %+v", s, noted, err, want)
	}
	// The journal's removal forgets it too, and leaves no factory directory.
	if err := r.WriteJournal(map[string]int{"version": 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveJournal(); err != nil {
		t.Fatal(err)
	}
	if _, noted, _ := r.RecordedGitStep(); noted {
		t.Error("RemoveJournal left the git step note")
	}
	if _, err := os.Stat(filepath.Join(r.GitDir, FactoryDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("factory directory left: %v", err)
	}
	// Detached HEAD: no branch to name.
	writeTestFile(t, filepath.Join(r.GitDir, "HEAD"), strings.Repeat("a", 40)+"\n", time.Now())
	if err := r.RecordGitStep(GitStep{Step: "recover"}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := r.RecordedGitStep(); s.Branch != "" {
		t.Errorf("detached HEAD: branch %q", s.Branch)
	}
	if err := r.ClearGitStep(); err != nil {
		t.Fatal(err)
	}
	if err := r.ClearGitStep(); err != nil {
		t.Errorf("a second clear: %v", err)
	}
	writeTestFile(t, r.factoryPath(gitStepFile), "{not json", time.Now())
	if _, _, err := r.RecordedGitStep(); err == nil || !strings.Contains(err.Error(), gitStepFile) {
		t.Errorf("a damaged note: err = %v", err)
	}
}

func writeTestFile(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// The note of a git step lives exactly as long as the step, whatever the
// step returns.
func TestDuringGitStep(t *testing.T) {
	f := newFixture(t)
	repo := f.repo
	fail := errors.New("git failed")
	for _, want := range []error{nil, fail} {
		err := repo.DuringGitStep(GitStep{Step: "switch branch", Branch: "factory/p2"}, func() error {
			s, noted, err := repo.RecordedGitStep()
			if !noted || err != nil || s.Step != "switch branch" || s.Branch != "factory/p2" || s.PID != os.Getpid() {
				t.Errorf("during the step: %+v, noted %v, %v", s, noted, err)
			}
			return want
		})
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("DuringGitStep returned %v, want %v", err, want)
		}
		if _, noted, _ := repo.RecordedGitStep(); noted {
			t.Errorf("the note outlived the step (which returned %v)", want)
		}
	}
}
