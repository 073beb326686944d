package edit

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is why an edit was refused.
type Kind string

const (
	Empty     Kind = "empty"     // Old is empty
	NoOp      Kind = "no_op"     // Old == New
	NotFound  Kind = "not_found" // Old occurs nowhere in the base
	Ambiguous Kind = "ambiguous" // Old occurs more than once
	Overlap   Kind = "overlap"   // Old's only match shares bytes with another edit's match
)

// The differences Problem.Differs names: Old matches the base only after
// this normalisation. They are reported, never applied.
const (
	DiffLineEndings = "line endings"                 // CRLF vs LF
	DiffTrailing    = "trailing whitespace"          // spaces or tabs before a line end
	DiffBlankLines  = "leading/trailing blank lines" // Old starts or ends with blank lines (or a line end) the base lacks there
	DiffIndentTabs  = "indentation (tabs vs spaces)" // leading whitespace, one side using tabs where the other does not
	DiffIndentDepth = "indentation (depth)"          // leading whitespace of the same kind, in other amounts
	DiffUnicode     = "Unicode (e.g. quotes/dashes)" // typographic quotes, dashes, ellipses, unusual spaces
)

// maxLines caps Problem.Lines.
const maxLines = 10

// minApplied is the shortest trimmed New whose presence in the base is
// reported as AlreadyApplied.
const minApplied = 12

// Problem is one refused edit.
type Problem struct {
	Index int  `json:"index"` // the edit's index in the list given to Apply
	Kind  Kind `json:"kind"`
	// Lines is the 1-based start line of each match, in file order, at most
	// maxLines of them (Ambiguous; for Overlap the one match).
	Lines []int `json:"lines,omitempty"`
	Count int   `json:"count"` // number of matches (not counted for Empty and NoOp)
	// OverlapWith is, for Overlap, the smallest index of another edit whose
	// match shares bytes with this one's.
	OverlapWith int `json:"overlap_with"`
	// Span is, for Overlap, where this edit's old text matched (the New*
	// fields are zero).
	Span *Span `json:"span,omitempty"`
	// Nearest is, for NotFound, the region of the base most like Old.
	Nearest *Candidate `json:"nearest,omitempty"`
	// Differs is, for NotFound, the Diff* normalisation after which Old
	// would match.
	Differs string `json:"differs,omitempty"`
	// AlreadyApplied is set for NotFound and Ambiguous when New already
	// occurs in the base and is long enough (minApplied bytes besides
	// surrounding white space) for that to be no coincidence.
	AlreadyApplied bool `json:"already_applied,omitempty"`
}

// Candidate is a region of the base similar to a not-found Old.
type Candidate struct {
	StartLine  int            `json:"start_line"` // 1-based, inclusive
	EndLine    int            `json:"end_line"`
	Similarity float64        `json:"similarity"` // 0 to 1, line by line
	Context    []NumberedLine `json:"context"`    // the region (its first lines) and a line or two around it
}

// NumberedLine is one line of the base with its 1-based number.
type NumberedLine struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

