package gitws

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCommitPathsAndLog(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	base, _ := f.repo.Head(ctx)
	writeFile(t, f.root, "src/new.py", "N = 1\n")
	writeFile(t, f.root, "README.md", "# changed\n")
	writeFile(t, f.root, "stray.txt", "not asked for\n")
	writeFile(t, f.root, "build/out.bin", "ignored but asked for\n")
	msg := "factory: WO-01 title\n\nFactory-Work-Order: WO-01\nFactory-Plan: abc\n"
	c, err := f.repo.CommitPaths(ctx, []string{"src/new.py", "README.md", "build/out.bin"}, msg)
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(git(t, f.root, "show", "--name-only", "--format=", c))
	slices.Sort(files)
	if want := []string{"README.md", "build/out.bin", "src/new.py"}; !slices.Equal(files, want) {
		t.Errorf("commit holds %v, want %v", files, want)
	}
	if st := git(t, f.root, "status", "--porcelain"); st != "?? stray.txt" {
		t.Errorf("status after commit = %q, want only the stray file", st)
	}
	log, err := f.repo.Log(ctx, "HEAD", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Hash != c || log[0].Parent != base || log[0].Subject != "factory: WO-01 title" ||
		log[0].Trailers["Factory-Work-Order"] != "WO-01" || log[0].Trailers["Factory-Plan"] != "abc" ||
		log[1].Parent != "" || len(log[1].Trailers) != 0 {
		t.Errorf("log = %+v", log)
	}
	// Files rewritten with their own content: still a commit, an empty one.
	again, err := f.repo.CommitPaths(ctx, []string{"src/new.py"}, "factory: WO-02 no change\n")
	if err != nil || again == c || git(t, f.root, "show", "--name-only", "--format=", again) != "" {
		t.Errorf("CommitPaths of unchanged files = %s, %v", again, err)
	}
	got, err := f.repo.FilesAt(ctx, base)
	if err != nil || slices.Contains(got, "src/new.py") || !slices.Contains(got, "src/app.py") {
		t.Errorf("FilesAt(base) = %v, %v", got, err)
	}
}

func TestBranches(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	head, _ := f.repo.Head(ctx)
	if b, err := f.repo.CurrentBranch(ctx); err != nil || b != "main" {
		t.Fatalf("CurrentBranch = %q, %v", b, err)
	}
	if _, ok, err := f.repo.BranchCommit(ctx, "factory/x"); ok || err != nil {
		t.Fatalf("BranchCommit of a missing branch = %v, %v", ok, err)
	}
	if err := f.repo.SwitchBranch(ctx, "factory/x", head); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.repo.CurrentBranch(ctx); b != "factory/x" {
		t.Errorf("after SwitchBranch: on %q", b)
	}
	if err := f.repo.SwitchBranch(ctx, "main", ""); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := f.repo.BranchCommit(ctx, "factory/x"); !ok || err != nil || c != head {
		t.Errorf("BranchCommit = %q, %v, %v", c, ok, err)
	}
	git(t, f.root, "checkout", "-q", "--detach")
	if b, err := f.repo.CurrentBranch(ctx); err != nil || b != "" {
		t.Errorf("detached: CurrentBranch = %q, %v", b, err)
	}
	for name, ok := range map[string]bool{"factory/abc": true, "feature-1": true, "-x": false, "a..b": false, "a b": false, "": false} {
		if err := CheckBranchName(ctx, name); (err == nil) != ok {
			t.Errorf("CheckBranchName(%q) = %v", name, err)
		}
	}
}

// Init makes one empty commit, signed by the fallback identity when the
// user has none.
func TestInitWithoutIdentity(t *testing.T) {
	isolateGit(t)
	for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)
	}
	dir := filepath.Join(t.TempDir(), "a", "new")
	r, err := Init(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if files := git(t, r.Root, "ls-tree", "-r", "HEAD"); files != "" {
		t.Errorf("initial commit holds %q", files)
	}
	if who := git(t, r.Root, "log", "-1", "--format=%an <%ae>"); who != FallbackName+" <"+FallbackEmail+">" {
		t.Errorf("author = %q", who)
	}
}

