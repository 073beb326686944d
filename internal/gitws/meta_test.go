package gitws

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// Every kind of metadata a command can change to make the harness's next
// git run code, or act on another repository, is reported by MetaChanges
// and put back byte for byte by RestoreMeta, without running git.
func TestMetaChangesAndRestore(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, root string)
		want   []string
	}{
		{
			name: "filter driver planted in config and attributes",
			change: func(t *testing.T, root string) {
				appendFile(t, root, ".git/config", "[filter \"x\"]\n\tclean = sh -c 'env > /tmp/leak'\n")
				writeFile(t, root, ".git/info/attributes", "* filter=x\n")
			},
			want: []string{".git/config", ".git/info/attributes"},
		},
		{
			name: "config.worktree with a smudge filter",
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".git/config.worktree", "[filter \"x\"]\n\tsmudge = sh -c 'env > /tmp/leak'\n")
			},
			want: []string{".git/config.worktree"},
		},
		{
			name:   "hook planted",
			change: func(t *testing.T, root string) { writeFile(t, root, ".git/hooks/pre-commit", "#!/bin/sh\n") },
			want:   []string{".git/hooks/pre-commit"},
		},
		{
			name: "submodule config with fsmonitor",
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".git/modules/sub/config", "[core]\n\tfsmonitor = sh -c 'env > /tmp/leak'\n")
			},
			want: []string{".git/modules", ".git/modules/sub", ".git/modules/sub/config"},
		},
		{
			name:   "HEAD moved",
			change: func(t *testing.T, root string) { git(t, root, "checkout", "-q", "--detach") },
			want:   []string{".git/HEAD"},
		},
		{
			name: "branch moved by a commit",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "c.py", "x")
				git(t, root, "add", "c.py")
				git(t, root, "commit", "-q", "-m", "c")
			},
			want: []string{".git/refs/heads/main"},
		},
		{
			name:   "config chmodded",
			change: func(t *testing.T, root string) { chmod(t, root, ".git/config", 0o666) },
			want:   []string{".git/config"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			b, err := f.repo.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			before := snapshotMetaFiles(t, f.root)
			if got, err := f.repo.MetaChanges(b); err != nil || len(got) != 0 {
				t.Fatalf("MetaChanges before any change = %q, %v", got, err)
			}
			tt.change(t, f.root)
			got, err := f.repo.MetaChanges(b)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("MetaChanges = %q, %v; want %q", got, err, tt.want)
			}
			if _, err := f.repo.RestoreMeta(b); err != nil {
				t.Fatalf("RestoreMeta: %v", err)
			}
			if got, err := f.repo.MetaChanges(b); err != nil || len(got) != 0 {
				t.Errorf("MetaChanges after RestoreMeta = %q, %v", got, err)
			}
			if d := diffTrees(before, snapshotMetaFiles(t, f.root)); d != "" {
				t.Errorf("metadata differs after RestoreMeta:\n%s", d)
			}
		})
	}
}

// snapshotMetaFiles describes .git's config files, HEAD, refs/heads, hooks,
// info and modules.
func snapshotMetaFiles(t *testing.T, root string) treeState {
	t.Helper()
	state := treeState{}
	for _, p := range []string{".git/config", ".git/config.worktree", ".git/HEAD", ".git/refs/heads", ".git/hooks", ".git/info", ".git/modules"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			walkTree(t, root, p, state)
		}
	}
	return state
}

// In a linked worktree, a command that rewrites the work tree's .git file
// (pointing it at another repository) is seen, and the harness's own git
// stays on the pinned directories.
func TestMetaLinkedWorktree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, f.root, "worktree", "add", "-q", "-b", "feature", wt)
	repo, err := Open(ctx, wt)
	if err != nil {
		t.Fatal(err)
	}
	if repo.CommonDir != filepath.Join(f.root, ".git") || filepath.Dir(repo.GitDir) != filepath.Join(f.root, ".git", "worktrees") {
		t.Fatalf("GitDir = %s, CommonDir = %s", repo.GitDir, repo.CommonDir)
	}
	b, err := repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	git(t, other, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(other, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.root, ".git/worktrees/wt/config.worktree", "[core]\n\tbare = true\n")
	got, err := repo.MetaChanges(b)
	want := []string{".git", ".git/worktrees/wt/config.worktree"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("MetaChanges = %q, %v; want %q", got, err, want)
	}
	if _, err := repo.Rollback(ctx, b); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if got, err := repo.MetaChanges(b); err != nil || len(got) != 0 {
		t.Errorf("MetaChanges after Rollback = %q, %v", got, err)
	}
	if head := git(t, other, "status", "--porcelain"); head != "" {
		t.Errorf("the other repository was touched: %q", head)
	}
}

