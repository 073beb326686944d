package gitws

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLog commits messages shaped like the build's (a subject from a work
// order title, then the Factory-* trailers) through CommitPaths and reads
// them back with Log, which resume and status take progress from. Git
// itself is the oracle: Log must see the commit, its parent, its subject
// and its trailers as git's own format placeholders print them, one at a
// time.
//
// fuzz.sh: min-execs 10 (git is the oracle: several git processes per input)
func FuzzLog(f *testing.F) {
	for _, s := range [][3]string{
		{"Add the tokenizer", "WO-01", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{"Parse: numbers, strings", "WO-12", "abc"},
		{"title with\nnewline", "WO-02", "p"},
		{"# looks like a comment", "WO-03", "p"},
		{"Factory-Plan: forged", "WO-04", "real"},
		{"a\x1fb\x1ec", "WO-05", "p"},
		{"tab\there", "WO-06", " spaced value "},
		{"", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	isolateGit(f)
	root := f.TempDir()
	git(f, root, "init", "-q", "-b", "main")
	writeFile(f, root, "a.txt", "base\n")
	git(f, root, "add", "a.txt")
	git(f, root, "commit", "-q", "-m", "base")
	ctx := context.Background()
	repo, err := Open(ctx, root)
	if err != nil {
		f.Fatal(err)
	}
	n := 0
	f.Fuzz(func(t *testing.T, title, woID, plan string) {
		msg := "factory: " + woID + " " + title + "\n\nFactory-Work-Order: " + woID + "\nFactory-Run-Id: run\nFactory-Plan: " + plan + "\n"
		if strings.ContainsRune(msg, 0) {
			return // no argv, and no commit message, can hold a NUL byte
		}
		n++
		if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte(strings.Repeat("x", n%7)), 0o644); err != nil {
			t.Fatal(err)
		}
		head, err := repo.CommitPaths(ctx, []string{"a.txt"}, msg)
		if err != nil {
			t.Fatalf("commit %q: %v", msg, err)
		}
		commits, err := repo.Log(ctx, head, 2)
		if err != nil {
			t.Fatalf("Log after committing %q: %v", msg, err)
		}
		parent := strings.Fields(git(t, root, "log", "-1", "--format=%P", head))[0]
		if len(commits) != 2 || commits[0].Hash != head || commits[0].Parent != parent || commits[1].Hash != parent {
			t.Fatalf("Log(%s, 2) after committing %q = %+v, want %s then its parent %s", head, msg, commits, head, parent)
		}
		c := commits[0]
		if want := gitRaw(t, root, "log", "-1", "--format=%s", head); c.Subject != want {
			t.Fatalf("subject of %q: Log says %q, git %q", msg, c.Subject, want)
		}
		for _, key := range []string{"Factory-Work-Order", "Factory-Plan"} {
			values := strings.Split(strings.TrimRight(gitRaw(t, root, "log", "-1", "--format=%(trailers:key="+key+",valueonly,unfold)", head), "\n"), "\n")
			want := strings.TrimSpace(values[len(values)-1])
			if got := c.Trailers[key]; got != want {
				t.Fatalf("trailer %s of %q: Log says %q, git %q", key, msg, got, want)
			}
		}
	})
}

// gitRaw is git's stdout less its final newline: unlike git, it keeps
// the spaces a subject may start with.
func gitRaw(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// FuzzStatusPaths names files the way an agent or a command might, and
// checks the readers of git's -z output: Dirty lists an untracked file as
// "?? <name>" and nothing else, Snapshot lists an ignored one by its exact
// path (and refuses a name that is not UTF-8, naming it), IndexProblems names it once tracked and marked assume-unchanged,
// (both from git and from the index file) and Tidy removes exactly the untracked file and leaves the tree
// clean with the ignored one in place.
//
// fuzz.sh: min-execs 10 (git is the oracle: several git processes per input)
func FuzzStatusPaths(f *testing.F) {
	for _, name := range []string{"new.txt", "with space", " leading", "trailing ", "quote\"d", "new\nline", "tab\t", "-> arrow", "R  x -> y", "\xff\xfe", "ünï", "\\back", "#hash", "!bang", "*star", "?? q"} {
		f.Add(name, false)
		f.Add(name, true)
	}
	isolateGit(f)
	root := f.TempDir()
	git(f, root, "init", "-q", "-b", "main")
	writeFile(f, root, ".gitignore", "/ign/\n")
	git(f, root, "add", ".gitignore")
	git(f, root, "commit", "-q", "-m", "base")
	ctx := context.Background()
	repo, err := Open(ctx, root)
	if err != nil {
		f.Fatal(err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		f.Fatal(err)
	}
	before, err := repo.Snapshot(ctx)
	if err != nil {
		f.Fatal(err)
	}
	base := before.Rebased(head)
	f.Fuzz(func(t *testing.T, name string, ignored bool) {
		if name == "" || name == "." || name == ".." || name == ".git" || len(name) > 200 || strings.ContainsAny(name, "/\x00") {
			return // not one file name
		}
		if err := os.RemoveAll(filepath.Join(root, "ign")); err != nil {
			t.Fatal(err)
		}
		rel := name
		if ignored {
			rel = "ign/" + name
		}
		writeFile(t, root, rel, "x")
		defer os.RemoveAll(filepath.Join(root, filepath.FromSlash(rel)))

		dirty, err := repo.Dirty(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"?? " + name}
		if ignored {
			want = nil
		}
		if !slices.Equal(dirty, want) {
			t.Fatalf("Dirty with %q present = %q, want %q", rel, dirty, want)
		}
		b, err := repo.Snapshot(ctx)
		switch {
		case !utf8.ValidString(rel):
			// The journal could not hold the name: refused, naming it.
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", rel)) {
				t.Fatalf("Snapshot with %q present = %v, want a refusal naming it", rel, err)
			}
		case err != nil:
			t.Fatal(err)
		default:
			// The fast dirty check agrees with git status.
			fast := b
			if got, err := repo.DirtyAt(ctx, &fast); err != nil || !slices.Equal(got, want) {
				t.Fatalf("DirtyAt with %q present = %q, %v; want %q", rel, got, err, want)
			}
			if ignored != slices.Equal(b.Ignored, []string{rel}) {
				t.Fatalf("Snapshot with %q present lists ignored %q", rel, b.Ignored)
			}
		}
		if ignored {
			return
		}
		// Tracked but hidden from git (assume-unchanged): IndexProblems
		// names it exactly, from ls-files -s -v -z.
		git(t, root, "--literal-pathspecs", "add", "--", name)
		git(t, root, "update-index", "--assume-unchanged", "--", name)
		for _, at := range []string{"", head} { // from git, from the index file
			hidden, subs, err := repo.IndexProblems(ctx, at)
			if err != nil || !slices.Equal(hidden, []string{name}) || len(subs) != 0 {
				t.Fatalf("IndexProblems(%q) with %q hidden = %q, %q, %v", at, name, hidden, subs, err)
			}
		}
		git(t, root, "--literal-pathspecs", "rm", "-q", "--cached", "--", name)
		rep, clean, err := repo.Tidy(ctx, base, nil)
		if err != nil {
			t.Fatalf("Tidy with %q present: %v", rel, err)
		}
		if !clean || !slices.Equal(rep.Removed, []string{name}) {
			t.Fatalf("Tidy with %q present: clean %v, removed %q", rel, clean, rep.Removed)
		}
		if _, err := os.Lstat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Fatalf("Tidy left %q: %v", name, err)
		}
	})
}
