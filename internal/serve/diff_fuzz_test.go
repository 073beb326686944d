package serve

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParsePatch reads a patch (a commit's `git diff` or a proposal's
// difflib diff, as the web view does) and, from two texts, the diff of one
// into the other in both of the forms the view parses. Properties, on any
// patch: the same files twice (deterministic); at most one file per input
// line and, in all, at most one diff line per input line, none over
// maxDiffLines per file; every diff line is an input line, in input order,
// a hunk header as it is, any other its kind then its text; line numbers are
// never negative and count up by one per line of their side from the
// hunk's start. On the diff of before into after (difflib's output, as textDiff
// reads it, and the same hunks under git's headers): applying the lines to
// before, by their old line numbers, gives after, line for line (with
// carriage returns), and the git form names the file as written.
func FuzzParsePatch(f *testing.F) {
	f.Add("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+hi\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -2,2 +2,2 @@\n a\n--- b\n+++ c\n",
		"one\ntwo\nthree\n", "one\n2\nthree\nfour\n", "calc.py")
	f.Add("diff --git a/x b/y b/x b/y\nindex d00491f..0cfbf08 100644\n--- a/x b/y\t\n+++ b/x b/y\t\n@@ -1 +1 @@\n-1\n+2\n", "", "x\ny\n", "x b/y")
	f.Add("diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0000000..e69de29\nBinary files /dev/null and b/img.png differ\ndiff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n\\ No newline at end of file\n",
		"a\r\nb\r\n", "a\nb\r\n", "dir/new file.py")
	f.Add("--- a\n+++ b\n@@ -1 +9223372036854775807 @@\n+a\n+b\n-c\n", "x", "", "a")
	f.Add("--- a\n+++ b\n@@ -99999999999999999999,1 +-3 @@\n x\n@@\n-\n+\n \n", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10", "b/c")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, patch, before, after, name string) {
		if len(patch) > 1<<16 || len(before) > 1<<12 || len(after) > 1<<12 {
			return
		}
		files := parsePatch(patch)
		if again := parsePatch(patch); !reflect.DeepEqual(files, again) {
			t.Fatalf("parsePatch differs run to run:\n%+v\n%+v", files, again)
		}
		checkPatchBounds(t, patch, files)

		d := textDiff(name, before, after)
		if d.Note != "" && d.Note != "unchanged" {
			t.Fatalf("textDiff of %d and %d bytes: %s", len(before), len(after), d.Note)
		}
		if got := applyDiff(t, splitLines(before), d.Lines); !slices.Equal(got, trimNL(splitLines(after))) {
			t.Fatalf("the diff applied to before gives\n%q\nnot after\n%q\ndiff %+v", got, trimNL(splitLines(after)), d.Lines)
		}
		if !gitQuotesNot(name) || len(d.Lines) == 0 {
			return
		}
		// The same hunks as git writes them: headers first, a tab after a
		// name holding a space.
		tab := ""
		if strings.Contains(name, " ") {
			tab = "\t"
		}
		var b strings.Builder
		b.WriteString("diff --git a/" + name + " b/" + name + "\n")
		if before == "" {
			b.WriteString("new file mode 100644\n--- /dev/null\n")
		} else {
			b.WriteString("index 0000001..0000002 100644\n--- a/" + name + tab + "\n")
		}
		b.WriteString("+++ b/" + name + tab + "\n")
		for _, l := range d.Lines {
			if l.Kind != "@" {
				b.WriteString(l.Kind)
			}
			b.WriteString(l.Text + "\n")
		}
		git := parsePatch(b.String())
		if len(git) != 1 || git[0].Path != name || git[0].New != (before == "") || !reflect.DeepEqual(git[0].Lines, d.Lines) {
			t.Fatalf("git's form of the diff of %q reads as %+v, want the path, new=%v and lines %+v", name, git, before == "", d.Lines)
		}
	})
}

