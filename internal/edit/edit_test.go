package edit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestApply(t *testing.T) {
	const goFile = "package p\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 2\n}\n"
	for _, tc := range []struct {
		name  string
		base  string
		reps  []Replace
		want  string
		spans []Span
	}{{
		name:  "one line",
		base:  goFile,
		reps:  []Replace{{"\treturn 2\n", "\treturn 3\n"}},
		want:  strings.Replace(goFile, "return 2", "return 3", 1),
		spans: []Span{{Index: 0, Start: 54, End: 64, StartLine: 8, EndLine: 8, NewStartLine: 8, NewEndLine: 8}},
	}, {
		name: "edits given out of file order, spans in edit order",
		base: goFile,
		reps: []Replace{{"return 2", "return 20"}, {"func A() int {\n", "// A is one.\nfunc A() int {\n"}},
		want: "package p\n\n// A is one.\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 20\n}\n",
		spans: []Span{
			{Index: 0, Start: 55, End: 63, StartLine: 8, EndLine: 8, NewStartLine: 9, NewEndLine: 9},
			{Index: 1, Start: 11, End: 26, StartLine: 3, EndLine: 3, NewStartLine: 3, NewEndLine: 4},
		},
	}, {
		name: "touching spans are not overlapping",
		base: "abcdef",
		reps: []Replace{{"abc", "x"}, {"def", "y"}},
		want: "xy",
		spans: []Span{
			{Index: 0, Start: 0, End: 3, StartLine: 1, EndLine: 1, NewStartLine: 1, NewEndLine: 1},
			{Index: 1, Start: 3, End: 6, StartLine: 1, EndLine: 1, NewStartLine: 1, NewEndLine: 1},
		},
	}, {
		name:  "deletion of whole lines: an empty new range",
		base:  "a\nb\nc\nd\n",
		reps:  []Replace{{"b\nc\n", ""}},
		want:  "a\nd\n",
		spans: []Span{{Index: 0, Start: 2, End: 6, StartLine: 2, EndLine: 3, NewStartLine: 2, NewEndLine: 1}},
	}, {
		name:  "first and last bytes of the file, no final newline",
		base:  "first\nmiddle\nlast",
		reps:  []Replace{{"last", "LAST\nMORE"}, {"fi", "Fi"}},
		want:  "First\nmiddle\nLAST\nMORE",
		spans: []Span{{Index: 0, Start: 13, End: 17, StartLine: 3, EndLine: 3, NewStartLine: 3, NewEndLine: 4}, {Index: 1, Start: 0, End: 2, StartLine: 1, EndLine: 1, NewStartLine: 1, NewEndLine: 1}},
	}, {
		name:  "CRLF matched exactly",
		base:  "a\r\nb\r\nc\r\n",
		reps:  []Replace{{"b\r\n", "B\r\nB2\r\n"}},
		want:  "a\r\nB\r\nB2\r\nc\r\n",
		spans: []Span{{Index: 0, Start: 3, End: 6, StartLine: 2, EndLine: 2, NewStartLine: 2, NewEndLine: 3}},
	}, {
		name:  "multi-byte text",
		base:  "naïve “quoted” — ok\n",
		reps:  []Replace{{"“quoted”", `"quoted"`}},
		want:  "naïve \"quoted\" — ok\n",
		spans: []Span{{Index: 0, Start: 7, End: 19, StartLine: 1, EndLine: 1, NewStartLine: 1, NewEndLine: 1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, spans, err := Apply(tc.base, tc.reps)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("content\n got %q\nwant %q", got, tc.want)
			}
			if !reflect.DeepEqual(spans, tc.spans) {
				t.Errorf("spans\n got %+v\nwant %+v", spans, tc.spans)
			}
			checkAgainstRef(t, tc.base, tc.reps)
		})
	}
}

