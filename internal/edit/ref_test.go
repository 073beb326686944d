package edit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// refApply is the specification of Apply, written to be obviously right and
// deliberately slow: old is compared at every byte offset of the base,
// overlaps are checked pair by pair, line numbers are counted byte by byte.
// It leaves out the heuristics (Nearest, Differs).
func refApply(base string, reps []Replace) (string, []Span, []Problem) {
	occurrences := func(pat string) []int {
		var at []int
		for p := 0; p+len(pat) <= len(base); p++ {
			if base[p:p+len(pat)] == pat {
				at = append(at, p)
			}
		}
		return at
	}
	lineOf := func(s string, off int) int {
		n := 1
		for i := 0; i < off; i++ {
			if s[i] == '\n' {
				n++
			}
		}
		return n
	}
	applied := func(r Replace, k Kind) bool {
		return len(strings.TrimSpace(r.New)) >= 12 && (k != Ambiguous || !strings.Contains(r.Old, r.New)) && len(occurrences(r.New)) > 0
	}

	var probs []Problem
	var matched []Span
	for i, r := range reps {
		if r.Old == "" {
			probs = append(probs, Problem{Index: i, Kind: Empty})
			continue
		}
		if r.Old == r.New {
			probs = append(probs, Problem{Index: i, Kind: NoOp})
			continue
		}
		at := occurrences(r.Old)
		switch len(at) {
		case 0:
			probs = append(probs, Problem{Index: i, Kind: NotFound, AlreadyApplied: applied(r, NotFound)})
		case 1:
			matched = append(matched, Span{Index: i, Start: at[0], End: at[0] + len(r.Old),
				StartLine: lineOf(base, at[0]), EndLine: lineOf(base, at[0]+len(r.Old)-1)})
		default:
			p := Problem{Index: i, Kind: Ambiguous, Count: len(at), AlreadyApplied: applied(r, Ambiguous)}
			for _, o := range at[:min(len(at), maxLines)] {
				p.Lines = append(p.Lines, lineOf(base, o))
			}
			probs = append(probs, p)
		}
	}
	for _, a := range matched {
		with := -1
		for _, b := range matched {
			if b.Index != a.Index && a.Start < b.End && b.Start < a.End && (with < 0 || b.Index < with) {
				with = b.Index
			}
		}
		if with >= 0 {
			sp := a
			probs = append(probs, Problem{Index: a.Index, Kind: Overlap, Count: 1, Lines: []int{a.StartLine}, OverlapWith: with, Span: &sp})
		}
	}
	if len(probs) > 0 {
		slices.SortStableFunc(probs, func(a, b Problem) int { return a.Index - b.Index })
		return "", nil, probs
	}

	byStart := slices.Clone(matched)
	slices.SortFunc(byStart, func(a, b Span) int { return a.Start - b.Start })
	var out string
	newStart := map[int]int{}
	prev := 0
	for _, s := range byStart {
		out += base[prev:s.Start]
		newStart[s.Index] = len(out)
		out += reps[s.Index].New
		prev = s.End
	}
	out += base[prev:]
	for i := range matched {
		s := &matched[i]
		n := len(reps[s.Index].New)
		s.NewStartLine = lineOf(out, newStart[s.Index])
		s.NewEndLine = s.NewStartLine - 1
		if n > 0 {
			s.NewEndLine = lineOf(out, newStart[s.Index]+n-1)
		}
	}
	return out, matched, nil
}

// checkAgainstRef runs Apply and refApply and fails t where they disagree.
func checkAgainstRef(t *testing.T, base string, reps []Replace) (string, []Span, error) {
	t.Helper()
	got, spans, err := Apply(base, reps)
	want, wantSpans, wantProbs := refApply(base, reps)
	if len(wantProbs) == 0 {
		if err != nil {
			t.Fatalf("Apply(%q, %q): %v; the reference applies it", base, reps, err)
		}
		if got != want || (len(spans)+len(wantSpans) > 0 && !reflect.DeepEqual(spans, wantSpans)) {
			t.Fatalf("Apply(%q, %q)\n got %q %+v\nwant %q %+v", base, reps, got, spans, want, wantSpans)
		}
		return got, spans, err
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Apply(%q, %q): err %v, want an *Error with %+v", base, reps, err, wantProbs)
	}
	if got != "" || spans != nil {
		t.Fatalf("Apply(%q, %q) refused but returned content %q, spans %+v", base, reps, got, spans)
	}
	probs := slices.Clone(e.Problems)
	for i := range probs {
		probs[i].Nearest, probs[i].Differs = nil, ""
	}
	if !reflect.DeepEqual(probs, wantProbs) {
		t.Fatalf("Apply(%q, %q) problems\n got %s\nwant %s", base, reps, dump(probs), dump(wantProbs))
	}
	return got, spans, err
}