// Rollback gives files and directories their baseline modes back: git
// restores content with default modes, and commands run chmod. It checks
// only the paths a watch saw change since the snapshot, or, without a watch
// (or with one that may have missed changes), walks the whole tree: both
// must restore the same.
func TestRollbackRestoresModes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool // keep the snapshot's watch; else invalidate it
	}{{"watched", true}, {"walked", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			chmod(t, f.root, "src/app.py", 0o600)
			chmod(t, f.root, "README.md", 0o444)
			chmod(t, f.root, "src/pkg/util.py", 0o664)
			chmod(t, f.root, "src/pkg", 0o750)
			writeFile(t, f.root, "docs/a/b.md", "b\n")
			writeFile(t, f.root, "lib/m.py", "m\n")
			git(t, f.root, "add", "docs", "lib")
			git(t, f.root, "commit", "-q", "-m", "docs")
			chmod(t, f.root, "docs/a/b.md", 0o600)
			chmod(t, f.root, "docs/a", 0o700)
			b, err := f.repo.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS == "linux" && b.watch == nil {
				t.Fatal("Snapshot started no watch")
			}
			if !tc.watch {
				b.watch.invalidate()
			}
			before := snapshotTree(t, f.root)
			// Rewritten (git recreates it 0644), chmodded without a content change,
			// an ignored file chmodded, a directory chmodded.
			removeAll(t, f.root, "src/app.py")
			writeFile(t, f.root, "src/app.py", "changed\n")
			chmod(t, f.root, "README.md", 0o644)
			chmod(t, f.root, "src/pkg/util.py", 0o644)
			chmod(t, f.root, ".env", 0o644)
			chmod(t, f.root, "src/pkg", 0o755)
			// A baseline directory a command locked after adding a file and
			// changing one in it.
			writeFile(t, f.root, "lib/new.py", "new\n")
			writeFile(t, f.root, "lib/m.py", "changed\n")
			chmod(t, f.root, "lib", 0)
			// A directory a command left without any permission, with content.
			writeFile(t, f.root, "locked/inner/x.txt", "x")
			chmod(t, f.root, "locked/inner", 0)
			chmod(t, f.root, "locked", 0)
			// A tracked directory deleted whole: git recreates it and its
			// files with default modes.
			removeAll(t, f.root, "docs")

			if _, err := f.repo.Rollback(ctx, b); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
				t.Errorf("tree differs from baseline:\n%s", d)
			}
			if _, err := os.Lstat(filepath.Join(f.root, "locked")); !os.IsNotExist(err) {
				t.Errorf("locked/ was not removed: %v", err)
			}
			if b.Modes["src/app.py"] != fs.FileMode(0o600) {
				t.Errorf("Modes[src/app.py] = %v", b.Modes["src/app.py"])
			}
			// The watch saw what changed and nothing else, and still does for a
			// second rollback (the record is cumulative).
			changed, ok := b.watch.paths()
			if ok != (tc.watch && runtime.GOOS == "linux") {
				t.Fatalf("watch usable = %v", ok)
			}
			if ok {
				for _, p := range []string{"README.md", "src/pkg/util.py", ".env", "src/pkg", "docs"} {
					if _, seen := changed[p]; !seen {
						t.Errorf("watch missed %s: %v", p, changed)
					}
				}
				if _, seen := changed["src/pkg/__init__.py"]; seen {
					t.Errorf("watch reports an untouched path")
				}
				if _, seen := changed["run.sh"]; seen {
					t.Errorf("watch reports run.sh, untouched: %v", changed)
				}
			}
		})
	}
}
