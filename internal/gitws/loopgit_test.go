package gitws

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoopGit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.repo
	if b, err := r.CurrentBranch(ctx); err != nil || b != "main" {
		t.Fatalf("CurrentBranch = %q, %v", b, err)
	}
	start, _ := r.Head(ctx)
	writeFile(t, f.root, "src/app.py", "print('changed')\n")
	writeFile(t, f.root, ".runner/tree.json", "{}\n")
	writeFile(t, f.root, ".runner/iterations/r/1/log", "x\n")
	if err := r.CreateBranch(ctx, "loop/r1"); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateBranch(ctx, "bad..name"); err == nil {
		t.Error("CreateBranch accepted an invalid name")
	}
	if b, _ := r.CurrentBranch(ctx); b != "loop/r1" {
		t.Fatalf("branch after CreateBranch = %q", b)
	}
	changed, err := r.ChangedSince(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".runner/iterations/r/1/log", ".runner/tree.json", "src/app.py"}
	if !slices.Equal(changed, want) {
		t.Errorf("ChangedSince = %q, want %q", changed, want)
	}
	who := Identity{"factory-loop", "loop@factory.invalid"}
	c1, err := r.CommitAll(ctx, "chore(loop): one", who, ".runner/iterations")
	if err != nil {
		t.Fatal(err)
	}
	if out := git(t, f.root, "log", "-1", "--format=%an <%ae> %cn <%ce>|%s"); out != "factory-loop <loop@factory.invalid> factory-loop <loop@factory.invalid>|chore(loop): one" {
		t.Errorf("commit identity/message = %q", out)
	}
	if files := git(t, f.root, "show", "--name-only", "--format=", "HEAD"); strings.Contains(files, "iterations") {
		t.Errorf("excluded path committed: %s", files)
	}
	// Identical inputs and pinned dates give the same hash: rebuild the same commit.
	git(t, f.root, "reset", "-q", "--soft", start)
	c1b, err := r.CommitAll(ctx, "chore(loop): one", who, ".runner/iterations")
	if err != nil || c1b != c1 {
		t.Errorf("recommit = %s (%v), want %s", c1b, err, c1)
	}
	c2, err := r.CommitAll(ctx, "chore(loop): empty", who)
	if err != nil {
		t.Fatal(err)
	}
	log, err := r.Log(ctx, "HEAD", 2)
	if err != nil || len(log) != 2 || log[0].Hash != c2 || log[0].Subject != "chore(loop): empty" || log[1].Hash != c1 {
		t.Fatalf("Log = %+v, %v", log, err)
	}
	got, err := r.Show(ctx, c1, ".runner/tree.json")
	if err != nil || string(got) != "{}\n" {
		t.Errorf("Show = %q, %v", got, err)
	}
	if _, err := r.Show(ctx, start, ".runner/tree.json"); !errors.Is(err, ErrNotInCommit) {
		t.Errorf("Show of a missing file: %v", err)
	}
	patch, err := r.Diff(ctx, start, c1)
	if err != nil || !strings.Contains(string(patch), "+print('changed')") {
		t.Errorf("Diff = %q, %v", patch, err)
	}
	git(t, f.root, "checkout", "-q", "--detach")
	if b, err := r.CurrentBranch(ctx); err != nil || b != "" {
		t.Errorf("detached CurrentBranch = %q, %v", b, err)
	}
}

func TestBaselineKeep(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	writeFile(t, f.root, ".gitignore", fixtureGitignore+".runner/iterations/\n")
	git(t, f.root, "commit", "-qam", "ignore logs")
	writeFile(t, f.root, ".runner/iterations/r/events.jsonl", "one\n")
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Keep(".runner/iterations/r")
	appendFile(t, f.root, ".runner/iterations/r/events.jsonl", "two\n")
	writeFile(t, f.root, ".runner/iterations/r/1/executor.log", "log\n")
	writeFile(t, f.root, "new.txt", "agent\n")
	if _, err := f.repo.Rollback(ctx, b); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(f.root, ".runner/iterations/r/events.jsonl")); string(data) != "one\ntwo\n" {
		t.Errorf("kept file restored: %q", data)
	}
	if _, err := os.Stat(filepath.Join(f.root, ".runner/iterations/r/1/executor.log")); err != nil {
		t.Errorf("kept log removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt survived the rollback: %v", err)
	}
}
