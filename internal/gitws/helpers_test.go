package gitws

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// isolateGit makes git ignore the machine's configuration and pins identity
// and dates, so repositories and hashes are reproducible.
func isolateGit(t testing.TB) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	// Under a git hook (go test from pre-commit) these point at the outer
	// repository; t.Setenv first so that the cleanup restores them.
	for _, name := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	// Keeps "not a repository" tests from discovering a repo above the temp dir.
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(home))
	for _, who := range []string{"AUTHOR", "COMMITTER"} {
		t.Setenv("GIT_"+who+"_NAME", "Factory Test")
		t.Setenv("GIT_"+who+"_EMAIL", "test@example.com")
		t.Setenv("GIT_"+who+"_DATE", "2001-01-01T00:00:00Z")
	}
}

// git runs git in dir for test setup and returns trimmed stdout.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, root, rel string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// hardLink makes rel a second name of the file at from, creating rel's
// parent directories.
func hardLink(t *testing.T, root, from, rel string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, filepath.FromSlash(from)), p); err != nil {
		t.Fatal(err)
	}
}

// snapshot takes f's baseline; unless watched, with its watch closed, so
// that what Rollback, TreeHashAt and Tidy do comes from git alone.
func snapshot(t *testing.T, f fixture, watched bool) Baseline {
	t.Helper()
	b, err := f.repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !watched {
		b.watch.close()
		b.watch = nil
	}
	return b
}

// fixture is a committed repository with the kind of ignored state a user
// has lying around: secrets, a virtualenv with nested files, a symlink, an
// empty directory, and logs.
type fixture struct {
	root string
	repo *Repo
}

const fixtureGitignore = ".env\n.venv/\nbuild/\n*.log\n"

// fixtureIgnored is what Snapshot must find in a fresh fixture.
var fixtureIgnored = []string{
	".env",
	".venv/bin/activate",
	".venv/lib/python/site.py",
	".venv/lib64",
	"logs/app.log",
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	isolateGit(t)
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	// Git's templates, which normally provide these, vary between installations.
	for _, dir := range []string{".git/hooks", ".git/info"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, root, ".gitignore", fixtureGitignore)
	writeFile(t, root, "README.md", "# demo\n")
	writeFile(t, root, "src/app.py", "print('hi')\n")
	writeFile(t, root, "src/pkg/util.py", "X = 1\n")
	writeFile(t, root, "run.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "init")

	writeFile(t, root, ".env", "SECRET=1\n")
	if err := os.Chmod(filepath.Join(root, ".env"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, ".venv/bin/activate", "# activate\n")
	writeFile(t, root, ".venv/lib/python/site.py", "import os\n")
	symlink(t, "lib", root, ".venv/lib64")
	if err := os.MkdirAll(filepath.Join(root, ".venv/include"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "logs/app.log", "started\n")

	repo, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{root: repo.Root, repo: repo}
}

// treeState describes every file, directory and symlink under a root except
// .git, plus .git/config, .git/hooks and .git/info: type, permission bits,
// and content hash or link target.
type treeState map[string]string

func snapshotTree(t *testing.T, root string) treeState {
	t.Helper()
	state := treeState{}
	walkTree(t, root, ".", state)
	// Git metadata that Rollback restores too.
	for _, p := range []string{".git/config", ".git/hooks", ".git/info"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			walkTree(t, root, p, state)
		}
	}
	return state
}

// walkTree adds top and everything under it to state, skipping .git.
func walkTree(t *testing.T, root, top string, state treeState) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			state[rel] = "symlink -> " + target
		case d.IsDir():
			state[rel] = fmt.Sprintf("dir %v", info.Mode().Perm())
		case !info.Mode().IsRegular():
			state[rel] = fmt.Sprintf("special %v", info.Mode()) // reading a FIFO would block
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			state[rel] = fmt.Sprintf("file %v %x", info.Mode(), sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot tree %s: %v", root, err)
	}
}

// ignoredMtimes returns the mtimes of b's ignored regular files (zero when
// one is missing or not a regular file).
func ignoredMtimes(t *testing.T, root string, b Baseline) map[string]time.Time {
	t.Helper()
	mtimes := map[string]time.Time{}
	for _, p := range b.Ignored {
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err == nil && info.Mode().IsRegular() {
			mtimes[p] = info.ModTime()
		} else {
			mtimes[p] = time.Time{}
		}
	}
	return mtimes
}

// diffReports describes how got differs from want, or returns "".
func diffReports(want, got RollbackReport) string {
	var lines []string
	for _, f := range []struct {
		name      string
		want, got []string
	}{
		{"Removed", want.Removed, got.Removed},
		{"Restored", want.Restored, got.Restored},
		{"Unrestored", want.Unrestored, got.Unrestored},
		{"NewRefs", want.NewRefs, got.NewRefs},
	} {
		if !slices.Equal(f.want, f.got) {
			lines = append(lines, fmt.Sprintf("%s = %q, want %q", f.name, f.got, f.want))
		}
	}
	return strings.Join(lines, "\n")
}

// symbolicHead returns the branch HEAD is on, "" when it is detached.
func symbolicHead(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "symbolic-ref", "-q", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return ""
	}
	if err != nil {
		t.Fatalf("git symbolic-ref HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func chmod(t *testing.T, root, rel string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(root, filepath.FromSlash(rel)), mode); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, root, rel, content string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(rel)), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// diffTrees describes how got differs from want, or returns "" if equal.
func diffTrees(want, got treeState) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, "missing "+p+" ("+w+")")
		} else if g != w {
			lines = append(lines, "changed "+p+": "+w+" => "+g)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, "extra "+p+" ("+g+")")
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// readFile reads a file of the tree, "" when it does not exist.
func readFile(t testing.TB, root, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}