func TestApplyRefusals(t *testing.T) {
	base := "func f() {\n\tx := 1\n\tx := 1\n}\n\nfunc g() {\n\ty := 2\n}\n" // x twice
	many := strings.Repeat("}\n", 25)
	for _, tc := range []struct {
		name string
		base string
		reps []Replace
		want []Problem // Nearest and Differs not compared
	}{{
		name: "empty old",
		base: base,
		reps: []Replace{{"", "new"}},
		want: []Problem{{Index: 0, Kind: Empty}},
	}, {
		name: "old equals new",
		base: base,
		reps: []Replace{{"\ty := 2\n", "\ty := 2\n"}},
		want: []Problem{{Index: 0, Kind: NoOp}},
	}, {
		name: "not found",
		base: base,
		reps: []Replace{{"\tz := 3\n", "\tz := 4\n"}},
		want: []Problem{{Index: 0, Kind: NotFound}},
	}, {
		name: "not found, new already there",
		base: base,
		reps: []Replace{{"\tx := 1\n}\n\nfunc f() {", "\tx := 1\n}\n\nfunc g() {"}},
		want: []Problem{{Index: 0, Kind: NotFound, AlreadyApplied: true}},
	}, {
		name: "not found, a short new is there by chance",
		base: base,
		reps: []Replace{{"\ty := 1\n", "\ty := 2\n"}},
		want: []Problem{{Index: 0, Kind: NotFound}},
	}, {
		name: "two matches",
		base: base,
		reps: []Replace{{"\tx := 1\n", "\tx := 2\n"}},
		want: []Problem{{Index: 0, Kind: Ambiguous, Count: 2, Lines: []int{2, 3}}},
	}, {
		name: "ambiguous, new already there",
		base: base,
		reps: []Replace{{"\tx := 1\n", "}\n\nfunc g() {\n"}},
		want: []Problem{{Index: 0, Kind: Ambiguous, Count: 2, Lines: []int{2, 3}, AlreadyApplied: true}},
	}, {
		name: "ambiguous, new part of old is not 'already applied'",
		base: base,
		reps: []Replace{{"\tx := 1\n", "x := 1"}},
		want: []Problem{{Index: 0, Kind: Ambiguous, Count: 2, Lines: []int{2, 3}}},
	}, {
		name: "self-overlapping matches count",
		base: "}\n}\n}\n",
		reps: []Replace{{"}\n}\n", "}\n"}},
		want: []Problem{{Index: 0, Kind: Ambiguous, Count: 2, Lines: []int{1, 2}}},
	}, {
		name: "many matches: lines capped, count exact",
		base: many,
		reps: []Replace{{"}", "]"}},
		want: []Problem{{Index: 0, Kind: Ambiguous, Count: 25, Lines: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}},
	}, {
		name: "overlap",
		base: base,
		reps: []Replace{{"func g() {\n\ty", "func h() {\n\ty"}, {"\ty := 2\n}", "\ty := 3\n}"}},
		want: []Problem{
			{Index: 0, Kind: Overlap, Count: 1, Lines: []int{6}, OverlapWith: 1, Span: &Span{Index: 0, Start: 30, End: 43, StartLine: 6, EndLine: 7}},
			{Index: 1, Kind: Overlap, Count: 1, Lines: []int{7}, OverlapWith: 0, Span: &Span{Index: 1, Start: 41, End: 50, StartLine: 7, EndLine: 8}},
		},
	}, {
		name: "overlap by containment, three edits, smallest other index",
		base: "abcdefgh",
		reps: []Replace{{"cd", "CD"}, {"bcdefg", "x"}, {"fg", "FG"}, {"h", "H"}},
		want: []Problem{
			{Index: 0, Kind: Overlap, Count: 1, Lines: []int{1}, OverlapWith: 1, Span: &Span{Index: 0, Start: 2, End: 4, StartLine: 1, EndLine: 1}},
			{Index: 1, Kind: Overlap, Count: 1, Lines: []int{1}, OverlapWith: 0, Span: &Span{Index: 1, Start: 1, End: 7, StartLine: 1, EndLine: 1}},
			{Index: 2, Kind: Overlap, Count: 1, Lines: []int{1}, OverlapWith: 1, Span: &Span{Index: 2, Start: 5, End: 7, StartLine: 1, EndLine: 1}},
		},
	}, {
		name: "every refused edit is listed, in edit order; valid ones are not",
		base: base,
		reps: []Replace{{"\ty := 2\n", "\ty := 3\n"}, {"", "x"}, {"\tx := 1\n", "\tx := 9\n"}, {"nope", "yes"}, {"g", "g"}},
		want: []Problem{
			{Index: 1, Kind: Empty},
			{Index: 2, Kind: Ambiguous, Count: 2, Lines: []int{2, 3}},
			{Index: 3, Kind: NotFound},
			{Index: 4, Kind: NoOp},
		},
	}, {
		name: "empty base",
		base: "",
		reps: []Replace{{"a", "b"}},
		want: []Problem{{Index: 0, Kind: NotFound}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, spans, err := Apply(tc.base, tc.reps)
			if got != "" || spans != nil {
				t.Errorf("refused, yet content %q spans %+v", got, spans)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			probs := append([]Problem(nil), e.Problems...)
			for i := range probs {
				probs[i].Nearest, probs[i].Differs = nil, ""
			}
			if !reflect.DeepEqual(probs, tc.want) {
				t.Errorf("problems\n got %s\nwant %s", dump(probs), dump(tc.want))
			}
			checkAgainstRef(t, tc.base, tc.reps)
		})
	}
}

func TestApplyDiffers(t *testing.T) {
	lf := "package p\n\nfunc f() {\n\tif ok {\n\t\treturn \"it's\"\n\t}\n}\n"
	for _, tc := range []struct {
		name, base, old string
		differs         string
		line            int // Nearest.StartLine
	}{
		{"CRLF file, LF old", strings.ReplaceAll(lf, "\n", "\r\n"), "\tif ok {\n\t\treturn \"it's\"\n", DiffLineEndings, 4},
		{"LF file, CRLF old", lf, "\tif ok {\r\n\t\treturn \"it's\"\r\n", DiffLineEndings, 4},
		{"trailing spaces in old", lf, "\tif ok { \n\t\treturn \"it's\"\t\n", DiffTrailing, 4},
		{"trailing spaces in the file", strings.Replace(lf, "if ok {", "if ok {  ", 1), "\tif ok {\n\t\treturn", DiffTrailing, 4},
		{"leading blank lines", lf, "\n\n\t\treturn \"it's\"\n\t}\n", DiffBlankLines, 5},
		{"trailing line end at the end of the file", strings.TrimSuffix(lf, "\n"), "\t}\n}\n", DiffBlankLines, 6},
		{"spaces for tabs", lf, "    if ok {\n        return \"it's\"\n", DiffIndentTabs, 4},
		{"indentation depth", lf, "\t\tif ok {\n\t\t\treturn \"it's\"\n", DiffIndentDepth, 4},
		{"curly quote", lf, "return \"it\u2019s\"", DiffUnicode, 5},
		{"curly quote in the file", strings.Replace(lf, "it's", "it\u2019s", 1), "return \"it's\"", DiffUnicode, 5},
		{"em dash", "x := a \u2014 b\ny := 1\n", "x := a - b\n", DiffUnicode, 1},
		{"no normalisation helps", lf, "\tif !ok {\n\t\treturn \"it's\"\n", "", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Apply(tc.base, []Replace{{tc.old, "\tchanged\n"}})
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].Kind != NotFound {
				t.Fatalf("err = %v, want one NotFound", err)
			}
			p := e.Problems[0]
			if p.Differs != tc.differs {
				t.Errorf("Differs = %q, want %q", p.Differs, tc.differs)
			}
			if p.Nearest == nil || p.Nearest.StartLine != tc.line {
				t.Errorf("Nearest = %+v, want start line %d", p.Nearest, tc.line)
			}
			if tc.differs != "" && !strings.Contains(e.Brief("p.go"), "only after normalising "+tc.differs) {
				t.Errorf("brief does not name the difference:\n%s", e.Brief("p.go"))
			}
		})
	}
}

