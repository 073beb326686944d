package factory

import (
	"fmt"
	"slices"
	"strings"
)

// partialContext is how many lines around a line that names one of the
// work order's terms a partial view shows, each side.
const partialContext = 15

// partialHead is how many of a file's first lines (package clause, imports)
// a partial view always shows.
const partialHead = 30

// lineRange is a 1-based inclusive range of lines.
type lineRange struct{ first, last int }

// partialView picks, for a text file larger than budget bytes, the lines the
// work order needs: the file's head, then every line that names one of
// terms as a whole word, with partialContext lines around it, the earliest
// first, until budget is spent. Ranges are merged and in file order; the
// view is deterministic. lines are the file's lines without their "\n".
func partialView(lines []string, terms []string, budget int) []lineRange {
	n := len(lines)
	want := []lineRange{{1, min(partialHead, n)}}
	if len(terms) > 0 {
		for i, line := range lines {
			if namesTerm(line, terms) {
				want = append(want, lineRange{max(1, i+1-partialContext), min(n, i+1+partialContext)})
			}
		}
	}
	var shown []lineRange
	used := 0
	for _, w := range want {
		// Take w's lines that no range taken so far shows, within budget.
		for l := w.first; l <= w.last; l++ {
			if covered(shown, l) {
				continue
			}
			cost := len(lines[l-1]) + 1
			if used+cost > budget {
				return mergeRanges(shown)
			}
			used += cost
			shown = append(shown, lineRange{l, l})
		}
		shown = mergeRanges(shown)
	}
	return shown
}

func covered(rs []lineRange, l int) bool {
	for _, r := range rs {
		if l >= r.first && l <= r.last {
			return true
		}
	}
	return false
}

// mergeRanges sorts rs and joins ranges that overlap or touch.
func mergeRanges(rs []lineRange) []lineRange {
	slices.SortFunc(rs, func(a, b lineRange) int { return a.first - b.first })
	var out []lineRange
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.first <= out[k].last+1 {
			out[k].last = max(out[k].last, r.last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// namesTerm reports whether line has one of terms as a whole identifier.
func namesTerm(line string, terms []string) bool {
	for _, t := range terms {
		for i := 0; ; {
			j := strings.Index(line[i:], t)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(t)
			if (start == 0 || !identByte(line[start-1])) && (end == len(line) || !identByte(line[end])) {
				return true
			}
			i = end
		}
	}
	return false
}

func identByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// orderTerms are the identifiers a work order's text writes as code: in
// backquotes, called (name(), qualified (a.b), or spelt as no English word
// is (snake_case, camelCase): the names a partial view looks for.
func orderTerms(texts ...string) []string {
	set := map[string]bool{}
	for _, text := range texts {
		for i := 0; i < len(text); {
			if !identByte(text[i]) {
				i++
				continue
			}
			j := i
			for j < len(text) && identByte(text[j]) {
				j++
			}
			word := text[i:j]
			marked := i > 0 && (text[i-1] == '`' || text[i-1] == '.') ||
				j < len(text) && (text[j] == '(' || text[j] == '`' || text[j] == '.')
			codeLike := strings.Contains(word, "_") || strings.ContainsFunc(word[1:], func(r rune) bool { return r >= 'A' && r <= 'Z' })
			if len(word) >= 3 && (marked || codeLike) && !(word[0] >= '0' && word[0] <= '9') {
				set[word] = true
			}
			i = j
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for w := range set {
			if !yield(w) {
				return
			}
		}
	})
}

// renderPartial renders the (non-empty) ranges of lines, each in its own fence headed
// by its line numbers, after a note that says what the view is.
func renderPartial(lines []string, ranges []lineRange) (string, int) {
	var b strings.Builder
	names := make([]string, len(ranges))
	for i, r := range ranges {
		names[i] = fmt.Sprintf("%d-%d", r.first, r.last)
	}
	fmt.Fprintf(&b, "[partial view: the file is larger than the context budget; shown are lines %s of %d (1-based). "+
		"Change this file with edits, copying each \"old\" from the lines shown: edits are matched against the whole file, "+
		"whose sha256 is above.]\n", strings.Join(names, ", "), len(lines))
	used := 0
	for _, r := range ranges {
		text := strings.Join(lines[r.first-1:r.last], "\n")
		used += len(text) + 1
		fmt.Fprintf(&b, "lines %d-%d:\n%s\n", r.first, r.last, fence(text))
	}
	return b.String(), used
}
