package gitws

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDirtyAtAgrees checks DirtyAt against Dirty (git status) on trees
// clean and unclean in each way the fast path must notice, and that the
// fast path itself decides where it should (fast): a check that always
// handed over to git would agree too.
func TestDirtyAtAgrees(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, root string)
		dirty bool
		fast  bool // provablyClean must say clean
	}{
		{"clean, with ignored files", func(*testing.T, string) {}, false, true},
		{"untracked empty directory", func(t *testing.T, root string) { mkdir(t, root, "empty/dir") }, false, true},
		{"untracked file", func(t *testing.T, root string) { writeFile(t, root, "new.txt", "x") }, true, false},
		{"untracked file in a new directory", func(t *testing.T, root string) { writeFile(t, root, "a/b/c.txt", "x") }, true, false},
		{"modified, same size and mtime", func(t *testing.T, root string) {
			p := filepath.Join(root, "src", "app.py")
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, root, "src/app.py", "print('ho')\n")
			if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"rewritten with the same content", func(t *testing.T, root string) { writeFile(t, root, "src/app.py", "print('hi')\n") }, false, true},
		{"deleted", func(t *testing.T, root string) { removeAll(t, root, "src/pkg/util.py") }, true, false},
		{"replaced by a directory", func(t *testing.T, root string) {
			removeAll(t, root, "README.md")
			writeFile(t, root, "README.md/x", "x")
		}, true, false},
		{"staged", func(t *testing.T, root string) {
			writeFile(t, root, "README.md", "# changed\n")
			git(t, root, "add", "README.md")
		}, true, false},
		{"staged, then put back in the work tree", func(t *testing.T, root string) {
			writeFile(t, root, "README.md", "# changed\n")
			git(t, root, "add", "README.md")
			writeFile(t, root, "README.md", "# demo\n")
		}, true, false},
		{"made executable", func(t *testing.T, root string) { chmod(t, root, "README.md", 0o755) }, true, false},
		{"made private (git keeps no such bits)", func(t *testing.T, root string) { chmod(t, root, "README.md", 0o600) }, false, true},
		{"intent to add", func(t *testing.T, root string) {
			writeFile(t, root, "new.txt", "x")
			git(t, root, "add", "-N", "new.txt")
		}, true, false},
		{"assume-unchanged hides a change from git", func(t *testing.T, root string) {
			git(t, root, "update-index", "--assume-unchanged", "README.md")
			writeFile(t, root, "README.md", "# changed\n")
		}, false, false},
		{"nested repository", func(t *testing.T, root string) {
			mkdir(t, root, "sub")
			git(t, filepath.Join(root, "sub"), "init", "-q")
		}, true, false},
		{"untracked fifo (git passes over it)", func(t *testing.T, root string) {
			if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
				t.Skip(err)
			}
		}, false, true},
		{"index version 4", func(t *testing.T, root string) { git(t, root, "update-index", "--index-version", "4") }, false, true},
		{"split index", func(t *testing.T, root string) { git(t, root, "update-index", "--split-index") }, false, false},
		{"cache tree invalidated", func(t *testing.T, root string) {
			git(t, root, "update-index", "--force-remove", "README.md")
			git(t, root, "update-index", "--add", "README.md")
		}, false, false},
		{"nested repository in an ignored directory", func(t *testing.T, root string) {
			mkdir(t, root, ".venv/sub")
			git(t, filepath.Join(root, ".venv/sub"), "init", "-q")
		}, false, true},
		{"tracked symlink", func(t *testing.T, root string) {
			symlink(t, "README.md", root, "link")
			git(t, root, "add", "link")
			git(t, root, "commit", "-q", "-m", "link")
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(t, f.root)
			ctx := context.Background()
			head, err := f.repo.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := f.repo.SnapshotAt(ctx, head)
			if err != nil {
				t.Fatal(err)
			}
			if fast := f.repo.provablyClean(ctx, b, append([]walkedFile(nil), b.walked...)); fast != c.fast {
				t.Errorf("provablyClean = %v; want %v", fast, c.fast)
			}
			got, err := f.repo.DirtyAt(ctx, &b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := f.repo.Dirty(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) > 0) != c.dirty || (len(want) > 0) != c.dirty {
				t.Errorf("DirtyAt = %q, Dirty = %q; want dirty %v", got, want, c.dirty)
			}
			if b.walked != nil {
				t.Error("DirtyAt kept the walk's stat data")
			}
		})
	}
}

// TestDirtyAtSHA256 runs the fast path on a SHA-256 repository, whose
// index holds 32-byte object ids.
func TestDirtyAtSHA256(t *testing.T) {
	isolateGit(t)
	root := t.TempDir()
	cmdOut, err := gitOutput(root, "init", "-q", "--object-format=sha256")
	if err != nil {
		t.Skipf("git cannot make a SHA-256 repository: %v %s", err, cmdOut)
	}
	writeFile(t, root, "a.txt", "a\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "init")
	ctx := context.Background()
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, untracked := range []bool{false, true} {
		if untracked {
			writeFile(t, r.Root, "b.txt", "b\n")
		}
		head, err := r.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.SnapshotAt(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		if fast := r.provablyClean(ctx, b, b.walked); fast == untracked {
			t.Errorf("untracked %v: provablyClean = %v", untracked, fast)
		}
		if dirty, err := r.DirtyAt(ctx, &b); err != nil || (len(dirty) > 0) != untracked {
			t.Errorf("untracked %v: DirtyAt = %q, %v", untracked, dirty, err)
		}
	}
}

// TestDirtyAtRacy writes a tracked file again, same size, after the index
// was written but within the same timestamp: its stat data may equal what
// the index holds, and only a comparison of content can tell.
func TestDirtyAtRacy(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.root, "src", "app.py")
	git(t, f.root, "update-index", "--refresh")
	idx, err := os.Stat(filepath.Join(f.root, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.root, "src/app.py", "print('ho')\n")
	// The same mtime as the index: racily clean for git.
	if err := os.Chtimes(p, idx.ModTime(), idx.ModTime()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	head, _ := f.repo.Head(ctx)
	b, err := f.repo.SnapshotAt(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if dirty, err := f.repo.DirtyAt(ctx, &b); err != nil || len(dirty) == 0 {
		t.Errorf("DirtyAt = %q, %v; want the change to src/app.py", dirty, err)
	}
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mkdir(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
}