// genCode returns about size bytes of Go-like source: unique function
// names and numbers, and many repeated lines, as in real code.
func genCode(rng *rand.Rand, size int) string {
	words := []string{"request", "handler", "server", "client", "config", "value", "buffer", "reader", "writer", "state", "index", "count", "name", "path", "error", "result", "item", "entry", "cache", "token"}
	w := func() string { return words[rng.IntN(len(words))] }
	title := func() string { s := w(); return strings.ToUpper(s[:1]) + s[1:] }
	var b strings.Builder
	b.WriteString("package generated\n\nimport (\n\t\"errors\"\n\t\"fmt\"\n)\n")
	for n := 0; b.Len() < size; n++ {
		fmt.Fprintf(&b, "\n// %s%s%d handles the %s of a %s.\n", title(), title(), n, w(), w())
		fmt.Fprintf(&b, "func (s *%s) %s%s%d(%s %s, %s int) (%s, error) {\n", title(), title(), title(), n, w(), title(), w(), title())
		for range 3 + rng.IntN(12) {
			switch rng.IntN(8) {
			case 0:
				fmt.Fprintf(&b, "\tif err := s.%s(%s); err != nil {\n\t\treturn nil, fmt.Errorf(\"%s %%d: %%w\", %d, err)\n\t}\n", w(), w(), w(), rng.IntN(1000))
			case 1:
				fmt.Fprintf(&b, "\tfor i := range %s.%s {\n\t\t%s += i * %d\n\t}\n", w(), title(), w(), rng.IntN(100))
			case 2:
				b.WriteString("\tif err != nil {\n\t\treturn nil, err\n\t}\n")
			case 3:
				fmt.Fprintf(&b, "\t// %s the %s before the %s.\n", title(), w(), w())
			case 4:
				b.WriteString("\n")
			default:
				fmt.Fprintf(&b, "\t%s%d := s.%s.%s(%s, %d)\n", w(), rng.IntN(50), w(), title(), w(), rng.IntN(10000))
			}
		}
		fmt.Fprintf(&b, "\treturn &%s{%s: %s}, nil\n}\n", title(), title(), w())
	}
	return b.String()
}