func dump(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%+v", p)
		if p.Span != nil {
			fmt.Fprintf(&b, " span %+v", *p.Span)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func randText(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// TestApplyDifferential compares Apply with refApply on random inputs over
// small alphabets, so that repeated, overlapping and self-overlapping
// matches are common.
func TestApplyDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	alphabets := []string{"ab\n", "abc\n", "a\n", "ab \t\n", "abcdefgh\n"}
	kinds := map[Kind]int{}
	applied := 0
	const runs = 20000
	for run := range runs {
		alpha := alphabets[run%len(alphabets)]
		base := randText(rng, alpha, rng.IntN(80))
		reps := make([]Replace, 1+rng.IntN(5))
		for i := range reps {
			r := &reps[i]
			r.New = randText(rng, alpha, rng.IntN(5))
			if len(base) > 20 && rng.IntN(4) == 0 { // long enough to count as already applied
				s := rng.IntN(len(base) - 15)
				r.New = base[s : s+12+rng.IntN(4)]
			}
			switch mode := rng.IntN(10); {
			case mode < 6 && base != "": // a piece of the base: unique or not
				s := rng.IntN(len(base))
				r.Old = base[s:min(len(base), s+1+rng.IntN(8))]
			case mode == 6:
				r.Old = r.New
			case mode == 7:
				r.Old = ""
			default:
				r.Old = randText(rng, alpha, 1+rng.IntN(4))
			}
		}
		_, _, err := checkAgainstRef(t, base, reps)
		var e *Error
		if errors.As(err, &e) {
			for _, p := range e.Problems {
				kinds[p.Kind]++
				if p.AlreadyApplied {
					kinds["already applied"]++
				}
			}
		} else {
			applied++
		}
	}
	for _, k := range []Kind{Empty, NoOp, NotFound, Ambiguous, Overlap, "already applied"} {
		if kinds[k] == 0 {
			t.Errorf("no %s refusal in %d runs", k, runs)
		}
	}
	if applied < runs/20 {
		t.Errorf("only %d of %d runs applied", applied, runs)
	}
	t.Logf("%d runs: %d applied, refusals %v", runs, applied, kinds)
}

// TestFindAgainstBruteForce covers the finder's dense-candidate fallback to
// KMP, which inputs small enough for the differential test never reach.
func TestFindAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	for run := range 400 {
		alpha := []string{"a", "ab", "aab", "abc\n"}[run%4]
		base := randText(rng, alpha, rng.IntN(3000))
		var pat string
		if base != "" && rng.IntN(3) > 0 {
			s := rng.IntN(len(base))
			pat = base[s:min(len(base), s+1+rng.IntN(200))]
		} else {
			pat = randText(rng, alpha, 1+rng.IntN(50))
		}
		var want []int
		for p := 0; p+len(pat) <= len(base); p++ {
			if base[p:p+len(pat)] == pat {
				want = append(want, p)
			}
		}
		for _, budget := range []int{0, 1, 1 + rng.IntN(5000)} {
			f := finder{base: base, budget: budget}
			offs, n := f.find(pat, 10, true)
			if n != len(want) || !slices.Equal(offs, want[:min(10, len(want))]) {
				t.Fatalf("budget %d: find(%q) in %q = %v, %d; want %v, %d", budget, pat, base, offs, n, want[:min(10, len(want))], len(want))
			}
			offs, n = f.find(pat, 2, false)
			if n != min(2, len(want)) || !slices.Equal(offs, want[:n]) {
				t.Fatalf("budget %d: find(%q, 2) in %q = %v, %d; want %v", budget, pat, base, offs, n, want[:min(2, len(want))])
			}
		}
	}
}

// FuzzApply checks the property behind "applied exactly or not at all": for
// a base and edits naming pieces of it, Apply equals the splice at the
// places named when every old text is unique, non-empty, differs from its
// new text and no two overlap, and otherwise refuses with no content; and it
// agrees with refApply on everything else.
//
// plan is read four bytes an edit: op, two bytes of offset, one of length or
// text.
func FuzzApply(f *testing.F) {
	f.Add("package main\n\nfunc main() {\n\tprintln(1)\n}\n", []byte{0, 0, 15, 10, 8, 0, 40, 3})
	f.Add("abababab", []byte{0, 0, 1, 2, 1, 0, 3, 2})
	f.Add("x\r\ny\r\nz\r\n", []byte{2, 0, 0, 2, 7, 'y', '\n', 'z'})
	f.Add("one\ntwo\nthree\n", []byte{5, 0, 0, 0, 6, 0, 4, 2, 3, 0, 8, 4})
	f.Add("", []byte{0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, base string, plan []byte) {
		base = base[:min(len(base), 4096)]
		plan = plan[:min(len(plan), 64)]
		var reps []Replace
		var at []int // where a piece of the base was taken from, or -1
		for i := 0; i+4 <= len(plan); i += 4 {
			op, off, c := plan[i], int(plan[i+1])<<8|int(plan[i+2]), plan[i+3]
			r, from := Replace{}, -1
			switch {
			case op%8 == 5:
				r.New = "inserted"
			case op%8 == 7:
				r.Old, r.New = string(plan[i+1:i+4]), string(plan[i+2:i+4])
			case base == "":
				r.Old, r.New = "x", "y"
			default:
				from = off % len(base)
				r.Old = base[from:min(len(base), from+1+int(c)%24)]
				switch op >> 3 % 4 {
				case 0:
					r.New = ""
				case 1:
					r.New = fmt.Sprintf("<%d>", i/4)
				case 2:
					r.New = r.Old + "!"
				default:
					r.New = strings.Repeat(string(rune('a'+c%26)), int(c)%5)
				}
				if op%8 == 6 {
					r.New = r.Old
				}
			}
			reps = append(reps, r)
			at = append(at, from)
		}

		got, spans, err := checkAgainstRef(t, base, reps)

		// The property, independently of refApply: a splice at the places named.
		valid := true
		type place struct{ i, start int }
		var places []place
		for i, r := range reps {
			n := strings.Count(base, r.Old) // non-overlapping count: 1 only if unique
			if r.Old == "" || r.Old == r.New || n != 1 || strings.Index(base[strings.Index(base, r.Old)+1:], r.Old) >= 0 {
				valid = false
				continue
			}
			s := strings.Index(base, r.Old)
			if at[i] >= 0 && s != at[i] {
				t.Fatalf("edit %d: unique match at %d, taken from %d", i, s, at[i])
			}
			places = append(places, place{i, s})
		}
		slices.SortFunc(places, func(a, b place) int { return a.start - b.start })
		for k := 1; k < len(places); k++ {
			if places[k].start < places[k-1].start+len(reps[places[k-1].i].Old) {
				valid = false
			}
		}
		if !valid {
			if err == nil || got != "" || spans != nil {
				t.Fatalf("Apply(%q, %q) = %q, %v, %v; want a refusal", base, reps, got, spans, err)
			}
			e := err.(*Error)
			if b := e.Brief("f.go"); len(b) > BriefLimit || !strings.HasSuffix(b, briefFooter) {
				t.Fatalf("brief of %d bytes:\n%s", len(b), b)
			}
			return
		}
		if err != nil {
			t.Fatalf("Apply(%q, %q): %v", base, reps, err)
		}
		var want strings.Builder
		prev := 0
		for _, p := range places {
			want.WriteString(base[prev:p.start])
			want.WriteString(reps[p.i].New)
			prev = p.start + len(reps[p.i].Old)
		}
		want.WriteString(base[prev:])
		if got != want.String() {
			t.Fatalf("Apply(%q, %q) = %q, want %q", base, reps, got, want.String())
		}
		for i, s := range spans {
			if s.Index != i || base[s.Start:s.End] != reps[i].Old {
				t.Fatalf("span %d = %+v, does not hold old %q", i, s, reps[i].Old)
			}
		}
	})
}
