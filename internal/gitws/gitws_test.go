package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
	outside := t.TempDir() // for symlinks pointing out of the repository
	writeFile(t, outside, "secret", "do not touch\n")
	tests := []struct {
		name   string
		setup  func(t *testing.T, root string) // before Snapshot
		change func(t *testing.T, root string)

		wantRemoved    []string
		wantRestored   []string
		wantUnrestored []string
		wantNewRefs    []string
		wantDetached   bool     // HEAD detached at the baseline commit rather than on main
		wantDiff       []string // paths allowed to differ from the baseline afterwards
		gitResets      bool     // after Snapshot too, Rollback must leave the reset to git
	}{
		{name: "nothing changed", change: func(*testing.T, string) {}},
		{
			name: "tracked file modified, mode changed",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/app.py", "print('bye')\n")
				chmod(t, root, "run.sh", 0o644)
			},
		},
		{
			name:   "tracked files deleted",
			change: func(t *testing.T, root string) { removeAll(t, root, "src") },
		},
		{
			name: "tracked file replaced by a directory",
			change: func(t *testing.T, root string) {
				removeAll(t, root, "README.md")
				writeFile(t, root, "README.md/inner.txt", "x")
			},
			gitResets: true,
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
			name:        "new untracked directory holding only ignored files",
			change:      func(t *testing.T, root string) { writeFile(t, root, "tmp/run.log", "x") },
			wantRemoved: []string{"tmp/run.log"},
		},
		{
			name:        "new symlink to a directory outside the repo",
			change:      func(t *testing.T, root string) { symlink(t, outside, root, "src/escape") },
			wantRemoved: []string{"src/escape"},
		},
		// Tracked content is judged by stat data, not by the watch: these
		// change a tracked file through a name no watched directory reports.
		{
			name: "tracked file rewritten through a hard link, link removed",
			change: func(t *testing.T, root string) {
				hardLink(t, root, "src/app.py", "src/twin.py")
				writeFile(t, root, "src/twin.py", "print('evil')\n")
				removeAll(t, root, "src/twin.py")
			},
		},
		{
			name: "tracked file rewritten and chmodded through a hard link in a new directory",
			setup: func(t *testing.T, root string) {
				chmod(t, root, "src/app.py", 0o600)
			},
			change: func(t *testing.T, root string) {
				hardLink(t, root, "src/app.py", "scratch/deep/alias")
				writeFile(t, root, "scratch/deep/alias", "print('evil')\n")
				chmod(t, root, "scratch/deep/alias", 0o666)
				removeAll(t, root, "scratch")
			},
		},
		{
			name: "tracked file rewritten with its size and mtime put back",
			change: func(t *testing.T, root string) {
				p := filepath.Join(root, "src", "app.py")
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, root, "src/app.py", "print('HI')\n")
				if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "tracked files truncated, touched, renamed",
			change: func(t *testing.T, root string) {
				if err := os.Truncate(filepath.Join(root, "README.md"), 0); err != nil {
					t.Fatal(err)
				}
				future := time.Now().Add(time.Hour)
				if err := os.Chtimes(filepath.Join(root, "run.sh"), future, future); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(root, "src/app.py"), filepath.Join(root, "src/moved.py")); err != nil {
					t.Fatal(err)
				}
			},
			wantRemoved: []string{"src/moved.py"},
		},
		{
			name: "tracked file replaced by a symlink out of the repo",
			change: func(t *testing.T, root string) {
				removeAll(t, root, "src/app.py")
				symlink(t, outside+"/secret", root, "src/app.py")
			},
		},
		{
			name: "new directories made, filled, then renamed",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "a/b/file.txt", "x")
				if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "src/c")); err != nil {
					t.Fatal(err)
				}
			},
			wantRemoved: []string{"src/c/b/file.txt"},
		},
		{
			name: "tracked directory renamed",
			change: func(t *testing.T, root string) {
				if err := os.Rename(filepath.Join(root, "src/pkg"), filepath.Join(root, "src/pkg2")); err != nil {
					t.Fatal(err)
				}
			},
			wantRemoved: []string{"src/pkg2/util.py"},
			gitResets:   true, // the watch of a moved directory names the old path
		},
		{
			name: "tracked directory replaced by a symlink out of the repo",
			change: func(t *testing.T, root string) {
				removeAll(t, root, "src/pkg")
				symlink(t, outside, root, "src/pkg")
			},
			gitResets: true, // git puts the directory back in place of the symlink
		},
		{
			name: "tracked directory replaced by a file",
			change: func(t *testing.T, root string) {
				removeAll(t, root, "src/pkg")
				writeFile(t, root, "src/pkg", "x")
			},
			gitResets: true,
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
			gitResets:   true,
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
			wantRemoved:  []string{"committed.py"},
			wantRestored: []string{".git/refs/heads/main"},
			gitResets:    true,
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

		// Git metadata.
		{
			name: "planted hook removed",
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".git/hooks/pre-commit", "#!/bin/sh\necho pwned\n")
				chmod(t, root, ".git/hooks/pre-commit", 0o755)
			},
			wantRemoved: []string{".git/hooks/pre-commit"},
		},
		{
			name:  "modified and deleted hooks restored",
			setup: userHooks,
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".git/hooks/pre-push", "#!/bin/sh\necho pwned\n")
				chmod(t, root, ".git/hooks/pre-push", 0o777)
				removeAll(t, root, ".git/hooks/post-checkout")
			},
			wantRestored: []string{".git/hooks/post-checkout", ".git/hooks/pre-push"},
		},
		{
			name:  "hooks directory replaced by a symlink",
			setup: userHooks,
			change: func(t *testing.T, root string) {
				removeAll(t, root, ".git/hooks")
				writeFile(t, outside, "hooks/pre-commit", "#!/bin/sh\necho pwned\n")
				symlink(t, filepath.Join(outside, "hooks"), root, ".git/hooks")
			},
			wantRestored: []string{".git/hooks/post-checkout", ".git/hooks/pre-push"},
		},
		{
			name:  "new directory of hooks",
			setup: userHooks,
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".git/hooks/lib/a.sh", "x")
				writeFile(t, root, ".git/hooks/lib/deep/b.sh", "x")
			},
			wantRemoved: []string{".git/hooks/lib/a.sh", ".git/hooks/lib/deep/b.sh"},
		},
		{
			name: "alias and hooksPath appended to .git/config",
			change: func(t *testing.T, root string) {
				appendFile(t, root, ".git/config", "[alias]\n\tst = !sh -c 'echo pwned'\n[core]\n\thooksPath = /tmp/evil\n")
			},
			wantRestored: []string{".git/config"},
		},
		{
			name: ".git/info/exclude changed, info/attributes planted",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, ".git/info/exclude", "# mine\n*.swp\n")
			},
			change: func(t *testing.T, root string) {
				appendFile(t, root, ".git/info/exclude", "*.py\n")
				writeFile(t, root, ".git/info/attributes", "* filter=evil\n")
			},
			wantRestored: []string{".git/info/exclude"},
			wantRemoved:  []string{".git/info/attributes"},
		},

		// HEAD and refs.
		{
			name: "HEAD moved to a new branch with a commit",
			change: func(t *testing.T, root string) {
				git(t, root, "checkout", "-q", "-b", "other")
				writeFile(t, root, "feature.py", "x")
				git(t, root, "add", "feature.py")
				git(t, root, "commit", "-q", "-m", "on other")
				git(t, root, "tag", "v-attempt")
			},
			wantRemoved:  []string{"feature.py"},
			wantRestored: []string{".git/HEAD"},
			wantNewRefs:  []string{"refs/heads/other", "refs/tags/v-attempt"},
			gitResets:    true,
		},
		{
			name:         "HEAD detached by the attempt",
			change:       func(t *testing.T, root string) { git(t, root, "checkout", "-q", "--detach") },
			wantRestored: []string{".git/HEAD"},
			gitResets:    true,
		},
		{
			name: "HEAD on an orphan branch",
			change: func(t *testing.T, root string) {
				git(t, root, "checkout", "-q", "--orphan", "fresh")
				git(t, root, "rm", "-rq", "--cached", ".")
			},
			wantRestored: []string{".git/HEAD"},
			gitResets:    true,
		},
		{
			name: "stash created",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "src/app.py", "stashed\n")
				git(t, root, "stash", "-q")
			},
			wantNewRefs: []string{"refs/stash"},
			gitResets:   true,
		},
		{
			name:  "detached baseline, attempt commits on a new branch",
			setup: func(t *testing.T, root string) { git(t, root, "checkout", "-q", "--detach") },
			change: func(t *testing.T, root string) {
				git(t, root, "checkout", "-q", "main")
				git(t, root, "checkout", "-q", "-b", "other")
				writeFile(t, root, "feature.py", "x")
				git(t, root, "add", "feature.py")
				git(t, root, "commit", "-q", "-m", "on other")
			},
			wantRemoved:  []string{"feature.py"},
			wantRestored: []string{".git/HEAD"},
			wantNewRefs:  []string{"refs/heads/other"},
			wantDetached: true,
			gitResets:    true,
		},
		{
			name:         "detached baseline, attempt on an orphan branch",
			setup:        func(t *testing.T, root string) { git(t, root, "checkout", "-q", "--detach") },
			change:       func(t *testing.T, root string) { git(t, root, "checkout", "-q", "--orphan", "fresh") },
			wantRestored: []string{".git/HEAD"},
			wantDetached: true,
			gitResets:    true,
		},

		// Baseline ignored files.
		{
			name:         ".env deleted",
			change:       func(t *testing.T, root string) { removeAll(t, root, ".env") },
			wantRestored: []string{".env"},
		},
		{
			name: ".env rewritten with the same size, and chmodded",
			change: func(t *testing.T, root string) {
				writeFile(t, root, ".env", "SECRET=2\n")
				chmod(t, root, ".env", 0o644)
			},
			wantRestored: []string{".env"},
		},
		{
			name: ".env replaced by a symlink out of the repo",
			change: func(t *testing.T, root string) {
				removeAll(t, root, ".env")
				symlink(t, filepath.Join(outside, "secret"), root, ".env")
			},
			wantRestored: []string{".env"},
		},
		{
			name: ".env replaced by a directory",
			change: func(t *testing.T, root string) {
				removeAll(t, root, ".env")
				writeFile(t, root, ".env/inner", "x")
			},
			wantRemoved:  []string{".env/inner"},
			wantRestored: []string{".env"},
		},
		{
			name: ".venv/lib removed",
			setup: func(t *testing.T, root string) {
				chmod(t, root, ".venv/lib/python", 0o750)
				writeFile(t, root, ".venv/lib/python/pkg/mod.py", "import sys\n")
			},
			change:       func(t *testing.T, root string) { removeAll(t, root, ".venv/lib") },
			wantRestored: []string{".venv/lib/python/pkg/mod.py", ".venv/lib/python/site.py"},
		},
		{
			name: "ignored symlink retargeted",
			change: func(t *testing.T, root string) {
				removeAll(t, root, ".venv/lib64")
				symlink(t, outside, root, ".venv/lib64")
			},
			wantRestored: []string{".venv/lib64"},
		},
		{
			name:         "ignored symlink deleted",
			change:       func(t *testing.T, root string) { removeAll(t, root, ".venv/lib64") },
			wantRestored: []string{".venv/lib64"},
		},
		{
			name:           "ignored file over the backup size limit modified",
			setup:          func(t *testing.T, root string) { writeFile(t, root, "logs/big.log", strings.Repeat("x", 100<<10)) },
			change:         func(t *testing.T, root string) { appendFile(t, root, "logs/big.log", "more\n") },
			wantUnrestored: []string{"logs/big.log"},
			wantDiff:       []string{"logs/big.log"},
		},
		{
			name: "everything at once",
			setup: func(t *testing.T, root string) {
				userHooks(t, root)
				writeFile(t, root, "logs/big.log", strings.Repeat("x", 100<<10))
			},
			change: func(t *testing.T, root string) {
				git(t, root, "checkout", "-q", "-b", "other")
				writeFile(t, root, ".git/hooks/pre-commit", "#!/bin/sh\necho pwned\n")
				appendFile(t, root, ".git/config", "[alias]\n\tst = status\n")
				removeAll(t, root, ".env")
				removeAll(t, root, ".venv")
				removeAll(t, root, "logs")
				writeFile(t, root, "new.py", "x")
			},
			wantRemoved:    []string{".git/hooks/pre-commit", "new.py"},
			wantRestored:   []string{".env", ".git/HEAD", ".git/config", ".venv/bin/activate", ".venv/lib/python/site.py", ".venv/lib64", "logs/app.log"},
			wantUnrestored: []string{"logs/big.log"},
			wantNewRefs:    []string{"refs/heads/other"},
			wantDiff:       []string{".venv/include", "logs/big.log"}, // an empty dir is not restored
			gitResets:      true,
		},
	}
	// Each case twice: as Rollback does it after Snapshot (from the watch and
	// the stat data where it can, see planRestore), and with git doing it all
	// (the watch closed), which must end in the same tree.
	for _, tt := range tests {
		for _, how := range []string{"planned", "git"} {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				if tt.setup != nil {
					tt.setup(t, f.root)
				}
				b := snapshot(t, f, how != "git")
				before := snapshotTree(t, f.root)
				mtimesBefore := ignoredMtimes(t, f.root, b)
				for _, p := range []string{".env", ".venv/lib/python/site.py", ".venv/lib64", ".venv/include", "logs/app.log", ".git/config", ".git/hooks", ".git/info"} {
					if before[p] == "" {
						t.Fatalf("fixture lacks %s; the test would prove nothing", p)
					}
				}
				wantHead := "refs/heads/main"
				if tt.wantDetached {
					wantHead = ""
				}
				if got := symbolicHead(t, f.root); got != wantHead {
					t.Fatalf("HEAD at baseline is on %q, want %q", got, wantHead)
				}

				indexBefore, err := os.ReadFile(filepath.Join(f.root, ".git", "index"))
				if err != nil {
					t.Fatal(err)
				}
				tt.change(t, f.root)
				if how == "planned" {
					if _, planned := f.repo.planRestore(b); planned == tt.gitResets {
						t.Errorf("planRestore ok = %v, want %v", planned, !tt.gitResets)
					}
				}
				rep, err := f.repo.Rollback(ctx, b)
				if err != nil {
					t.Fatalf("Rollback: %v", err)
				}
				// Restored without git's reset, the index is the very file it was.
				if indexAfter, err := os.ReadFile(filepath.Join(f.root, ".git", "index")); how == "planned" && !tt.gitResets && !bytes.Equal(indexBefore, indexAfter) {
					t.Errorf("Rollback rewrote .git/index (%v)", err)
				}
				want := RollbackReport{Removed: tt.wantRemoved, Restored: tt.wantRestored, Unrestored: tt.wantUnrestored, NewRefs: tt.wantNewRefs}
				if d := diffReports(want, rep); d != "" {
					t.Errorf("first Rollback report:\n%s", d)
				}
				check := func(when string) {
					t.Helper()
					after := snapshotTree(t, f.root)
					for _, p := range tt.wantDiff {
						delete(before, p)
						delete(after, p)
					}
					if d := diffTrees(before, after); d != "" {
						t.Errorf("tree differs from baseline after %s:\n%s", when, d)
					}
					mtimesAfter := ignoredMtimes(t, f.root, b)
					for p, m := range mtimesBefore {
						if !slices.Contains(tt.wantDiff, p) && !mtimesAfter[p].Equal(m) {
							t.Errorf("after %s, mtime of %s = %v, want %v", when, p, mtimesAfter[p], m)
						}
					}
					if head, err := f.repo.Head(ctx); err != nil || head != b.Commit {
						t.Errorf("after %s, Head = %s, %v; want %s", when, head, err, b.Commit)
					}
					if got := symbolicHead(t, f.root); got != wantHead {
						t.Errorf("after %s, HEAD is on %q, want %q", when, got, wantHead)
					}
					if dirty, err := f.repo.Dirty(ctx); err != nil || len(dirty) > 0 {
						t.Errorf("after %s, Dirty = %q, %v; want clean", when, dirty, err)
					}
				}
				check("Rollback")
				if got, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(got) != "do not touch\n" {
					t.Errorf("file outside the repository = %q, %v", got, err)
				}

				// Nothing left to do; what could not be undone is still reported.
				rep, err = f.repo.Rollback(ctx, b)
				if err != nil {
					t.Fatalf("second Rollback: %v", err)
				}
				want.Removed, want.Restored = nil, nil
				if d := diffReports(want, rep); d != "" {
					t.Errorf("second Rollback report:\n%s", d)
				}
				check("second Rollback")
			})
		}
	}
}

