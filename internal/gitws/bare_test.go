package gitws

import (
	"context"
	"path/filepath"
	"testing"
)

// A bare repository made by InitBare takes a push of the branch its HEAD
// names, and a copy then fetches that branch as the remote's HEAD; an
// existing directory or a bad branch name is refused.
func TestInitBare(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "b", "run.git")
	if err := InitBare(ctx, dir, "start"); err != nil {
		t.Fatal(err)
	}
	if err := InitBare(ctx, dir, "start"); err == nil {
		t.Error("InitBare over an existing directory succeeded")
	}
	if err := InitBare(ctx, filepath.Join(t.TempDir(), "x.git"), "-x"); err == nil {
		t.Error("InitBare with branch -x succeeded")
	}
	head := git(t, f.root, "rev-parse", "HEAD")
	r, err := Open(ctx, f.root)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + dir
	if err := r.PushLease(ctx, url, "start", head, ""); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCache(ctx, filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fetch(ctx, url); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ResolveRemote(ctx, "HEAD"); err != nil || got != head {
		t.Errorf("the remote's HEAD: %s, %v; want the pushed %s", got, err, head)
	}
}
