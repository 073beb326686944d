package workorder

import (
	"strings"
	"testing"
)

func TestNormalizePathAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain file", "a.py", "a.py"},
		{"nested file", "src/pkg/mod.py", "src/pkg/mod.py"},
		{"leading dot slash", "./a.py", "a.py"},
		{"dot dot inside the repo", "src/x/../y.py", "src/y.py"},
		{"trailing slash", "a/b/", "a/b"},
		{"double slash", "a//b.py", "a/b.py"},
		{"inner dot", "a/./b.py", "a/b.py"},
		{"dotfile", ".gitignore", ".gitignore"},
		{"dir named like git but longer", ".github/workflows/ci.yml", ".github/workflows/ci.yml"},
		{"git without dot", "git/config", "git/config"},
		{"unicode names", "données/résumé.md", "données/résumé.md"},
		{"cjk and emoji", "文档/🚀.txt", "文档/🚀.txt"},
		{"colon not at index 1", "ab:c.txt", "ab:c.txt"},
		{"space in name", "my file.txt", "my file.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizePath(tc.in)
			if err != nil {
				t.Fatalf("NormalizePath(%q): unexpected error %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("NormalizePath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestNormalizePathRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"empty", "", "empty"},
		{"absolute", "/etc/passwd", "absolute"},
		{"absolute root", "/", "absolute"},
		{"drive letter relative", "C:foo", "drive letter"},
		{"drive letter lower", "c:x", "drive letter"},
		{"drive letter with backslash", `c:\x`, "backslash"},
		{"backslash", `a\b.py`, "backslash"},
		{"windows traversal", `..\x`, "backslash"},
		{"dot dot", "..", "escapes"},
		{"dot dot file", "../x", "escapes"},
		{"dot dot after clean", "a/../../x", "escapes"},
		{"dot dot slash", "../", "escapes"},
		{"dot slash dot dot", "./../x", "escapes"},
		{"star glob", "*.py", "glob"},
		{"question glob", "a?.py", "glob"},
		{"bracket glob", "[ab].py", "glob"},
		{"git config", ".git/config", ".git"},
		{"git dir itself", ".git", ".git"},
		{"git upper case", ".GIT/hooks/x", ".git"},
		{"git mixed case", ".Git/HEAD", ".git"},
		{"nested git", "sub/.git/x", ".git"},
		{"git reached by dot dot", "a/../.git/config", ".git"},
		{"git reached by dot slash", "./.git/config", ".git"},
		{"dot", ".", "repository root"},
		{"dot slash", "./", "repository root"},
		{"dir then dot dot", "a/..", "repository root"},
		{"newline", "a\nb.py", "control character"},
		{"tab", "a\tb.py", "control character"},
		{"escape", "a\x1bb.py", "control character"},
		{"delete", "a\x7f.py", "control character"},
		{"c1 control", "a\u0085.py", "control character"},
		{"nul", "a\x00.py", "NUL"},
		// A drive letter that only appears after cleaning must be caught too,
		// otherwise the result is not a fixed point of NormalizePath.
		{"drive letter after dot slash", "./C:foo", "drive letter"},
		{"drive letter after dot dot", "a/../c:foo", "drive letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizePath(tc.in)
			if err == nil {
				t.Fatalf("NormalizePath(%q) = %q, want an error containing %q", tc.in, got, tc.wantErr)
			}
			if got != "" {
				t.Errorf("NormalizePath(%q) returned %q alongside an error", tc.in, got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NormalizePath(%q) error %q does not contain %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestForbiddenMatch(t *testing.T) {
	for _, tc := range []struct {
		name, entry, path string
		want              bool
	}{
		{"exact file", "scripts/verify.sh", "scripts/verify.sh", true},
		{"exact file other file", "scripts/verify.sh", "scripts/verify.py", false},
		{"exact file is not a prefix of a longer name", "scripts/verify.sh", "scripts/verify.sh.bak", false},
		{"dir prefix with slash", "secrets/", "secrets/a", true},
		{"dir prefix with slash nested", "secrets/", "secrets/x/y.key", true},
		{"dir prefix with slash names the dir", "secrets/", "secrets", true},
		{"dir prefix without slash", "secrets", "secrets/a", true},
		{"dir prefix without slash nested", "secrets", "secrets/x/y.key", true},
		{"prefix must end at a path boundary", "sec", "secrets/a", false},
		{"prefix must end at a path boundary, file", "sec", "sec.txt", false},
		{"dir prefix does not match sibling", "secrets/", "secretsx/a", false},
		{"name without inner slash matches at any depth, as in .gitignore", "secrets/", "app/secrets/a", true},
		{"anchored dir does not match deeper", "/secrets/", "app/secrets/a", false},
		{"anchored by inner slash", "app/secrets", "x/app/secrets/a", false},
		{"double star any depth", "**/*.lock", "x.lock", true},
		{"double star deep", "**/*.lock", "a/b/x.lock", true},
		{"dir double star", "secrets/**", "secrets/a/key.txt", true},
		{"middle double star", "a/**/b.py", "a/x/y/b.py", true},
		{"middle double star zero dirs", "a/**/b.py", "a/b.py", true},
		{"single star stays in a segment but covers the dir", "secrets/*", "secrets/a/key.txt", true},
		{"leading slash anchors", "/scripts/verify.sh", "scripts/verify.sh", true},
		{"glob", "*.lock", "poetry.lock", true},
		{"glob no match", "*.lock", "poetry.toml", false},
		{"glob without slash matches at any depth", "*.lock", "sub/dir/x.lock", true},
		{"glob with slash is anchored", "a/*.lock", "b/a/x.lock", false},
		{"glob in dir", "src/*.gen.go", "src/a.gen.go", true},
		{"prose entry ignored", "do not touch the db", "do", false},
		{"prose entry ignored even when a word is a path", "do not touch the db", "db", false},
		{"prose with tab ignored", "db\tplease", "db", false},
		{"dot slash entry", "./x", "x", true},
		{"dot slash dir entry", "./secrets/", "secrets/k", true},
		{"dot slash glob entry", "./*.lock", "a.lock", true},
		{"surrounding spaces trimmed", "  secrets/  ", "secrets/k", true},
		{"empty entry", "", "a.py", false},
		{"slash only", "/", "a.py", false},
		{"unclean entry is cleaned", "a//b/../secrets", "a/secrets/k", true},
		{"case sensitive", "Secrets/", "secrets/k", false},
		{"bad glob matches nothing", "[", "[", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := forbiddenMatch(tc.entry, tc.path); got != tc.want {
				t.Fatalf("forbiddenMatch(%q, %q) = %v, want %v", tc.entry, tc.path, got, tc.want)
			}
		})
	}
}

func TestIsForbidden(t *testing.T) {
	w := &WorkOrder{Forbidden: []string{"do not touch the db", "secrets/", "*.lock", "./scripts/verify.sh"}}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"secrets/api.key", true},
		{"Cargo.lock", true},
		{"scripts/verify.sh", true},
		{"scripts/other.sh", false},
		{"db", false},
		{"src/main.py", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if got := w.IsForbidden(tc.path); got != tc.want {
				t.Fatalf("IsForbidden(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
	t.Run("empty list", func(t *testing.T) {
		if (&WorkOrder{}).IsForbidden("a.py") {
			t.Fatal("an empty forbidden list forbids a.py")
		}
	})
}

func TestIsAllowed(t *testing.T) {
	w := &WorkOrder{AllowedFiles: []string{"a.py", "src/b.py"}}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"a.py", true},
		{"src/b.py", true},
		{"src", false},
		{"b.py", false},
		{"A.py", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if got := w.IsAllowed(tc.path); got != tc.want {
				t.Fatalf("IsAllowed(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

func TestForbiddenPatternErrors(t *testing.T) {
	for _, entry := range []string{"[", "a/[b", "/", "./", "."} {
		wo := &WorkOrder{ID: "WO-01", Title: "t", Intent: "i", AllowedFiles: []string{"a.py"}, AcceptanceCommands: []string{"true"}, Forbidden: []string{entry}}
		if err := wo.Normalize(); err == nil || !strings.Contains(err.Error(), "forbidden[0]") {
			t.Errorf("forbidden %q: err = %v, want a forbidden[0] error", entry, err)
		}
	}
}