// Tidy after a commit: leftovers that are only untracked or ignored files go
// from one listing and the tree is then clean by construction; a change to
// a tracked file, or a mode to restore, takes the full path (clean false),
// and either way the tree ends at the commit with the baseline's ignored
// files and modes.
func TestTidy(t *testing.T) {
	cases := []struct {
		name      string
		leave     func(t *testing.T, root string)
		wantClean bool
		removed   []string
	}{
		{"nothing left", func(*testing.T, string) {}, true, nil},
		{"untracked and new ignored files", func(t *testing.T, root string) {
			writeFile(t, root, "src/__pycache__/app.cpython-311.pyc", "x")
			writeFile(t, root, "new/deep/file.txt", "x")
			writeFile(t, root, "logs/run.log", "x")
		}, true, []string{"logs/run.log", "new/deep/file.txt", "src/__pycache__/app.cpython-311.pyc"}},
		{"a nested repository", func(t *testing.T, root string) {
			git(t, root, "init", "-q", "scratch")
		}, true, []string{"scratch/"}},
		{"a tracked file changed", func(t *testing.T, root string) {
			writeFile(t, root, "README.md", "changed\n")
			writeFile(t, root, "junk.txt", "x")
		}, false, []string{"junk.txt"}},
		{"a tracked file staged", func(t *testing.T, root string) {
			writeFile(t, root, "src/app.py", "staged\n")
			git(t, root, "add", "src/app.py")
		}, false, nil},
		{"a mode changed", func(t *testing.T, root string) {
			chmod(t, root, "src/pkg/util.py", 0o600)
		}, false, nil},
		{"a directory locked", func(t *testing.T, root string) {
			writeFile(t, root, "locked/in/x.txt", "x")
			chmod(t, root, "locked/in", 0)
			chmod(t, root, "locked", 0)
		}, true, []string{"locked/in/x.txt"}},
	}
	// Each case as a build has it (the snapshot's watch still running, see
	// treeChanges), and with git listing everything (the watch closed).
	for _, tc := range cases {
		for _, how := range []string{"watched", "git"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				b := snapshot(t, f, how != "git")
				writeFile(t, f.root, "src/app.py", "print('v2')\n")
				commit, err := f.repo.CommitPaths(ctx, []string{"src/app.py"}, "wo")
				if err != nil {
					t.Fatal(err)
				}
				want := snapshotTree(t, f.root)
				tc.leave(t, f.root)
				rep, clean, err := f.repo.Tidy(ctx, b.Rebased(commit), nil)
				if err != nil {
					t.Fatalf("Tidy: %v", err)
				}
				if clean != tc.wantClean {
					t.Errorf("clean = %v, want %v", clean, tc.wantClean)
				}
				if !slices.Equal(rep.Removed, tc.removed) {
					t.Errorf("Removed = %q, want %q", rep.Removed, tc.removed)
				}
				if dirty, err := f.repo.Dirty(ctx); err != nil || len(dirty) > 0 {
					t.Errorf("Dirty after Tidy = %q, %v", dirty, err)
				}
				if d := diffTrees(want, snapshotTree(t, f.root)); d != "" {
					t.Errorf("tree differs from the commit:\n%s", d)
				}
				if head, _ := f.repo.Head(ctx); head != commit {
					t.Errorf("HEAD = %s, want %s", head, commit)
				}
			})
		}
	}
	f := newFixture(t)
	b, err := f.repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.repo.Tidy(context.Background(), b, nil); err == nil {
		t.Error("Tidy with a full baseline succeeded; it is only for Rebased ones")
	}
}

// Tidy keeps the kept directories git ignores, with all they hold, and
// removes one it does not ignore, as any other leftover.
func TestTidyKeepsIgnoredDirs(t *testing.T) {
	for _, how := range []string{"watched", "git"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			writeFile(t, f.root, ".gitignore", readFile(t, f.root, ".gitignore")+"node_modules/\n")
			if _, err := f.repo.CommitPaths(ctx, []string{".gitignore"}, "ignore node_modules"); err != nil {
				t.Fatal(err)
			}
			b := snapshot(t, f, how != "git")
			writeFile(t, f.root, "src/app.py", "print('v2')\n")
			commit, err := f.repo.CommitPaths(ctx, []string{"src/app.py"}, "wo")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, f.root, "node_modules/left-pad/index.js", "x")
			writeFile(t, f.root, "target/debug/app", "x")
			rep, _, err := f.repo.Tidy(ctx, b.Rebased(commit), []string{"node_modules", "target"})
			if err != nil {
				t.Fatalf("Tidy: %v", err)
			}
			if !slices.Equal(rep.Removed, []string{"target/debug/app"}) {
				t.Errorf("Removed = %q, want only the unignored target's file", rep.Removed)
			}
			if got := readFile(t, f.root, "node_modules/left-pad/index.js"); got != "x" {
				t.Errorf("the ignored node_modules was not kept: %q", got)
			}
			if dirty, err := f.repo.Dirty(ctx); err != nil || len(dirty) > 0 {
				t.Errorf("Dirty after Tidy = %q, %v", dirty, err)
			}
		})
	}
}

