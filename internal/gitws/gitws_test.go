package gitws

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	plain := t.TempDir()
	bare := filepath.Join(t.TempDir(), "bare.git")
	git(t, plain, "init", "-q", "--bare", bare)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(f.root, link); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		dir      string
		wantErr  error  // checked with errors.Is
		wantText string // substring of the error
	}{
		{name: "root", dir: f.root},
		{name: "root through a symlink", dir: link},
		{name: "not a repository", dir: plain, wantErr: ErrNotGitRepo},
		{name: "bare repository", dir: bare, wantErr: ErrNotGitRepo},
		{name: "inside .git", dir: filepath.Join(f.root, ".git"), wantErr: ErrNotGitRepo},
		{name: "subdirectory", dir: filepath.Join(f.root, "src", "pkg"), wantText: "subdirectory of the work tree " + f.root},
		{name: "missing directory", dir: filepath.Join(plain, "nope"), wantText: "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, err := Open(ctx, tt.dir)
			if tt.wantErr == nil && tt.wantText == "" {
				if err != nil {
					t.Fatalf("Open(%s): %v", tt.dir, err)
				}
				if repo.Root != f.root {
					t.Errorf("Root = %s, want %s", repo.Root, f.root)
				}
				return
			}
			if err == nil {
				t.Fatalf("Open(%s) succeeded with Root %s, want an error", tt.dir, repo.Root)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open(%s) = %v, want errors.Is %v", tt.dir, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Open(%s) = %v, want it to mention %q", tt.dir, err, tt.wantText)
			}
		})
	}
}

func TestHead(t *testing.T) {
	f := newFixture(t)
	got, err := f.repo.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := git(t, f.root, "rev-parse", "HEAD"); got != want {
		t.Errorf("Head = %s, want %s", got, want)
	}
}

func TestHeadNoCommits(t *testing.T) {
	isolateGit(t)
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	ctx := context.Background()
	repo, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Head(ctx); !errors.Is(err, ErrNoCommits) {
		t.Errorf("Head = %v, want ErrNoCommits", err)
	}
	if _, err := repo.Snapshot(ctx); !errors.Is(err, ErrNoCommits) {
		t.Errorf("Snapshot = %v, want ErrNoCommits", err)
	}
}

