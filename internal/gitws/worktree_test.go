package gitws

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commitIn writes files in dir and commits them with message.
func commitIn(t *testing.T, dir, message string, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		if c == "" {
			git(t, dir, "rm", "-q", p)
			continue
		}
		writeFile(t, dir, p, c)
		git(t, dir, "add", p)
	}
	git(t, dir, "commit", "-q", "-m", message)
	return git(t, dir, "rev-parse", "HEAD")
}

// Replay applies a commit's change onto another commit as a tree
// operation, keeping message, author and dates: onto its own parent it
// gives the same commit; onto a commit that changed other files, the
// tree a commit made there would have; onto one that changed the same
// files, a refusal.
func TestReplay(t *testing.T) {
	isolateGit(t)
	ctx := context.Background()
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	base := commitIn(t, root, "base", map[string]string{"a.py": "a\n", "b.py": "b\n", "gone.py": "x\n"})
	other := commitIn(t, root, "other", map[string]string{"b.py": "b2\n", "c/new.py": "c\n"})
	git(t, root, "checkout", "-q", "--detach", base)
	change := commitIn(t, root, "factory: WO-03 change\n\nFactory-Work-Order: WO-03", map[string]string{"a.py": "a2\n", "d/e.py": "e\n", "gone.py": ""})
	git(t, root, "checkout", "-q", "main")
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := r.Replay(ctx, change, base); err != nil || same != change {
		t.Errorf("Replay onto its own parent = %s, %v; want %s", same, err, change)
	}
	got, err := r.Replay(ctx, change, other)
	if err != nil {
		t.Fatal(err)
	}
	// The tree a commit of the same change on top of other would have.
	git(t, root, "checkout", "-q", "--detach", other)
	want := commitIn(t, root, "x", map[string]string{"a.py": "a2\n", "d/e.py": "e\n", "gone.py": ""})
	if g, w := git(t, root, "rev-parse", got+"^{tree}"), git(t, root, "rev-parse", want+"^{tree}"); g != w {
		t.Errorf("replayed tree %s, want %s", g, w)
	}
	if p := git(t, root, "rev-parse", got+"^"); p != other {
		t.Errorf("parent %s, want %s", p, other)
	}
	for _, format := range []string{"%B", "%an %ae %ad", "%cn %ce %cd"} {
		if g, w := git(t, root, "log", "-1", "--format="+format, got), git(t, root, "log", "-1", "--format="+format, change); g != w {
			t.Errorf("%s: %q, want %q", format, g, w)
		}
	}
	git(t, root, "checkout", "-q", "--detach", other)
	clash := commitIn(t, root, "clash", map[string]string{"a.py": "a3\n"})
	if _, err := r.Replay(ctx, change, clash); err == nil || !strings.Contains(err.Error(), ": a.py changed between") {
		t.Errorf("Replay onto a commit that changed a.py: %v, want a refusal naming a.py", err)
	}
}

// An AddWorktree interrupted while git checks the files out leaves no
// worktree behind, locked or not.
func TestAddWorktreeInterrupted(t *testing.T) {
	isolateGit(t)
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	// A filter driver slow enough to be interrupted in the checkout.
	git(t, root, "config", "filter.slow.smudge", "sleep 30; cat")
	git(t, root, "config", "filter.slow.clean", "cat")
	head := commitIn(t, root, "base", map[string]string{".gitattributes": "*.py filter=slow\n", "a.py": "a\n"})
	r, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	dir := filepath.Join(r.WorktreesDir("build"), "WO-01")
	if _, err := r.AddWorktree(ctx, dir, head); err == nil {
		t.Fatal("AddWorktree finished within the timeout; want it interrupted")
	}
	if list := git(t, root, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", list)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s left", dir)
	}
}

// AddWorktree and RemoveWorktree leave no trace: no worktree git knows,
// no directory, no branch.
func TestWorktrees(t *testing.T) {
	isolateGit(t)
	ctx := context.Background()
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	head := commitIn(t, root, "base", map[string]string{"a.py": "a\n"})
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.WorktreesDir("build"), "WO-02")
	wt, err := r.AddWorktree(ctx, dir, head)
	if err != nil {
		t.Fatal(err)
	}
	if wt.Root != dir || wt.CommonDir != r.CommonDir {
		t.Errorf("worktree %+v", wt)
	}
	writeFile(t, dir, "untracked.txt", "x\n")
	if got, err := r.Worktrees(); err != nil || len(got) != 1 || got[0] != dir {
		t.Errorf("Worktrees = %v, %v", got, err)
	}
	// A second add at the same place replaces what was there.
	if _, err := r.AddWorktree(ctx, dir, head); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveWorktree(ctx, dir); err != nil {
		t.Fatal(err)
	}
	r.RemoveWorktreesDir()
	if list := git(t, root, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", list)
	}
	for _, p := range []string{r.WorktreesDir(""), filepath.Join(r.CommonDir, "worktrees", "WO-02")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
	if branches := git(t, root, "branch", "--format=%(refname:short)"); branches != "main" {
		t.Errorf("branches: %q", branches)
	}
	// A replay killed half-way leaves its scratch; RemoveScratch takes it.
	writeFile(t, root, ".git/factory/replay-123/index", "x")
	if err := r.RemoveScratch(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".git", "factory", "replay-123")); err == nil {
		t.Errorf("replay scratch left")
	}
}