// userHooks gives the repository hooks of its own in place of git's
// templates, which vary between installations.
func userHooks(t *testing.T, root string) {
	t.Helper()
	removeAll(t, root, ".git/hooks")
	writeFile(t, root, ".git/hooks/pre-push", "#!/bin/sh\nmake test\n")
	chmod(t, root, ".git/hooks/pre-push", 0o755)
	writeFile(t, root, ".git/hooks/post-checkout", "#!/bin/sh\n")
	chmod(t, root, ".git/hooks/post-checkout", 0o700)
}

// Rollback keeps the content of small, shallow ignored files first, within
// a total budget; the rest it can only report.
func TestRollbackBackupBudget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	writeFile(t, f.root, ".gitignore", fixtureGitignore+"*.bin\n")
	git(t, f.root, "commit", "-qam", "ignore *.bin")
	chunk := strings.Repeat("b", backupFileMax)
	writeFile(t, f.root, "top.bin", chunk)
	writeFile(t, f.root, "over.bin", chunk+"!") // over the per-file limit
	var deep []string
	for i := range backupTotalMax/backupFileMax + 4 {
		p := fmt.Sprintf("data/set/f%03d.bin", i)
		writeFile(t, f.root, p, chunk)
		deep = append(deep, p)
	}
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	backed := map[string]bool{}
	for _, file := range b.state.ignored {
		if file.backed {
			backed[file.path] = true
			total += int64(len(file.data))
		}
	}
	if total > backupTotalMax {
		t.Errorf("backed up %d bytes, over the %d budget", total, backupTotalMax)
	}
	for _, p := range []string{".env", "top.bin", "logs/app.log", ".venv/bin/activate", ".venv/lib/python/site.py"} {
		if !backed[p] {
			t.Errorf("%s not backed up", p)
		}
	}
	if backed["over.bin"] {
		t.Error("over.bin, over the per-file limit, was backed up")
	}
	// The deep files come last: a prefix of them by path fits, the rest not.
	n := 0
	for n < len(deep) && backed[deep[n]] {
		n++
	}
	if n == 0 || n == len(deep) || slices.ContainsFunc(deep[n:], func(p string) bool { return backed[p] }) {
		t.Fatalf("backed deep files: %d of %d, not a proper prefix", n, len(deep))
	}

	for _, p := range []string{"data", "top.bin", "over.bin", ".env"} {
		removeAll(t, f.root, p)
	}
	rep, err := f.repo.Rollback(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	wantRestored := append([]string{".env"}, deep[:n]...)
	wantRestored = append(wantRestored, "top.bin")
	slices.Sort(wantRestored)
	want := RollbackReport{Restored: wantRestored, Unrestored: append(deep[n:], "over.bin")}
	slices.Sort(want.Unrestored)
	if d := diffReports(want, rep); d != "" {
		t.Errorf("Rollback report:\n%s", d)
	}
}

