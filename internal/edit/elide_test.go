package edit

import (
	"fmt"
	"strings"
	"testing"
)

// numbered returns n distinct lines made by line(i).
func numbered(n int, line func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(line(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// elide keeps base's first keep and last keep lines around mark.
func elide(base string, keep int, mark string) string {
	l := splitLines(base)
	return strings.Join(l[:keep], "\n") + "\n" + mark + "\n" + strings.Join(l[len(l)-keep:], "\n") + "\n"
}

func TestElided(t *testing.T) {
	goBase := "package p\n\n" + numbered(40, func(i int) string { return fmt.Sprintf("func F%d() int { return %d }", i, i) })
	pyBase := "import os\n\n" + numbered(40, func(i int) string { return fmt.Sprintf("def f%d():\n    return os.getpid() + %d\n", i, i) })
	jsBase := numbered(40, func(i int) string { return fmt.Sprintf("export function f%d(a) { return a + %d; }", i, i) })
	htmlBase := "<html><body>\n" + numbered(40, func(i int) string { return fmt.Sprintf("<p id=\"p%d\">Paragraph %d</p>", i, i) }) + "</body></html>\n"
	sqlBase := numbered(40, func(i int) string { return fmt.Sprintf("INSERT INTO t (id, name) VALUES (%d, 'n%d');", i, i) })
	shBase := "#!/bin/sh\nset -eu\n" + numbered(40, func(i int) string { return fmt.Sprintf("echo step %d && ./run.sh %d", i, i) })
	mdBase := "# Title\n\n" + numbered(40, func(i int) string { return fmt.Sprintf("Sentence number %d of the story.", i) })

	for _, tc := range []struct {
		name, path, base, content string
		line                      int // 0: not elided
	}{
		// Positives, one per comment syntax.
		{"go //", "p.go", goBase, elide(goBase, 3, "\t// ... existing code ..."), 4},
		{"go /* */", "p.go", goBase, elide(goBase, 3, "/* ... */ remaining functions"), 4},
		{"go // without dots", "p.go", goBase, elide(goBase, 3, "// rest of the file unchanged"), 4},
		{"python #", "m.py", pyBase, elide(pyBase, 5, "    # ... rest of the function unchanged"), 6},
		{"python # bare dots", "m.py", pyBase, elide(pyBase, 5, "# ..."), 6},
		{"js //", "a.js", jsBase, elide(jsBase, 2, "// ... rest of code"), 3},
		{"jsx {/* */}", "a.jsx", jsBase, elide(jsBase, 2, "{/* ... other components ... */}"), 3},
		{"html <!-- -->", "i.html", htmlBase, elide(htmlBase, 2, "  <!-- ... -->"), 3},
		{"markdown <!-- -->", "README.md", mdBase, elide(mdBase, 2, "<!-- ... rest unchanged -->"), 3},
		{"sql --", "q.sql", sqlBase, elide(sqlBase, 2, "-- ... remaining rows unchanged"), 3},
		{"lisp ;", "a.el", sqlBase, elide(sqlBase, 2, ";; ... same as before"), 3},
		{"shell #", "run.sh", shBase, elide(shBase, 3, "# ... unchanged"), 4},
		{"bare", "p.go", goBase, elide(goBase, 3, "... rest of code"), 4},
		{"bare, closing dots", "m.py", pyBase, elide(pyBase, 3, "...remaining methods unchanged..."), 4},
		{"unicode ellipsis", "p.go", goBase, elide(goBase, 3, "// … unchanged"), 4},
		{"CRLF", "p.go", strings.ReplaceAll(goBase, "\n", "\r\n"), strings.ReplaceAll(elide(goBase, 3, "// ... existing code ..."), "\n", "\r\n"), 4},

		// Negatives.
		{"python Ellipsis, new code", "m.py", pyBase, "from typing import Protocol\n\nclass P(Protocol):\n    def f(self) -> int: ...\n    def g(self) -> str:\n        ...\n\nx = y[..., 0]\n", 0},
		{"js spread and rest, new code", "a.js", jsBase, "const {a, ...rest} = obj;\nconst merged = [\n  ...rest,\n  ...others\n];\nf(...args);\n", 0},
		{"go variadic, new code", "p.go", goBase, "package p\n\nfunc f(xs ...int) { g(xs...) }\n", 0},
		{"small file", "p.go", "package p\n\nfunc A() {}\nfunc B() {}\n", "package p\n\n// ... existing code ...\nfunc C() {}\n", 0},
		{"rewrite keeping most lines", "p.go", goBase, strings.Replace(goBase, "func F7() int { return 7 }", "// ... existing code ...\nfunc F7() int { return 70 }", 1), 0},
		{"the base has the elision line already", "p.go", goBase + "// ...\n", elide(goBase, 3, "// ..."), 0},
		{"markdown prose with dots", "notes.md", mdBase, "# Title\n\n... and the rest of the story is new.\n# ... unchanged\n", 0},
		{"new file", "p.go", "", "// ... existing code ...\n", 0},
		{"a comment with dots but no elision word", "p.go", goBase, elide(goBase, 3, "// Wait... then call f."), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, text, ok := Elided(tc.path, tc.base, tc.content)
			if ok != (tc.line != 0) || line != tc.line {
				t.Fatalf("Elided = %d %q %v, want line %d", line, text, ok, tc.line)
			}
			if ok {
				if want := strings.TrimSuffix(splitLines(tc.content)[line-1], "\r"); text != want {
					t.Errorf("text = %q, want %q", text, want)
				}
			}
		})
	}
}

func TestIsElision(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"// ...", true},
		{"# …", true},
		{"/* ... */", true},
		{"<!-- ... -->", true},
		{"// ... existing code ...", true},
		{"-- rest of the queries remain the same", true},
		{"... rest of code", true},
		{"...", false},
		{"...rest", false},
		{"...rest,", false},
		{"...rest, extra", false},
		{"[...rest, x]", false},
		{"return f(...args)", false},
		{"def f(self): ...", false},
		{"#include <stdio.h>", false},
		{"--i;", false},
		{"// See the docs for more.", false},
	} {
		if got := isElision(tc.line, false); got != tc.want {
			t.Errorf("isElision(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}
