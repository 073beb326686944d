package planner

import (
	_ "embed"
	"regexp"
	"strings"
	"testing"
)

// seedsPrompt is the planner template with Python's text filled in (as it
// was before languages, plus the later rules on dependencies): the prompt a
// Python repository (or an empty one) gets, byte for byte. Recorded
// transcripts hold it, so a change to it means re-recording them
// (examples/README.md, examples/eval/README.md).
//
//go:embed testdata/planner_python.golden.md
var seedsPrompt string

func TestRenderPythonIsTheSeedsPrompt(t *testing.T) {
	for _, files := range [][]string{nil, {"README.md"}, {"calc/core.py", "tests/test_core.py"}, {"pyproject.toml", "pkg/a.py"}, {"Makefile", "tool.py"}} {
		if got, want := Render(DefaultTemplate, "spec", files, ""), Render(seedsPrompt, "spec", files, ""); got != want {
			t.Errorf("files %q: the rendered prompt differs from the seeds' prompt", files)
		}
	}
}

func TestRenderSpeaksTheRepositoryLanguage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []string // substrings, in order
	}{
		{"go", []string{"go.mod", "calc/calc.go"}, []string{"`go vet ./...`", "`go test ./...`", "_test.go", `go test ./calc -run \"^TestAdd$\" -v`}},
		{"rust", []string{"Cargo.toml", "src/lib.rs"}, []string{"`cargo build --all-targets`", "`cargo test`", "#[cfg(test)]", "cargo test --test calc"}},
		{"npm with jest lockfile", []string{"package.json", "package-lock.json"}, []string{"`npm test`", "node:test", "node --test test/calc.test.js"}},
		{"typescript with pnpm", []string{"package.json", "pnpm-lock.yaml", "tsconfig.json"}, []string{"TypeScript (package.json, tsconfig.json)", "`npx --no tsc --noEmit`", "`pnpm test`"}},
		{"cmake", []string{"CMakeLists.txt", "src/a.c"}, []string{"`cmake -S . -B build`", "`cmake --build build`", "`ctest --test-dir build --output-on-failure`", "add_test"}},
		{"make", []string{"Makefile", "a.c"}, []string{"`make test`", "only a Makefile"}},
		{"maven", []string{"pom.xml"}, []string{"`mvn --offline --batch-mode --quiet test`", "JUnit"}},
		{"go and python", []string{"go.mod", "pyproject.toml"}, []string{"Go (go.mod), Python (pyproject.toml)", "`go test ./...`", "`python3 -m pytest -q`", "for the Python part look like `python3 -c"}},
		{"go with verify.sh", []string{"go.mod", "scripts/verify.sh"}, []string{"It has `scripts/verify.sh`", "`go test ./...`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(DefaultTemplate, "spec", tc.files, "")
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("prompt lacks %q (in order); prompt:\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			if left := regexp.MustCompile(`\{\{[A-Z_]+\}\}`).FindString(got); left != "" {
				t.Errorf("placeholder %s left in the prompt", left)
			}
			if !strings.Contains(tc.name, "python") && strings.Contains(strings.ToLower(got), "python") {
				t.Errorf("a %s prompt mentions Python:\n%s", tc.name, got)
			}
			if strings.Contains(tc.name, "verify.sh") == strings.Contains(got, "Do not create `scripts/verify.sh`") {
				t.Errorf("advice on creating scripts/verify.sh is wrong for %s", tc.name)
			}
		})
	}
}