// A Baseline not made by Snapshot carries no record of git metadata or
// HEAD, so Rollback leaves them alone rather than guess.
func TestRollbackHandMadeBaseline(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	head := git(t, f.root, "rev-parse", "HEAD")
	writeFile(t, f.root, ".git/hooks/pre-commit", "#!/bin/sh\n")
	git(t, f.root, "checkout", "-q", "-b", "other")
	writeFile(t, f.root, "new.txt", "x")
	rep, err := f.repo.Rollback(ctx, Baseline{Commit: head, Ignored: fixtureIgnored})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffReports(RollbackReport{Removed: []string{"new.txt"}}, rep); d != "" {
		t.Errorf("Rollback report:\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(f.root, ".git/hooks/pre-commit")); err != nil {
		t.Errorf("hook: %v", err)
	}
	if got := symbolicHead(t, f.root); got != "refs/heads/other" {
		t.Errorf("HEAD on %q, want refs/heads/other", got)
	}
}

// A directory holding a baseline ignored path survives even when the
// attempt deleted that path and Rollback emptied the directory (and the
// path comes back from its backup).
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
	rep, err := f.repo.Rollback(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	want := RollbackReport{Removed: []string{".venv/lib/python/other.py"}, Restored: []string{".venv/lib/python/site.py"}}
	if d := diffReports(want, rep); d != "" {
		t.Errorf("Rollback report:\n%s", d)
	}
	if info, err := os.Stat(filepath.Join(f.root, ".venv/lib/python")); err != nil || !info.IsDir() {
		t.Errorf("parent of a baseline ignored file was removed: %v", err)
	}
}

// A repository a command created (git init scratch) is removed like any new
// directory, not left behind as an error: the baseline tree was clean.
func TestRollbackRemovesNewNestedRepository(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, f.root)
	nested := filepath.Join(f.root, "vendor", "lib")
	writeFile(t, nested, "lib.go", "package lib\n")
	git(t, nested, "init", "-q", "-b", "main")
	writeFile(t, f.root, "stray.txt", "x")

	rep, err := f.repo.Rollback(ctx, b)
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if want := []string{"stray.txt", "vendor/lib/"}; !slices.Equal(rep.Removed, want) {
		t.Errorf("Removed = %q, want %q", rep.Removed, want)
	}
	if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
		t.Errorf("tree differs from baseline:\n%s", d)
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
	rep, err := f.repo.Rollback(ctx, b)
	if err != nil || len(rep.Removed) > 0 {
		t.Errorf("Rollback = %+v, %v; want nothing removed", rep, err)
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

func TestIndexProblems(t *testing.T) {
	f := newFixture(t)
	r := f.repo
	ctx := context.Background()
	head := git(t, f.root, "rev-parse", "HEAD")
	// "" asks git (ls-files), head reads the index file: both must say the same.
	check := func(what, wantHidden, wantSubs string) {
		t.Helper()
		for _, at := range []string{"", head} {
			hidden, subs, err := r.IndexProblems(ctx, at)
			if err != nil || strings.Join(hidden, ",") != wantHidden || strings.Join(subs, ",") != wantSubs {
				t.Errorf("%s, IndexProblems(%q) = %v, %v, %v; want hidden %q, submodules %q", what, at, hidden, subs, err, wantHidden, wantSubs)
			}
		}
	}
	check("fresh repo", "", "")
	git(t, f.root, "update-index", "--skip-worktree", "src/app.py")
	git(t, f.root, "update-index", "--assume-unchanged", "README.md")
	// A gitlink, as `git submodule add` records it, without the network.
	git(t, f.root, "update-index", "--add", "--cacheinfo", "160000,"+head+",vendor/sub")
	check("marked entries and a gitlink", "README.md,src/app.py", "vendor/sub")
	git(t, f.root, "update-index", "--index-version", "4")
	check("index version 4", "README.md,src/app.py", "vendor/sub")
	if err := os.MkdirAll(filepath.Join(f.root, ".git", "modules", "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("with .git/modules", "README.md,src/app.py", "vendor/sub,.git/modules")
	git(t, f.root, "update-index", "--split-index") // not read here: git answers
	check("split index", "README.md,src/app.py", "vendor/sub,.git/modules")
}

func TestFiles(t *testing.T) {
	f := newFixture(t)
	got, err := f.repo.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := ".gitignore,README.md,run.sh,src/app.py,src/pkg/util.py"; strings.Join(got, ",") != want {
		t.Errorf("Files = %v, want %s", got, want)
	}
}

// A split index (its entries in .git/sharedindex.*) cannot be copied alone:
// TreeHash notices it from the files, whether or not core.splitIndex says
// so, and hashes from HEAD's tree instead.
func TestTreeHashSplitIndex(t *testing.T) {
	for _, viaConfig := range []bool{false, true} {
		t.Run(fmt.Sprintf("config=%v", viaConfig), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if viaConfig {
				git(t, f.root, "config", "core.splitIndex", "true")
				git(t, f.root, "update-index", "--force-write-index")
			} else {
				git(t, f.root, "update-index", "--split-index")
			}
			if shared, _ := filepath.Glob(filepath.Join(f.root, ".git", "sharedindex.*")); len(shared) == 0 {
				t.Fatal("git made no shared index")
			}
			writeFile(t, f.root, "src/app.py", "changed\n")
			writeFile(t, f.root, "new/file.txt", "new\n")
			h, err := f.repo.TreeHash(ctx)
			if err != nil {
				t.Fatal(err)
			}
			git(t, f.root, "add", "-A")
			if want := git(t, f.root, "write-tree"); h != want {
				t.Errorf("TreeHash = %s, want %s", h, want)
			}
		})
	}
}

// TestTreeHashAt checks that staging only what the watch and the stat data
// say changed gives the tree TreeHash gives by staging everything.
func TestTreeHashAt(t *testing.T) {
	tests := []struct {
		name      string
		change    func(t *testing.T, root string)
		gitStages bool // TreeHashAt must leave it all to git
	}{
		{name: "nothing changed", change: func(*testing.T, string) {}},
		{name: "tracked file modified", change: func(t *testing.T, root string) { writeFile(t, root, "src/app.py", "changed\n") }},
		{name: "tracked file made executable", change: func(t *testing.T, root string) { chmod(t, root, "src/app.py", 0o755) }},
		{name: "tracked directory deleted", change: func(t *testing.T, root string) { removeAll(t, root, "src/pkg") }},
		{
			name: "tracked file replaced by a symlink",
			change: func(t *testing.T, root string) {
				removeAll(t, root, "README.md")
				symlink(t, "src/app.py", root, "README.md")
			},
		},
		{
			name: "tracked file rewritten through a hard link",
			change: func(t *testing.T, root string) {
				hardLink(t, root, "src/app.py", "scratch/alias")
				writeFile(t, root, "scratch/alias", "evil\n")
				removeAll(t, root, "scratch")
			},
		},
		{
			name: "new files, with names pathspecs would read as patterns",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "top.txt", "x")
				writeFile(t, root, "src/pkg/new.py", "x")
				writeFile(t, root, "new/deep/a*b [x]:?.txt", "x")
				writeFile(t, root, ":(exclude)odd", "x")
			},
		},
		{
			name: "new ignored files and changed baseline ignored ones",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "debug.log", "x")
				writeFile(t, root, "src/pkg/trace.log", "x")
				writeFile(t, root, ".venv/lib/extra.py", "x")
				writeFile(t, root, "build/obj/a.o", "x")
				writeFile(t, root, ".env", "SECRET=2\n")
				removeAll(t, root, "logs/app.log")
			},
		},
		{
			name:      "new .gitignore un-ignores a baseline ignored file",
			change:    func(t *testing.T, root string) { writeFile(t, root, "logs/.gitignore", "!*.log\n") },
			gitStages: true,
		},
		{
			name:      "tracked .gitignore changed",
			change:    func(t *testing.T, root string) { writeFile(t, root, ".gitignore", ".venv/\n") },
			gitStages: true,
		},
		{
			name:      "new .gitattributes",
			change:    func(t *testing.T, root string) { writeFile(t, root, "src/.gitattributes", "*.py text eol=crlf\n") },
			gitStages: true,
		},
		{
			name: "file staged",
			change: func(t *testing.T, root string) {
				writeFile(t, root, "staged.py", "x")
				git(t, root, "add", "staged.py")
			},
			gitStages: true,
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
			tt.change(t, f.root)
			if _, planned, err := f.repo.changedToStage(ctx, b); err != nil || planned == tt.gitStages {
				t.Errorf("changedToStage ok = %v (%v), want %v", planned, err, !tt.gitStages)
			}
			index := filepath.Join(f.root, ".git", "index")
			before, err := os.ReadFile(index)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.repo.TreeHashAt(ctx, b)
			if err != nil {
				t.Fatalf("TreeHashAt: %v", err)
			}
			if after, err := os.ReadFile(index); err != nil || !bytes.Equal(before, after) {
				t.Fatalf("TreeHashAt modified .git/index (%v)", err)
			}
			want, err := f.repo.TreeHash(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("TreeHashAt = %s, TreeHash = %s\nTreeHashAt lists:\n%s\nTreeHash lists:\n%s", got, want,
					git(t, f.root, "ls-tree", "-r", got), git(t, f.root, "ls-tree", "-r", want))
			}
		})
	}
}
