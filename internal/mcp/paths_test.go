package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveRoots(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "proj"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(root, "escape")))      // points out
	must(os.Symlink(filepath.Join(root, "proj"), base+"/inlink")) // points in from outside
	// The root itself given through a symlink.
	must(os.Symlink(root, filepath.Join(base, "rootlink")))
	rs, err := resolveRoots([]string{filepath.Join(base, "rootlink")})
	if err != nil || len(rs) != 1 || rs[0] != root {
		t.Fatalf("resolveRoots = %v, %v", rs, err)
	}
	for _, tc := range []struct {
		path, want string // want "" means refused
	}{
		{filepath.Join(root, "proj"), filepath.Join(root, "proj")},
		{root, root},
		{"proj/new/dir", filepath.Join(root, "proj/new/dir")}, // relative: from the first root; need not exist
		{filepath.Join(root, "escape"), ""},
		{filepath.Join(root, "escape/new/repo"), ""}, // not existing below an escaping link
		{filepath.Join(root, "proj/../../outside"), ""},
		{filepath.Join(root, "proj/../escape/x"), ""},
		{base + "/inlink/sub", filepath.Join(root, "proj/sub")}, // a link from outside into a root is fine
		{outside, ""},
		{"/", ""},
		{base + "/root2", ""}, // a sibling sharing the root's name as a prefix
		{"../outside", ""},
	} {
		got, err := rs.resolve("repo", tc.path)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("resolve(%q) = %q, want refused", tc.path, got)
		case tc.want == "" && !strings.Contains(err.Error(), RootRule):
			t.Errorf("resolve(%q): %v, want the rule named", tc.path, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	if _, err := rs.resolve("spec", " "); err == nil || !strings.Contains(err.Error(), "spec is empty") {
		t.Errorf("empty path: %v", err)
	}
	if _, err := resolveRoots(nil); err == nil {
		t.Error("no roots accepted")
	}
	if _, err := resolveRoots([]string{filepath.Join(base, "missing")}); err == nil {
		t.Error("missing root accepted")
	}
}