// checkPatchBounds checks what parsePatch read from patch against it:
// bounds, every line an input line in order, line numbers counting up.
func checkPatchBounds(t *testing.T, patch string, files []DiffFile) {
	t.Helper()
	in := strings.Split(patch, "\n")
	if len(files) > len(in) {
		t.Fatalf("%d files from %d lines", len(files), len(in))
	}
	next := 0 // the input line the next diff line may be at, or after
	total := 0
	for _, f := range files {
		if len(f.Lines) > maxDiffLines {
			t.Fatalf("%s: %d lines, over %d", f.Path, len(f.Lines), maxDiffLines)
		}
		total += len(f.Lines)
		var old, nw int // the last line number of each side in the hunk
		for _, l := range f.Lines {
			text := l.Kind + l.Text
			switch l.Kind {
			case "@":
				if !strings.HasPrefix(l.Text, "@@") || l.Old != 0 || l.New != 0 {
					t.Fatalf("hunk header %+v", l)
				}
				text = l.Text
				old, nw = hunkStart(l.Text)
				old, nw = old-1, nw-1
			case "+", "-", " ":
				if l.Old < 0 || l.New < 0 {
					t.Fatalf("negative line number in %+v", l)
				}
				if l.Kind != "+" {
					if l.Old != old+1 {
						t.Fatalf("old line %d after %d: %+v", l.Old, old, f.Lines)
					}
					old = l.Old
				} else if l.Old != 0 {
					t.Fatalf("an added line with an old number: %+v", l)
				}
				if l.Kind != "-" {
					if l.New != nw+1 {
						t.Fatalf("new line %d after %d: %+v", l.New, nw, f.Lines)
					}
					nw = l.New
				} else if l.New != 0 {
					t.Fatalf("a removed line with a new number: %+v", l)
				}
			default:
				t.Fatalf("kind %q in %+v", l.Kind, l)
			}
			for next < len(in) && in[next] != text {
				next++
			}
			if next == len(in) {
				t.Fatalf("diff line %q is not an input line (in order)", text)
			}
			next++
		}
	}
	if total > len(in) {
		t.Fatalf("%d diff lines from %d input lines", total, len(in))
	}
}

// applyDiff applies a one-file diff's lines to before by their old line
// numbers; before's lines keep their "\n", the result has none.
func applyDiff(t *testing.T, before []string, lines []DiffLine) []string {
	t.Helper()
	before = trimNL(before)
	var out []string
	i := 0 // the next line of before not yet copied
	for _, l := range lines {
		switch l.Kind {
		case "@":
			continue
		case "+":
			out = append(out, l.Text)
			continue
		}
		at := l.Old - 1
		if at < i || at >= len(before) {
			t.Fatalf("line %+v: old line %d out of order or of range (%d lines, at %d)", l, l.Old, len(before), i+1)
		}
		out = append(out, before[i:at]...)
		if before[at] != l.Text {
			t.Fatalf("line %+v: old line %d is %q", l, l.Old, before[at])
		}
		if l.Kind == " " {
			out = append(out, l.Text)
		}
		i = at + 1
	}
	return append(out, before[i:]...)
}

func trimNL(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSuffix(l, "\n")
	}
	return out
}

// gitQuotesNot reports whether git writes name as it is in a diff header
// (no quoting): not empty, printable ASCII without '"' or '\', and no
// "./.." segments or leading slash.
func gitQuotesNot(name string) bool {
	if name == "" || !safeRel(name) {
		return false
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

// TestParsePatchLongLine: a line over maxPatchLine cuts the diff there,
// with a note, instead of ending it silently.
func TestParsePatchLongLine(t *testing.T) {
	patch := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+" + strings.Repeat("b", maxPatchLine+1) + "\n+c\n"
	files := parsePatch(patch)
	if len(files) != 1 || files[0].Path != "x" || len(files[0].Lines) != 2 || !strings.Contains(files[0].Note, "diff cut at a line over 16 MiB") {
		t.Fatalf("got %d files: %+v", len(files), files)
	}
	if files := parsePatch(strings.Repeat("x", maxPatchLine+1)); len(files) != 1 || files[0].Note == "" {
		t.Fatalf("a patch of one long line: %+v", files)
	}
}
