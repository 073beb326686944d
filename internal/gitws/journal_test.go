package gitws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A Baseline that went through the journal restores exactly as the one in
// memory: metadata, ignored-file backups and modes included.
func TestBaselineJournalRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	chmod(t, f.root, "src/app.py", 0o600)
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, f.root)
	if err := f.repo.WriteJournal(map[string]any{"baseline": b}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.repo.HasJournal(); !ok || err != nil {
		t.Fatalf("HasJournal = %v, %v", ok, err)
	}
	var j struct{ Baseline Baseline }
	if err := f.repo.ReadJournal(&j); err != nil {
		t.Fatal(err)
	}
	if got, err := f.repo.MetaChanges(j.Baseline); err != nil || len(got) != 0 {
		t.Fatalf("MetaChanges against the decoded baseline = %q, %v", got, err)
	}

	writeFile(t, f.root, ".git/hooks/pre-commit", "#!/bin/sh\n")
	appendFile(t, f.root, ".git/config", "[alias]\n\tx = status\n")
	removeAll(t, f.root, ".env")
	writeFile(t, f.root, "src/app.py", "changed\n")
	writeFile(t, f.root, "new/file.py", "x")
	if _, err := f.repo.Rollback(ctx, j.Baseline); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
		t.Errorf("tree differs from baseline:\n%s", d)
	}
	if err := f.repo.RemoveJournal(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.repo.HasJournal(); ok {
		t.Error("journal still present after RemoveJournal")
	}
	if _, err := json.Marshal(Baseline{Commit: b.Commit}); err != nil {
		t.Errorf("hand-made baseline: %v", err)
	}
}

// The lock is shared by linked worktrees and names its holder.
func TestLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.repo.Lock()
	if err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, f.root, "worktree", "add", "-q", "-b", "feature", wt)
	other, err := Open(ctx, wt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Repo{f.repo, other} {
		_, err := r.Lock()
		var locked *LockedError
		if !errors.As(err, &locked) || locked.PID != os.Getpid() {
			t.Errorf("second Lock via %s = %v, want a LockedError naming pid %d", r.Root, err, os.Getpid())
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Lock()
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	l2.Unlock()
}

// TestModesJSON checks the hand-written encoding of a baseline's modes
// against encoding/json's, byte for byte, on keys that need escapes.
func TestModesJSON(t *testing.T) {
	for _, m := range []map[string]fs.FileMode{
		nil,
		{},
		{"a": 0o644, "src/b.py": 0o755 | fs.ModeSetuid, "dir": 0o700 | fs.ModeSticky},
		{`q"uote`: 1, `back\slash`: 2, "<html>&": 3, "tab\there": 4, "new\nline": 5, "\x7f": 6, "ünï": 7, "\xff\xfe": 8, "\u2028": 9, "": 10},
	} {
		got, err := json.Marshal(modesJSON(m))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("modesJSON(%q) = %s, want %s", m, got, want)
		}
	}
}
