package gitws

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// Two copies of one remote: a push succeeds only from the state the
// remote is in (the lease), so a copy that started from an older state
// cannot overwrite newer work; a fetch shows the other copy's commits.
func TestFetchAndPushLease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	remote, url, a, b := twoCopies(t, f)
	base, err := a.ResolveRemote(ctx, "HEAD")
	if err != nil || base != git(t, f.root, "rev-parse", "HEAD") {
		t.Fatalf("remote HEAD: %s, %v", base, err)
	}
	if _, err := a.ResolveRemote(ctx, "no-such-branch"); err == nil {
		t.Error("an unknown base resolved")
	}
	commit := func(r *Repo, name string) string {
		t.Helper()
		if err := r.CheckoutAt(ctx, "factory/x", base); err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.Root, name, name+"\n")
		c, err := r.CommitPaths(ctx, []string{name}, "add "+name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, cb := commit(a, "a.txt"), commit(b, "b.txt")
	if err := a.PushLease(ctx, url, "factory/x", ca, ""); err != nil {
		t.Fatalf("first push: %v", err)
	}
	// b started when the branch did not exist: refused.
	if err := b.PushLease(ctx, url, "factory/x", cb, ""); !errors.Is(err, ErrPushRejected) {
		t.Fatalf("push over newer work: %v, want ErrPushRejected", err)
	}
	// A wrong expectation is refused too, even for a fast-forward.
	if err := b.PushLease(ctx, url, "factory/x", cb, base); !errors.Is(err, ErrPushRejected) {
		t.Fatalf("push with a stale lease: %v, want ErrPushRejected", err)
	}
	if err := b.Fetch(ctx, url); err != nil {
		t.Fatal(err)
	}
	tip, ok, err := b.RemoteBranch(ctx, "factory/x")
	if err != nil || !ok || tip != ca {
		t.Fatalf("remote branch after fetch: %s %v %v, want %s", tip, ok, err, ca)
	}
	if err := b.CheckoutAt(ctx, "factory/x", tip); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b.Root, "c.txt", "c\n")
	cc, err := b.CommitPaths(ctx, []string{"c.txt"}, "add c")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PushLease(ctx, url, "factory/x", cc, ca); err != nil {
		t.Fatalf("push from the remote's state: %v", err)
	}
	if got := git(t, remote, "rev-parse", "refs/heads/factory/x"); got != cc {
		t.Errorf("remote branch at %s, want %s", got, cc)
	}
	if _, ok, _ := a.RemoteBranch(ctx, "gone"); ok {
		t.Error("a branch the remote lacks exists")
	}
}

// PushRef puts a commit at a ref outside refs/heads, which Fetch does not
// bring but FetchRefs does; a prefix with no refs fetches nothing and is
// no error; LookupCommit tells an absent ref from a present one.
func TestPushRefAndFetchRefs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	remote, url, a, b := twoCopies(t, f)
	base, _, err := a.LookupCommit(ctx, RemoteRef("HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckoutAt(ctx, "factory/x", base); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a.Root, "a.txt", "a\n")
	c, err := a.CommitPaths(ctx, []string{"a.txt"}, "add a")
	if err != nil {
		t.Fatal(err)
	}
	const ref = "refs/factory/h/WO-01/start"
	if err := b.FetchRefs(ctx, url, "refs/factory/h/"); err != nil {
		t.Fatalf("fetch of no refs: %v", err)
	}
	if got, ok, err := b.LookupCommit(ctx, ref); err != nil || ok {
		t.Fatalf("%s before the push: %s %v %v", ref, got, ok, err)
	}
	if err := a.PushRef(ctx, url, ref, c); err != nil {
		t.Fatal(err)
	}
	if err := b.Fetch(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.LookupCommit(ctx, c); ok {
		t.Error("Fetch brought a commit that is on no branch")
	}
	if err := b.FetchRefs(ctx, url, "refs/factory/h/"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.LookupCommit(ctx, ref); err != nil || !ok || got != c {
		t.Fatalf("%s after FetchRefs: %s %v %v, want %s", ref, got, ok, err, c)
	}
	if branches := git(t, remote, "for-each-ref", "--format=%(refname)", "refs/heads"); branches != git(t, f.root, "for-each-ref", "--format=%(refname)", "refs/heads") {
		t.Errorf("PushRef changed the remote's branches:\n%s", branches)
	}
}

// twoCopies makes a bare remote of f's repository and two cached copies
// of it, fetched: the remote's path and URL, and the copies.
func twoCopies(t *testing.T, f fixture) (remote, url string, a, b *Repo) {
	t.Helper()
	ctx := context.Background()
	remote = filepath.Join(t.TempDir(), "remote.git")
	git(t, f.root, "clone", "-q", "--bare", f.root, remote)
	url = "file://" + remote
	copies := make([]*Repo, 2)
	for i := range copies {
		r, err := OpenCache(ctx, filepath.Join(t.TempDir(), "copy"))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Fetch(ctx, url); err != nil {
			t.Fatal(err)
		}
		copies[i] = r
	}
	return remote, url, copies[0], copies[1]
}