// CommitStaged must make the very commit CommitPaths makes (same object id,
// same reflog line), whether or not it can use what TreeHashAt staged, and
// leave an index that proves the tree clean without git.
func TestCommitStaged(t *testing.T) {
	const message = "factory: WO-01 add a thing  \n\n\n\nFactory-Work-Order: WO-01\t\nFactory-Run: abc\n\n"
	cases := []struct {
		name       string
		change     func(t *testing.T, root string) // before TreeHashAt
		paths      []string
		after      func(t *testing.T, root string) // between TreeHashAt and the commit
		wantStaged bool
	}{
		{"one file rewritten", func(t *testing.T, root string) { writeFile(t, root, "src/app.py", "v2\n") },
			[]string{"src/app.py"}, nil, true},
		{"files written and created", func(t *testing.T, root string) {
			writeFile(t, root, "src/app.py", "v2\n")
			writeFile(t, root, "src/new/mod.py", "x\n")
			writeFile(t, root, "logs/ignored.log", "x\n")
		}, []string{"src/new/mod.py", "src/app.py"}, nil, true},
		{"an untracked file besides the paths", func(t *testing.T, root string) {
			writeFile(t, root, "src/app.py", "v2\n")
			writeFile(t, root, "junk.txt", "x\n")
		}, []string{"src/app.py"}, nil, false},
		{"index changed after the tree hash", func(t *testing.T, root string) { writeFile(t, root, "src/app.py", "v2\n") },
			[]string{"src/app.py"}, func(t *testing.T, root string) {
				writeFile(t, root, "staged.txt", "x\n")
				git(t, root, "add", "staged.txt")
			}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			commitWith := func(staged bool) (commit, reflog string) {
				f := newFixture(t)
				b, err := f.repo.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tc.change(t, f.root)
				tree, err := f.repo.TreeHashAt(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				if tc.after != nil {
					tc.after(t, f.root)
				}
				if staged {
					if got := f.repo.stagedFor(b, tc.paths) != nil; got != tc.wantStaged {
						t.Errorf("stagedFor = %v, want %v", got, tc.wantStaged)
					}
					commit, err = f.repo.CommitStaged(ctx, b, tc.paths, message)
				} else {
					commit, err = f.repo.CommitPaths(ctx, tc.paths, message)
				}
				if err != nil {
					t.Fatal(err)
				}
				if dirty := git(t, f.root, "status", "--porcelain", "--untracked-files=no"); dirty != "" {
					t.Errorf("after the commit, git status = %q", dirty)
				}
				idx, _, err := f.repo.readIndex(commit)
				if staged && tc.wantStaged && (err != nil || idx.tree != tree) {
					t.Errorf("index after CommitStaged: cache tree %q (%v), want %s", idx.tree, err, tree)
				}
				return commit, git(t, f.root, "reflog", "-1", "--format=%gs", "HEAD")
			}
			wantCommit, wantReflog := commitWith(false)
			gotCommit, gotReflog := commitWith(true)
			if gotCommit != wantCommit || gotReflog != wantReflog {
				t.Errorf("CommitStaged made %s (%q), CommitPaths %s (%q)", gotCommit, gotReflog, wantCommit, wantReflog)
			}
		})
	}
}

// What TreeHashAt staged for one tree must not be committed for another: a
// rollback, or a later TreeHashAt that stages the other way, drops it.
func TestCommitStagedAfterRollbackAndFallback(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := snapshot(t, f, true)
	writeFile(t, f.root, "src/app.py", "v1\n")
	if _, err := f.repo.TreeHashAt(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := f.repo.Rollback(ctx, b); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.root, "src/app.py", "v2\n")
	b.watch.invalidate() // this time TreeHashAt has git stage everything
	tree, err := f.repo.TreeHashAt(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := f.repo.CommitStaged(ctx, b, []string{"src/app.py"}, "wo\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, f.root, "rev-parse", commit+"^{tree}"); got != tree {
		t.Errorf("committed tree %s, TreeHashAt said %s (v2 is in the work tree)", got, tree)
	}
}
