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
