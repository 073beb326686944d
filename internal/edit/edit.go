// Package edit applies exact search/replace edits to a file's content, all
// or nothing, and explains every refusal in terms a model can act on.
//
// It is pure: no I/O, standard library only. Line numbers are 1-based
// everywhere.
package edit

import (
	"slices"
	"strings"
)

// Replace is one exact search/replace edit of a file.
type Replace struct {
	Old, New string
}

// Span is where an applied edit replaced text: byte offsets in the base
// ([Start, End) of the matched old text), its 1-based inclusive line range
// in the base ([StartLine, EndLine]: the lines holding its first and last
// byte), and the line range the new text occupies in the new content. When
// the new text is empty (a deletion) the new range is empty:
// NewEndLine == NewStartLine-1, NewStartLine being the line where the
// deletion happened.
type Span struct {
	Index        int `json:"index"`
	Start        int `json:"start"`
	End          int `json:"end"`
	StartLine    int `json:"start_line"`
	EndLine      int `json:"end_line"`
	NewStartLine int `json:"new_start_line,omitempty"`
	NewEndLine   int `json:"new_end_line,omitempty"`
}

// Apply matches every Old byte for byte against base (no trimming or
// normalisation) and requires each to occur exactly once (overlapping
// occurrences count), the matched spans not to overlap (spans that only
// touch are fine), Old to be non-empty and Old != New. It then splices every
// New in and returns the full new content and the spans in edit order.
//
// On any refusal it returns "" and nil spans and an *Error listing every
// refused edit, in edit order, one Problem each.
func Apply(base string, reps []Replace) (string, []Span, error) {
	var (
		probs []Problem
		spans = make([]Span, 0, len(reps))
		f     = finder{base: base}
		d     *diagnoser
	)
	for i, r := range reps {
		switch {
		case r.Old == "":
			probs = append(probs, Problem{Index: i, Kind: Empty})
			continue
		case r.Old == r.New:
			probs = append(probs, Problem{Index: i, Kind: NoOp})
			continue
		}
		offs, n := f.find(r.Old, 2, false)
		if n == 1 {
			spans = append(spans, Span{Index: i, Start: offs[0], End: offs[0] + len(r.Old)})
			continue
		}
		if d == nil {
			d = &diagnoser{base: base, f: &f}
		}
		p := Problem{Index: i, Kind: NotFound}
		if n > 1 {
			p.Kind = Ambiguous
			offs, p.Count = f.find(r.Old, maxLines, true)
			p.Lines = lineNumbers(base, offs)
		} else {
			d.notFound(&p, r.Old)
		}
		p.AlreadyApplied = d.alreadyApplied(r, p.Kind)
		probs = append(probs, p)
	}

	// Base line ranges, walking the matches in base order.
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return spans[a].Start - spans[b].Start })
	line, at := 1, 0
	for _, i := range order {
		s := &spans[i]
		line += strings.Count(base[at:s.Start], "\n")
		at = s.Start
		s.StartLine = line
		s.EndLine = line + strings.Count(base[s.Start:s.End-1], "\n")
	}

	probs = append(probs, overlaps(spans, order)...)
	if len(probs) > 0 {
		slices.SortStableFunc(probs, func(a, b Problem) int { return a.Index - b.Index })
		return "", nil, &Error{Problems: probs}
	}

	size := len(base)
	for _, s := range spans {
		size += len(reps[s.Index].New) - (s.End - s.Start)
	}
	var b strings.Builder
	b.Grow(size)
	prev, newLine := 0, 1
	for _, i := range order {
		s := &spans[i]
		seg, nw := base[prev:s.Start], reps[s.Index].New
		newLine += strings.Count(seg, "\n")
		s.NewStartLine = newLine
		s.NewEndLine = newLine - 1
		if nw != "" {
			s.NewEndLine = newLine + strings.Count(nw[:len(nw)-1], "\n")
		}
		newLine += strings.Count(nw, "\n")
		b.WriteString(seg)
		b.WriteString(nw)
		prev = s.End
	}
	b.WriteString(base[prev:])
	return b.String(), spans, nil
}

// overlaps reports every matched edit whose span shares a byte with another
// matched edit's span; OverlapWith is the smallest such other index. order
// lists spans by start.
func overlaps(spans []Span, order []int) []Problem {
	with := map[int]int{} // edit index -> smallest overlapping edit index
	note := func(a, b int) {
		if w, ok := with[a]; !ok || b < w {
			with[a] = b
		}
	}
	for x, i := range order {
		for _, j := range order[x+1:] {
			if spans[j].Start >= spans[i].End {
				break
			}
			note(spans[i].Index, spans[j].Index)
			note(spans[j].Index, spans[i].Index)
		}
	}
	var probs []Problem
	for _, s := range spans {
		if w, ok := with[s.Index]; ok {
			sp := s
			probs = append(probs, Problem{Index: s.Index, Kind: Overlap, Count: 1, Lines: []int{s.StartLine}, OverlapWith: w, Span: &sp})
		}
	}
	return probs
}

// lineNumbers returns the 1-based line of each offset; offs is ascending.
func lineNumbers(s string, offs []int) []int {
	lines := make([]int, len(offs))
	line, at := 1, 0
	for i, o := range offs {
		line += strings.Count(s[at:o], "\n")
		at = o
		lines[i] = line
	}
	return lines
}