// Error is Apply's refusal: every refused edit, in edit order.
type Error struct {
	Problems []Problem `json:"problems"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "edit: %d %s refused", len(e.Problems), plural(len(e.Problems), "edit", "edits"))
	for i, p := range e.Problems {
		if i == maxLines {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-i)
			break
		}
		fmt.Fprintf(&b, "; edit %d: %s", p.Index, p.summary())
	}
	return b.String()
}

// summary is the one-line reason, without advice.
func (p Problem) summary() string {
	switch p.Kind {
	case Empty:
		return "old is empty"
	case NoOp:
		return "old equals new"
	case NotFound:
		s := "0 matches"
		if p.Differs != "" {
			s += " (matches after normalising " + p.Differs + ")"
		}
		return s
	case Ambiguous:
		return fmt.Sprintf("%d matches, at %s", p.Count, lineList(p.Lines, p.Count))
	case Overlap:
		return fmt.Sprintf("overlaps edit %d", p.OverlapWith)
	}
	return string(p.Kind)
}

// BriefLimit caps the bytes of Error.Brief.
const BriefLimit = 4000

// The end of every brief.
const briefFooter = "No change was written; send the whole proposal again.\n"

// Brief renders the problems for the model: per refused edit the path, the
// index and what to do, the nearest candidate with numbered lines, the
// normalisation difference, whether the edit may have been applied already;
// then that nothing was written. It stays within BriefLimit bytes, dropping
// candidates' context first, then whole problems (saying how many).
func (e *Error) Brief(path string) string { return e.BriefWithin(path, BriefLimit) }

// BriefWithin is Brief within limit bytes (at least the footer's).
func (e *Error) BriefWithin(path string, limit int) string {
	heads := make([]string, len(e.Problems))
	full := make([]string, len(e.Problems))  // candidate with context
	short := make([]string, len(e.Problems)) // candidate, one line
	for i, p := range e.Problems {
		heads[i] = p.head(path, e)
		if c := p.Nearest; c != nil && len(c.Context) > 0 {
			how := fmt.Sprintf("%d%% similar", min(99, percent(c.Similarity)))
			if p.Differs != "" {
				how = "what matches after normalising"
			}
			short[i] = fmt.Sprintf("  Nearest candidate: %s (%s).\n", lineRange(c.StartLine, c.EndLine), how)
			var b strings.Builder
			fmt.Fprintf(&b, "  Nearest candidate, %s (%s):\n", lineRange(c.StartLine, c.EndLine), how)
			width := len(strconv.Itoa(c.Context[len(c.Context)-1].N))
			for _, l := range c.Context {
				mark := " "
				if l.N >= c.StartLine && l.N <= c.EndLine {
					mark = ">"
				}
				fmt.Fprintf(&b, "  %s %*d | %s\n", mark, width, l.N, l.Text)
			}
			if last := c.Context[len(c.Context)-1].N; last < c.EndLine {
				fmt.Fprintf(&b, "    (%d more lines of the candidate not shown)\n", c.EndLine-last)
			}
			full[i] = b.String()
		}
	}

	budget := limit - len(briefFooter)
	shown := 0
	for shown < len(heads) {
		need := len(heads[shown])
		if shown+1 < len(heads) {
			need += len(moreLine(len(heads))) // room to say the rest were left out
		}
		if need > budget {
			break
		}
		budget -= len(heads[shown])
		shown++
	}
	if shown < len(heads) {
		budget -= len(moreLine(len(heads) - shown))
	}
	// Every candidate shown gets its one line first, then, in edit order,
	// its context while room remains.
	cands := make([]string, shown)
	for i := range shown {
		if len(short[i]) <= budget {
			cands[i] = short[i]
			budget -= len(cands[i])
		}
	}
	for i := range shown {
		if cands[i] != "" && len(full[i])-len(cands[i]) <= budget {
			budget -= len(full[i]) - len(cands[i])
			cands[i] = full[i]
		}
	}

	var b strings.Builder
	for i := range shown {
		b.WriteString(heads[i])
		b.WriteString(cands[i])
	}
	if shown < len(heads) {
		b.WriteString(moreLine(len(heads) - shown))
	}
	b.WriteString(briefFooter)
	return b.String()
}

func moreLine(n int) string {
	return fmt.Sprintf("(%d more refused %s not shown.)\n", n, plural(n, "edit", "edits"))
}

// head is the problem's part of a brief without its candidate.
func (p Problem) head(path string, e *Error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, edit %d: ", path, p.Index)
	switch p.Kind {
	case Empty:
		b.WriteString("`old` is empty. Quote the exact text to replace; to create a file, send a whole write.\n")
	case NoOp:
		b.WriteString("`old` equals `new`, so the edit changes nothing. Drop it or say what should change.\n")
	case NotFound:
		b.WriteString("0 matches. `old` must be copied byte for byte from the current file.\n")
		if p.Differs != "" {
			fmt.Fprintf(&b, "  It matches only after normalising %s; the harness never normalises: use the file's exact bytes.\n", p.Differs)
		}
	case Ambiguous:
		fmt.Fprintf(&b, "%d matches, at %s. Add surrounding lines to `old` until it occurs exactly once.\n", p.Count, lineList(p.Lines, p.Count))
	case Overlap:
		where := ""
		if p.Span != nil {
			where = " (" + lineRange(p.Span.StartLine, p.Span.EndLine) + ")"
		}
		other := ""
		for _, q := range e.Problems {
			if q.Index == p.OverlapWith && q.Span != nil {
				other = " (" + lineRange(q.Span.StartLine, q.Span.EndLine) + ")"
			}
		}
		fmt.Fprintf(&b, "its match%s overlaps the match of edit %d%s. Merge the two edits into one, or make their `old` texts disjoint.\n", where, p.OverlapWith, other)
	default:
		fmt.Fprintf(&b, "%s.\n", p.Kind)
	}
	if p.AlreadyApplied {
		b.WriteString("  Its `new` text already occurs in the file: the edit may have been applied already.\n")
	}
	return b.String()
}

// lineList renders "lines 4, 9 (2 matches), 12" for up to maxLines start
// lines out of count matches.
func lineList(lines []int, count int) string {
	var b strings.Builder
	b.WriteString("line")
	if count > 1 {
		b.WriteString("s")
	}
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", lines[i])
		if j-i > 1 {
			fmt.Fprintf(&b, " (%d matches)", j-i)
		}
		i = j
	}
	if count > len(lines) {
		fmt.Fprintf(&b, ", and %d more", count-len(lines))
	}
	return b.String()
}

func lineRange(a, b int) string {
	if a == b {
		return "line " + strconv.Itoa(a)
	}
	return fmt.Sprintf("lines %d-%d", a, b)
}

func percent(f float64) int { return int(f*100 + 0.5) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