func TestDirty(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, root string)
		want   []string
	}{
		{name: "clean", change: func(*testing.T, string) {}},
		{
			name: "ignored files only",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "build/out.bin", "x")
				writeFile(t, root, "debug.log", "x")
			},
		},
		{
			name:   "unstaged modification",
			change: func(t *testing.T, root string) { writeFile(t, root, "src/app.py", "changed\n") },
			want:   []string{" M src/app.py"},
		},
		{
			name: "unstaged deletion",
			change: func(t *testing.T, root string) {
				if err := os.Remove(filepath.Join(root, "README.md")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{" D README.md"},
		},
		{
			name: "staged addition and modification",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "new.py", "n\n")
				writeFile(t, root, "src/app.py", "changed\n")
				git(t, root, "add", "new.py", "src/app.py")
			},
			want: []string{"A  new.py", "M  src/app.py"},
		},
		{
			name:   "staged rename is a deletion plus an addition",
			change: func(t *testing.T, root string) { git(t, root, "mv", "README.md", "READ ME.md") },
			want:   []string{"A  READ ME.md", "D  README.md"},
		},
		{
			name: "untracked files listed one by one, names unquoted",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "new/deep/naïve file.txt", "x")
				writeFile(t, root, "new/other.txt", "x")
			},
			want: []string{"?? new/deep/naïve file.txt", "?? new/other.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.change(t, f.root)
			got, err := f.repo.Dirty(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Dirty = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	f := newFixture(t)
	b, err := f.repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := git(t, f.root, "rev-parse", "HEAD"); b.Commit != want {
		t.Errorf("Commit = %s, want %s", b.Commit, want)
	}
	// Files inside the ignored .venv/ are listed individually, the symlink as a file.
	if !slices.Equal(b.Ignored, fixtureIgnored) {
		t.Errorf("Ignored = %q, want %q", b.Ignored, fixtureIgnored)
	}
	if want := []string{".venv/include"}; !slices.Equal(b.EmptyDirs, want) {
		t.Errorf("EmptyDirs = %q, want %q", b.EmptyDirs, want)
	}
	for _, p := range fixtureIgnored {
		if !b.IsIgnored(p) {
			t.Errorf("IsIgnored(%q) = false, want true", p)
		}
	}
	for _, p := range []string{".venv", ".venv/", ".venv/lib", "README.md", "logs", ""} {
		if b.IsIgnored(p) {
			t.Errorf("IsIgnored(%q) = true, want false", p)
		}
	}
}

func TestRollback(t *testing.T) {
	tests := []struct {
		name        string
		change      func(t *testing.T, root string)
		wantRemoved []string
	}{
		{name: "nothing changed", change: func(*testing.T, string) {}},
		{
			name: "tracked file modified, mode changed",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/app.py", "print('bye')\n")
				if err := os.Chmod(filepath.Join(root, "run.sh"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "tracked files deleted",
			change: func(t *testing.T, root string) {
				if err := os.RemoveAll(filepath.Join(root, "src")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "tracked file replaced by a directory",
			change: func(t *testing.T, root string) {
				if err := os.Remove(filepath.Join(root, "README.md")); err != nil {
					t.Fatal(err)
				}
				writeFile(t, root, "README.md/inner.txt", "x")
			},
		},
		{
			name: "untracked files in new nested directories",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/pkg/new/deep/mod.py", "x")
				writeFile(t, root, "docs/guide.md", "x")
				writeFile(t, root, "top.txt", "x")
			},
			wantRemoved: []string{"docs/guide.md", "src/pkg/new/deep/mod.py", "top.txt"},
		},
		{
			name:        "new ignored file",
			change:      func(t *testing.T, root string) { writeFile(t, root, "src/debug.log", "x") },
			wantRemoved: []string{"src/debug.log"},
		},
		{
			name: "new file inside a baseline-ignored directory",
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".venv/lib/new.py", "x")
				writeFile(t, root, ".venv/lib/python/fresh/mod.py", "x")
				writeFile(t, root, ".venv/include/header.h", "x")
			},
			wantRemoved: []string{".venv/include/header.h", ".venv/lib/new.py", ".venv/lib/python/fresh/mod.py"},
		},
		{
			name: "new ignored directory with nested files",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "build/out.bin", "x")
				writeFile(t, root, "build/obj/a.o", "x")
			},
			wantRemoved: []string{"build/obj/a.o", "build/out.bin"},
		},
		{
			name: "new untracked directory holding only ignored files",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "tmp/run.log", "x")
			},
			wantRemoved: []string{"tmp/run.log"},
		},
		{
			name: "new symlink to a directory outside the repo",
			change: func(t *testing.T, root string) {
				symlink(t, filepath.Dir(root), root, "src/escape")
			},
			wantRemoved: []string{"src/escape"},
		},
		{
			name: "changes staged, including a force-added baseline ignored file",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/app.py", "staged\n")
				writeFile(t, root, "staged.py", "x")
				git(t, root, "add", "-A")
				git(t, root, "add", "-f", ".env", ".venv/lib/python/site.py")
				git(t, root, "rm", "-q", "--cached", "README.md")
			},
			wantRemoved: []string{"staged.py"},
		},
		{
			name: "commit made, including a force-added baseline ignored file",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/app.py", "committed\n")
				writeFile(t, root, "committed.py", "x")
				writeFile(t, root, ".gitignore", "")
				git(t, root, "add", "-A")
				git(t, root, "add", "-f", ".env")
				git(t, root, "commit", "-q", "-m", "attempt")
			},
			wantRemoved: []string{"committed.py"},
		},
		{
			// git clean -fd would delete logs/app.log here.
			name: "untracked .gitignore un-ignores baseline files",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "logs/.gitignore", "!*.log\n")
				writeFile(t, root, ".venv/.gitignore", "!*\n")
			},
			wantRemoved: []string{".venv/.gitignore", "logs/.gitignore"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			b, err := f.repo.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before := snapshotTree(t, f.root)
			envBefore := before[".env"]
			for _, p := range []string{".env", ".venv/lib/python/site.py", ".venv/lib64", ".venv/include", "logs/app.log"} {
				if before[p] == "" {
					t.Fatalf("fixture lacks %s; the test would prove nothing", p)
				}
			}

			tt.change(t, f.root)
			removed, err := f.repo.Rollback(ctx, b)
			if err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			if !slices.Equal(removed, tt.wantRemoved) {
				t.Errorf("removed = %q, want %q", removed, tt.wantRemoved)
			}
			after := snapshotTree(t, f.root)
			if after[".env"] != envBefore {
				t.Errorf(".env = %q, want %q", after[".env"], envBefore)
			}
			if d := diffTrees(before, after); d != "" {
				t.Errorf("tree differs from baseline:\n%s", d)
			}
			if head, err := f.repo.Head(ctx); err != nil || head != b.Commit {
				t.Errorf("Head = %s, %v; want %s", head, err, b.Commit)
			}
			if dirty, err := f.repo.Dirty(ctx); err != nil || len(dirty) > 0 {
				t.Errorf("Dirty = %q, %v; want clean", dirty, err)
			}

			removed, err = f.repo.Rollback(ctx, b)
			if err != nil || len(removed) > 0 {
				t.Errorf("second Rollback = %q, %v; want nothing removed", removed, err)
			}
			if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
				t.Errorf("tree differs from baseline after second Rollback:\n%s", d)
			}
		})
	}
}