func TestNearest(t *testing.T) {
	base := genCode(rand.New(rand.NewPCG(1, 1)), 20000)
	lines := splitLines(base)
	// A unique 6-line region, found by line.
	var at int
	for at = len(lines) / 2; ; at++ {
		if strings.Count(base, strings.Join(lines[at:at+6], "\n")) == 1 && strings.TrimSpace(lines[at]) != "" && strings.Contains(lines[at+2], ":=") {
			break
		}
	}
	region := lines[at : at+6]
	changed := func(edit func(l []string)) string {
		l := append([]string(nil), region...)
		edit(l)
		return strings.Join(l, "\n") + "\n"
	}
	for _, tc := range []struct {
		name string
		old  string
		line int // 0: no candidate
	}{
		{"one line differs", changed(func(l []string) { l[2] = strings.Replace(l[2], ":=", "=", 1) }), at + 1},
		{"first and last lines differ", changed(func(l []string) { l[0] += " // x"; l[5] += " // y" }), at + 1},
		{"one partial line with a typo", strings.TrimSpace(strings.Replace(region[2], ":=", ":= &", 1)), at + 3},
		{"nothing like it", "zzzz qqqq ~~~~ ####\n%%%% @@@@\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Apply(base, []Replace{{tc.old, "x"}})
			var e *Error
			if !errors.As(err, &e) || e.Problems[0].Kind != NotFound {
				t.Fatalf("err = %v", err)
			}
			c := e.Problems[0].Nearest
			switch {
			case tc.line == 0 && c != nil:
				t.Errorf("Nearest = %+v, want none", c)
			case tc.line != 0 && (c == nil || c.StartLine != tc.line):
				t.Errorf("Nearest = %+v, want start line %d", c, tc.line)
			case c != nil:
				if c.Context[0].N > c.StartLine || c.Context[len(c.Context)-1].N < min(c.EndLine, c.StartLine+contextRegion-1) {
					t.Errorf("context %+v does not cover lines %d-%d", c.Context, c.StartLine, c.EndLine)
				}
				for _, l := range c.Context {
					if l.Text != strings.TrimSuffix(lines[l.N-1], "\r") {
						t.Errorf("context line %d = %q, file has %q", l.N, l.Text, lines[l.N-1])
					}
				}
			}
		})
	}
}

