package repomap

import (
	"fmt"
	"slices"
	"strings"
)

// BytesPerToken is the prompt estimate of llm.BytesPerToken (a test in
// internal/cli keeps them equal): a budget counted this way is never
// under what the budget meter counts.
const BytesPerToken = 3

// DefaultTokens is the map budget when none is given: a few thousand
// tokens, a small part of a planner request.
const DefaultTokens = 4096

// EstimateTokens is the token estimate of s, as the budget meter makes it.
func EstimateTokens(s string) int { return estimateBytes(len(s)) }

// View is a map cut for one task.
type View struct {
	Text  string `json:"-"`
	Shown int    `json:"shown"` // definitions shown
	Total int    `json:"total"` // definitions in the map
	// Files are the files shown, in the order shown, with only the
	// definitions shown.
	Files   []File  `json:"files"`
	Skipped Skipped `json:"skipped"`
}

// Render ranks the definitions of m for focus and keeps the most that fit
// in tokens (EstimateTokens of the text). Nothing fits, or tokens ≤ 0,
// gives an empty View. Same map and focus, same bytes.
func (m *Map) Render(focus Focus, tokens int) View {
	v := View{Skipped: m.Skipped, Files: []File{}}
	if tokens <= 0 {
		return v
	}
	var omit []bool
	for i, f := range m.Files {
		if slices.Contains(focus.Omit, f.Path) {
			if omit == nil {
				omit = make([]bool, len(m.Files))
			}
			omit[i] = true
		}
	}
	order := newHeap(rank(m, focus, omit))
	v.Total = len(order)
	// The largest prefix of the order that fits. Rendering more definitions
	// never makes the text shorter, so it is the prefix before the first
	// definition that makes it too long; the text's length is counted as
	// the definitions are taken, as render will lay them out, and only the
	// prefix kept is rendered.
	ix := m.index()
	picked := make([]bool, len(ix.defName))
	seen := make([]bool, len(m.Files))
	header := len(m.header(0, v.Total)) - 1 // without the digit of "0 of"
	body, shown := 0, 0
	var chosen []ranked
	for {
		r, ok := order.pop()
		if !ok {
			break
		}
		if !seen[r.file] {
			seen[r.file] = true
			body += len(m.Files[r.file].Path) + 2
		}
		defs, base := m.Files[r.file].Defs, int(ix.defStart[r.file])
		take := func(j int) {
			if !picked[base+j] {
				picked[base+j] = true
				body += lineBytes(defs[j])
				shown++
			}
		}
		take(r.def)
		for depth, j := defs[r.def].Depth, r.def-1; depth > 0 && j >= 0; j-- {
			if defs[j].Depth < depth {
				take(j)
				depth = defs[j].Depth
			}
		}
		if estimateBytes(header+decimalLen(shown)+body) > tokens {
			break
		}
		chosen = append(chosen, r)
	}
	if len(chosen) == 0 {
		return v
	}
	v.Text, v.Files = m.render(chosen, v.Total)
	for _, f := range v.Files {
		v.Shown += len(f.Defs)
	}
	return v
}

// estimateBytes is EstimateTokens of a text of n bytes.
func estimateBytes(n int) int { return (n + BytesPerToken - 1) / BytesPerToken }

// lineBytes is the length of d's line in the map.
func lineBytes(d Def) int {
	return max(5, decimalLen(d.Line)) + 2 + 2*d.Depth + len(d.Sig) + 1
}

// decimalLen is len(strconv.Itoa(n)).
func decimalLen(n int) int {
	l := 1
	if n < 0 {
		l++
		n = -n
	}
	for n >= 10 {
		n /= 10
		l++
	}
	return l
}

// header is the map's first line, with its newline.
func (m *Map) header(shown, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Repository map: %d of the %d definitions in %d source files (line: signature; most relevant files first)", shown, total, len(m.Files))
	if s := m.Skipped; s.Total() > 0 {
		fmt.Fprintf(&b, "; skipped %d files (%d generated, %d vendored, %d huge, %d binary)", s.Total(), s.Generated, s.Vendored, s.Huge, s.Binary)
	}
	b.WriteString(".\n")
	return b.String()
}

// render lays out the chosen definitions file by file, files in the order
// of their best definition, definitions in source order, each member
// under its container (added when the container itself was not chosen).
func (m *Map) render(chosen []ranked, total int) (string, []File) {
	var files []int
	picked := map[int][]bool{}
	for _, r := range chosen {
		p := picked[r.file]
		if p == nil {
			p = make([]bool, len(m.Files[r.file].Defs))
			picked[r.file] = p
			files = append(files, r.file)
		}
		p[r.def] = true
		defs := m.Files[r.file].Defs
		for depth, j := defs[r.def].Depth, r.def-1; depth > 0 && j >= 0; j-- {
			if defs[j].Depth < depth {
				p[j] = true
				depth = defs[j].Depth
			}
		}
	}
	var body strings.Builder
	shown := 0
	out := make([]File, 0, len(files))
	for _, i := range files {
		f := m.Files[i]
		fmt.Fprintf(&body, "\n%s\n", f.Path)
		kept := File{Path: f.Path, Lang: f.Lang}
		for j, d := range f.Defs {
			if picked[i][j] {
				fmt.Fprintf(&body, "%5d: %s%s\n", d.Line, strings.Repeat("  ", d.Depth), d.Sig)
				kept.Defs = append(kept.Defs, d)
			}
		}
		shown += len(kept.Defs)
		out = append(out, kept)
	}
	return m.header(shown, total) + body.String(), out
}