// A directory holding a baseline ignored path survives even when the
// attempt deleted that path and Rollback emptied the directory.
func TestRollbackKeepsParentsOfBaselineIgnored(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.root, ".venv/lib/python/site.py")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.root, ".venv/lib/python/other.py", "x")
	removed, err := f.repo.Rollback(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".venv/lib/python/other.py"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %q, want %q", removed, want)
	}
	if info, err := os.Stat(filepath.Join(f.root, ".venv/lib/python")); err != nil || !info.IsDir() {
		t.Errorf("parent of a baseline ignored file was removed: %v", err)
	}
}

// Like git clean -fd, Rollback leaves untracked nested repositories alone,
// since they may hold history; it reports them instead.
func TestRollbackLeavesNestedRepository(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(f.root, "vendor", "lib")
	writeFile(t, nested, "lib.go", "package lib\n")
	git(t, nested, "init", "-q", "-b", "main")
	writeFile(t, f.root, "stray.txt", "x")

	removed, err := f.repo.Rollback(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "nested repositories in place: vendor/lib/") {
		t.Errorf("Rollback error = %v, want it to name vendor/lib/", err)
	}
	if want := []string{"stray.txt"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %q, want %q", removed, want)
	}
	if _, err := os.Stat(filepath.Join(nested, "lib.go")); err != nil {
		t.Errorf("nested repository content was touched: %v", err)
	}
}

// An ignored nested repository present at baseline is listed as one entry
// and kept, even after the attempt deletes its .git.
func TestRollbackKeepsIgnoredNestedRepository(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pkg := filepath.Join(f.root, ".venv", "src", "pkg")
	writeFile(t, pkg, "setup.py", "x")
	git(t, pkg, "init", "-q", "-b", "main")
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !b.IsIgnored(".venv/src/pkg/") {
		t.Fatalf("Ignored = %q, want it to list .venv/src/pkg/", b.Ignored)
	}
	before := snapshotTree(t, f.root)
	writeFile(t, f.root, "build/x", "x")
	if _, err := f.repo.Rollback(ctx, b); err != nil {
		t.Fatal(err)
	}
	if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
		t.Errorf("tree differs from baseline:\n%s", d)
	}

	// Without its .git, git lists the repository's files one by one; they
	// existed at baseline all the same.
	if err := os.RemoveAll(filepath.Join(pkg, ".git")); err != nil {
		t.Fatal(err)
	}
	removed, err := f.repo.Rollback(ctx, b)
	if err != nil || len(removed) > 0 {
		t.Errorf("Rollback = %q, %v; want nothing removed", removed, err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "setup.py")); err != nil {
		t.Errorf("file of a baseline nested repository was removed: %v", err)
	}
}