func TestBrief(t *testing.T) {
	base := "package p\n\nfunc f() {\n\tx := 1\n\tx := 1\n\ty := 2\n}\n"
	_, _, err := Apply(base, []Replace{
		{"\ty := 2\n", "\ty := 3\n"},
		{"\tx := 1\n", "\tx := 2\n"},
		{"", "z"},
		{"\ty := 2\n}", "\ty := 2\n}"},
		{"    y := 2\n", "\tx := 1\n\ty := 2\n"},
		{"func f() {\n\tx", "func g() {\n\tx"},
		{"func f", "func h"},
	})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatal(err)
	}
	got := e.Brief("p/p.go")
	for _, want := range []string{
		"p/p.go, edit 1: 2 matches, at lines 4, 5. Add surrounding lines",
		"p/p.go, edit 2: `old` is empty.",
		"p/p.go, edit 3: `old` equals `new`",
		"p/p.go, edit 4: 0 matches.",
		"It matches only after normalising indentation (tabs vs spaces)",
		"  Nearest candidate, line 6 (what matches after normalising):\n    4 | \tx := 1\n    5 | \tx := 1\n  > 6 | \ty := 2\n    7 | }\n",
		"may have been applied already",
		"p/p.go, edit 5: its match (lines 3-4) overlaps the match of edit 6 (line 3).",
		"p/p.go, edit 6: its match (line 3) overlaps the match of edit 5 (lines 3-4).",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("brief lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "No change was written; send the whole proposal again.\n") {
		t.Errorf("brief does not end with the footer:\n%s", got)
	}
	if strings.Contains(got, "edit 0") {
		t.Errorf("brief names the valid edit 0:\n%s", got)
	}
	msg := e.Error()
	if !strings.HasPrefix(msg, "edit: 6 edits refused; edit 1: 2 matches, at lines 4, 5; edit 2: old is empty") {
		t.Errorf("Error() = %q", msg)
	}
}

func TestBriefBounded(t *testing.T) {
	base := genCode(rand.New(rand.NewPCG(2, 2)), 50000)
	lines := splitLines(base)
	var reps []Replace
	for i := 10; i < len(lines) && len(reps) < 200; i += 7 {
		if strings.Contains(lines[i], ":=") {
			reps = append(reps, Replace{strings.Join(lines[i-1:i+2], "\n") + " // changed\n", "x"})
		}
	}
	for _, n := range []int{3, 12, len(reps)} {
		_, _, err := Apply(base, reps[:n])
		var e *Error
		if !errors.As(err, &e) || len(e.Problems) != n {
			t.Fatalf("%d edits: err = %v", n, err)
		}
		got := e.Brief("gen/generated.go")
		if len(got) > BriefLimit || !strings.HasSuffix(got, briefFooter) {
			t.Fatalf("%d edits: brief of %d bytes:\n%s", n, len(got), got)
		}
		heads := strings.Count(got, "gen/generated.go, edit ")
		full := strings.Count(got, "Nearest candidate, ")
		short := strings.Count(got, "Nearest candidate: ")
		switch n {
		case 3: // all fits
			if heads != 3 || full != 3 {
				t.Errorf("%d edits: %d heads, %d candidates with context:\n%s", n, heads, full, got)
			}
		case 12: // every edit, some candidates cut to a line
			if heads != 12 || short == 0 {
				t.Errorf("%d edits: %d heads, %d full and %d short candidates:\n%s", n, heads, full, short, got)
			}
		default: // edits left out, and said so
			if heads == n || !strings.Contains(got, fmt.Sprintf("(%d more refused edits not shown.)", n-heads)) {
				t.Errorf("%d edits: %d heads:\n%s", n, heads, got)
			}
		}
	}
}

// TestApplyPathological checks inputs that make naive searches quadratic
// finish in linear time.
func TestApplyPathological(t *testing.T) {
	const n = 1 << 20
	for _, tc := range []struct {
		name string
		base string
		reps []Replace
		kind Kind
	}{
		{"long periodic old, many matches", strings.Repeat("a", n), []Replace{{strings.Repeat("a", 4096), "b"}}, Ambiguous},
		{"long near-miss old", strings.Repeat(strings.Repeat("a", 999)+"b", n/1000), []Replace{{strings.Repeat("a", 1000), "b"}}, NotFound},
		{"one line of a megabyte", strings.Repeat("ab", n/2), []Replace{{"abx", "y"}}, NotFound},
		{"many lines, short old", strings.Repeat("}\n", n/2), []Replace{{"}\n}", "]"}}, Ambiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := Apply(tc.base, tc.reps)
			var e *Error
			if !errors.As(err, &e) || e.Problems[0].Kind != tc.kind {
				t.Fatalf("err = %v, want %s", err, tc.kind)
			}
			e.Brief("x")
			t.Logf("%v", time.Since(start))
		})
	}
}
