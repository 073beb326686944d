package sandbox_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// snapshot is every entry under dir: path, mode and content (a symlink's target).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			entry += " -> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			entry += " " + string(b)
		}
		out[path] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Commands see the caches copy-on-write: they read what is there and may write anything, and
// neither the cache on the host nor the next command sees what they wrote.
func TestCachesAreCopyOnWrite(t *testing.T) {
	f := newFixture(t)
	outer := filepath.Join(f.root, "cache")             // outside the work tree
	nested := filepath.Join(outer, "nested")            // seen through outer's view
	inTree := filepath.Join(f.repo, "cache")            // inside the writable work tree
	hidden := filepath.Join(f.home, ".ssh", "cache")    // inside a hidden path: not shown
	link := filepath.Join(f.root, "link")               // a symlink to outer: resolved
	missing := filepath.Join(f.root, "missing")         // skipped
	underTmp := filepath.Join(t.TempDir(), "tmp-cache") // under the host's /tmp, which commands do not see
	mustMkdir(t, filepath.Join(outer, "sub"))
	for _, dir := range []string{outer, nested, inTree, hidden, underTmp} {
		mustMkdir(t, dir)
		mustWrite(t, filepath.Join(dir, "entry"), "warm\n")
	}
	mustWrite(t, filepath.Join(outer, "secret"), "token\n") // hidden: stays hidden in the view
	if err := os.Symlink(outer, link); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(outer, "readonly"))
	mustWrite(t, filepath.Join(outer, "readonly", "f"), "sealed\n")
	if err := os.Chmod(filepath.Join(outer, "readonly"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(outer, "readonly"), 0o755) })
	p := prepareWith(t, f, sandbox.Request{Hide: []string{filepath.Join(f.home, ".ssh"), filepath.Join(outer, "secret")}, Caches: []sandbox.Cache{
		{Dir: link, Env: "OUTER"}, {Dir: nested, Env: "NESTED"}, {Dir: inTree, Env: "INTREE"},
		{Dir: hidden, Env: "HIDDEN"}, {Dir: missing, Env: "MISSING"}, {Dir: underTmp, Env: "UNDERTMP"},
		{Dir: f.repo, Env: "WORKTREE"},
	}, Env: []string{"GOTOOLCHAIN=local", "KEPT=default"}})
	if w := p.Warning(); strings.Contains(w, "views do not work here") {
		t.Skip(w)
	}
	before := map[string]map[string]string{}
	for _, dir := range []string{outer, inTree, hidden, underTmp} {
		before[dir] = snapshot(t, dir)
	}

	res, out := sh(t, p, f.repo, `set -e
for v in OUTER NESTED INTREE UNDERTMP; do eval d=\$$v; cat "$d/entry"; echo changed > "$d/entry"; echo new > "$d/new"; mkdir "$d/dir"; done
chmod 755 "$OUTER/readonly"; rm -r "$OUTER/readonly" "$OUTER/sub"; ln -s /etc "$OUTER/sub"
! cat "$OUTER/secret" 2>/dev/null
echo "HIDDEN=${HIDDEN-unset} MISSING=${MISSING-unset} WORKTREE=${WORKTREE-unset} GOTOOLCHAIN=$GOTOOLCHAIN KEPT=$KEPT"`)
	want := "warm\nwarm\nwarm\nwarm\nHIDDEN=unset MISSING=unset WORKTREE=unset GOTOOLCHAIN=local KEPT=default\n"
	if res.ExitCode != 0 || out != want {
		t.Fatalf("writing the caches: exit %d (%v), output %q; want 0, %q", res.ExitCode, res.Err, out, want)
	}
	for dir, snap := range before {
		if got := snapshot(t, dir); !maps.Equal(got, snap) {
			t.Errorf("%s changed on the host:\n%v\nwant\n%v", dir, got, snap)
		}
	}
	res, out = sh(t, p, f.repo, `for v in OUTER NESTED INTREE UNDERTMP; do eval d=\$$v; cat "$d/entry"; ls "$d/new" 2>/dev/null; done; cat "$OUTER/readonly/f"`)
	if want := "warm\nwarm\nwarm\nwarm\nsealed\n"; res.ExitCode != 0 || out != want {
		t.Errorf("the next command: exit %d, output %q; want 0, %q (the first one's writes gone)", res.ExitCode, out, want)
	}
	outerReal, err := filepath.EvalSymlinks(outer)
	if err != nil {
		t.Fatal(err)
	}
	wantCaches := []string{outerReal + " (OUTER, copy-on-write)", filepath.Join(outerReal, "nested") + " (NESTED, copy-on-write)",
		inTree + " (INTREE, copy-on-write)", underTmp + " (UNDERTMP, copy-on-write)"}
	if got := p.Summary().Caches; !slices.Equal(got, wantCaches) {
		t.Errorf("Summary().Caches = %q, want %q", got, wantCaches)
	}
	if d := p.Describe(); !strings.Contains(d, "; caches: "+outerReal+" (OUTER, copy-on-write)") {
		t.Errorf("Describe() = %q, want the caches", d)
	}
}

// A variable the command's environment sets wins over Request.Env's default; a default naming a
// hidden path is dropped.
func TestEnvDefaultsDoNotReplace(t *testing.T) {
	f := newFixture(t)
	hidden := filepath.Join(f.home, ".ssh", "id_x")
	p := prepareWith(t, f, sandbox.Request{Hide: []string{filepath.Join(f.home, ".ssh")},
		Env: []string{"GOTOOLCHAIN=local", "GOENV=" + hidden, "SHOWN=" + f.sibling}})
	// sh's environment: the test's, through proc.
	res, out := sh(t, p, f.repo, `echo "$GOTOOLCHAIN ${GOENV-unset} $SHOWN"`)
	want := "local unset " + f.sibling + "\n"
	if v, ok := os.LookupEnv("GOTOOLCHAIN"); ok {
		want = v + " unset " + f.sibling + "\n"
	}
	if res.ExitCode != 0 || out != want {
		t.Errorf("GOTOOLCHAIN: exit %d, output %q; want %q", res.ExitCode, out, want)
	}
	if _, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeAuto, WorkTree: f.repo, Env: []string{"NOVALUE"}}); err == nil ||
		!strings.Contains(err.Error(), `"NOVALUE": not NAME=value`) {
		t.Errorf("Prepare with a bad Env entry: %v, want not NAME=value", err)
	}
}