func TestRollbackRejectsBadCommit(t *testing.T) {
	f := newFixture(t)
	for _, commit := range []string{"", "HEAD", "--hard", strings.Repeat("g", 40)} {
		if _, err := f.repo.Rollback(context.Background(), Baseline{Commit: commit}); err == nil {
			t.Errorf("Rollback to %q succeeded, want an error", commit)
		}
	}
}

func TestTreeHash(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	index := filepath.Join(f.root, ".git", "index")
	hash := func() string {
		t.Helper()
		before, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		h, err := f.repo.TreeHash(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatal("TreeHash modified .git/index")
		}
		return h
	}

	clean := hash()
	if want := git(t, f.root, "rev-parse", "HEAD^{tree}"); clean != want {
		t.Errorf("TreeHash of a clean tree = %s, want HEAD's tree %s", clean, want)
	}
	if again := hash(); again != clean {
		t.Errorf("TreeHash not deterministic: %s then %s", clean, again)
	}

	writeFile(t, f.root, "debug.log", "ignored")
	writeFile(t, f.root, ".venv/lib/extra.py", "ignored")
	if h := hash(); h != clean {
		t.Errorf("ignored files changed TreeHash: %s, want %s", h, clean)
	}

	writeFile(t, f.root, "src/app.py", "changed\n")
	modified := hash()
	if modified == clean {
		t.Error("TreeHash unchanged after modifying a tracked file")
	}

	writeFile(t, f.root, "new/file.txt", "new\n")
	withNew := hash()
	if withNew == modified {
		t.Error("TreeHash unchanged after adding an untracked file")
	}
	if got := git(t, f.root, "ls-tree", "-r", "--name-only", withNew, "--", "new"); got != "new/file.txt" {
		t.Errorf("tree lists %q under new/, want new/file.txt", got)
	}

	// Staged state in the user's index plays no part, and stays as it was.
	git(t, f.root, "add", "src/app.py")
	if h := hash(); h != withNew {
		t.Errorf("staging changed TreeHash: %s, want %s", h, withNew)
	}

	writeFile(t, f.root, "src/app.py", "print('hi')\n")
	if err := os.RemoveAll(filepath.Join(f.root, "new")); err != nil {
		t.Fatal(err)
	}
	if h := hash(); h != clean {
		t.Errorf("TreeHash after reverting = %s, want %s", h, clean)
	}
}

func TestTracked(t *testing.T) {
	f := newFixture(t)
	writeFile(t, f.root, "odd/a*b", "x")
	writeFile(t, f.root, ":(top)odd", "x")
	git(t, f.root, "add", "-A")
	git(t, f.root, "commit", "-q", "-m", "odd names")
	writeFile(t, f.root, "staged.py", "x")
	git(t, f.root, "add", "staged.py")
	git(t, f.root, "rm", "-q", "--cached", "README.md")

	tests := []struct {
		path string
		want bool
	}{
		{"src/app.py", true},
		{"./src/../src/app.py", true},
		{"run.sh", true},
		{"README.md", true},  // removed from the index only; HEAD still has it
		{"staged.py", false}, // in the index only
		{"src", false},
		{"src/", false},
		{"src/missing.py", false},
		{".env", false},
		{".venv/lib/python/site.py", false},
		{"odd/a*b", true},
		{"odd/a*", false},
		{":(top)odd", true}, // a literal name, not pathspec magic
		{"odd/*", false},
		{"", false},
	}
	for _, tt := range tests {
		got, err := f.repo.Tracked(context.Background(), tt.path)
		if err != nil {
			t.Errorf("Tracked(%q): %v", tt.path, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Tracked(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	for _, p := range []string{"../outside", "/etc/passwd", "src/../../x"} {
		if _, err := f.repo.Tracked(context.Background(), p); err == nil {
			t.Errorf("Tracked(%q) succeeded, want an error", p)
		}
	}
}
