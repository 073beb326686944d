package edit

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxDiagnosed caps the not-found edits of one Apply that get a nearest
// candidate and a normalisation check (each costs a few passes over the
// base); a brief has no room for more anyway.
const maxDiagnosed = 20

// Candidate search bounds.
const (
	maxWindows    = 16      // windows scored in full
	maxVotes      = 1 << 18 // line matches counted
	minSimilarity = 0.3     // below this no candidate is reported
	contextBefore = 2       // lines shown before a candidate
	contextAfter  = 2       // and after it, when the whole region is shown
	contextRegion = 8       // lines of the region shown at most
	contextWidth  = 160     // bytes of a context line shown at most
)

// diagnoser explains refusals against one base. Everything it derives from
// the base is computed on first use and kept for the next edit.
type diagnoser struct {
	base      string
	f         *finder
	diagnosed int

	lines   []string // the base's lines, without line ends
	trimmed []string // the same, trimmed of surrounding white space
	norm    map[string]*finder
}

// alreadyApplied reports whether r.New, when long enough to mean something
// (minApplied), already occurs in the base (for Ambiguous, unless New is part
// of Old and so trivially there).
func (d *diagnoser) alreadyApplied(r Replace, k Kind) bool {
	if len(strings.TrimSpace(r.New)) < minApplied || (k == Ambiguous && strings.Contains(r.Old, r.New)) {
		return false
	}
	_, n := d.f.find(r.New, 1, false)
	return n > 0
}

// notFound fills in Differs and Nearest for an Old that occurs nowhere.
func (d *diagnoser) notFound(p *Problem, old string) {
	if d.diagnosed >= maxDiagnosed {
		return
	}
	d.diagnosed++
	if kind, line, n, ok := d.differs(old); ok {
		p.Differs = kind
		p.Nearest = d.candidate(line, n, splitLines(old), 0)
		return
	}
	p.Nearest = d.nearest(old)
}

func (d *diagnoser) baseLines() []string {
	if d.lines == nil {
		d.lines = splitLines(d.base)
		d.trimmed = make([]string, len(d.lines))
		for i, l := range d.lines {
			d.trimmed[i] = strings.TrimSpace(l)
		}
	}
	return d.lines
}

// splitLines splits s into its lines without their "\n"; a final line end
// does not start another line.
func splitLines(s string) []string {
	l := strings.Split(s, "\n")
	if len(l) > 1 && l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// normalised returns a finder over the base normalised by fn, made once per
// name.
func (d *diagnoser) normalised(name string, fn func(string) string) *finder {
	if f, ok := d.norm[name]; ok {
		return f
	}
	if d.norm == nil {
		d.norm = map[string]*finder{}
	}
	f := &finder{base: fn(d.base)}
	d.norm[name] = f
	return f
}

// differs looks for the one normalisation after which old matches the base:
// it returns its name and where old then matches (0-based first line, number
// of lines). Every normalisation keeps the number of lines of what it
// changes, so lines of the normalised base are lines of the base.
func (d *diagnoser) differs(old string) (kind string, line, n int, ok bool) {
	try := func(name string, fn func(string) string, both bool) (int, string, bool) {
		o := fn(old)
		if strings.TrimSpace(o) == "" {
			return 0, "", false
		}
		f := d.f
		if both {
			f = d.normalised(name, fn)
		}
		if o == old && f.base == d.base {
			return 0, "", false
		}
		offs, c := f.find(o, 1, false)
		if c == 0 {
			return 0, "", false
		}
		return strings.Count(f.base[:offs[0]], "\n"), o, true
	}
	lines := func(o string) int { return strings.Count(strings.TrimSuffix(o, "\n"), "\n") + 1 }

	if strings.Contains(old, "\r") || strings.Contains(d.base, "\r") {
		if l, o, ok := try(DiffLineEndings, crlfToLF, true); ok {
			return DiffLineEndings, l, lines(o), true
		}
	}
	if l, o, ok := try(DiffTrailing, trimTrailing, true); ok {
		return DiffTrailing, l, lines(o), true
	}
	if l, o, ok := try(DiffBlankLines, trimBlankLines, false); ok {
		return DiffBlankLines, l, lines(o), true
	}
	if l, o, ok := try("indentation", trimIndent, true); ok {
		return d.indentKind(old, l), l, lines(o), true
	}
	if !isASCII(old) || !isASCII(d.base) {
		if l, o, ok := try(DiffUnicode, asciiPunct, true); ok {
			return DiffUnicode, l, lines(o), true
		}
	}
	return "", 0, 0, false
}

// indentKind tells tabs-vs-spaces from depth: old matches the base from line
// (0-based) once leading white space is ignored.
func (d *diagnoser) indentKind(old string, line int) string {
	bl := d.baseLines()
	for j, o := range splitLines(old) {
		if line+j >= len(bl) {
			break
		}
		b := bl[line+j]
		lo, lb := leadingSpace(o), leadingSpace(b)
		if lo == lb || strings.TrimSpace(o) == "" || strings.TrimSpace(b) == "" {
			continue
		}
		if strings.Contains(lo, "\t") != strings.Contains(lb, "\t") {
			return DiffIndentTabs
		}
	}
	return DiffIndentDepth
}

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}

func crlfToLF(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// trimTrailing drops spaces and tabs before every line end ("\n" or "\r\n")
// and at the end of s.
func trimTrailing(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for s != "" {
		i := strings.IndexByte(s, '\n')
		line, end := s, ""
		if i >= 0 {
			line, end = s[:i], "\n"
			s = s[i+1:]
		} else {
			s = ""
		}
		cr := strings.HasSuffix(line, "\r")
		line = strings.TrimRight(strings.TrimSuffix(line, "\r"), " \t")
		b.WriteString(line)
		if cr {
			b.WriteByte('\r')
		}
		b.WriteString(end)
	}
	return b.String()
}

// trimIndent drops the leading spaces and tabs of every line.
func trimIndent(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for first := true; ; first = false {
		if !first {
			b.WriteByte('\n')
		}
		i := strings.IndexByte(s, '\n')
		line := s
		if i >= 0 {
			line = s[:i]
		}
		b.WriteString(strings.TrimLeft(line, " \t"))
		if i < 0 {
			return b.String()
		}
		s = s[i+1:]
	}
}

// trimBlankLines drops old's leading blank lines and its trailing white
// space (blank lines and the last line end).
func trimBlankLines(s string) string {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || strings.TrimSpace(s[:i]) != "" {
			break
		}
		s = s[i+1:]
	}
	return strings.TrimRight(s, " \t\r\n")
}

// punct maps typographic characters models and editors substitute to ASCII.
var punct = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'", "\u2032", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`, "\u2033", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2007", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ",
	"\u2026", "...",
	"\u200B", "", "\uFEFF", "",
)

func asciiPunct(s string) string { return punct.Replace(s) }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// nearest finds the window of the base, as many lines long as old, most
// like old line by line. Windows are proposed by base lines equal to one of
// old's (trimmed) lines, or failing any, by the base lines most like old's
// longest line; only the best proposed windows are scored in full.
func (d *diagnoser) nearest(old string) *Candidate {
	bl := d.baseLines()
	ol := splitLines(old)
	ot := make([]string, len(ol))
	for j, l := range ol {
		ot[j] = strings.TrimSpace(l)
	}
	k := min(len(ol), len(bl))
	clamp := func(s int) int { return max(0, min(s, len(bl)-k)) }

	// Lines of old worth voting with: not blank, and not a lone brace when
	// old has longer ones.
	at := map[string][]int{}
	long := slices.ContainsFunc(ot, func(s string) bool { return len(s) >= 4 })
	for j, t := range ot {
		if t != "" && (len(t) >= 4 || !long) {
			at[t] = append(at[t], j)
		}
	}
	votes := map[int]float64{}
	cast := 0
	for i, t := range d.trimmed {
		for _, j := range at[t] {
			votes[clamp(i-j)]++
			if cast++; cast >= maxVotes {
				break
			}
		}
		if cast >= maxVotes {
			break
		}
	}
	if len(votes) == 0 {
		key := 0
		for j, t := range ot {
			if len(t) > len(ot[key]) {
				key = j
			}
		}
		if ot[key] == "" {
			return nil
		}
		km := bigrams(ot[key])
		type hit struct {
			line int
			sim  float64
		}
		var best []hit
		for i, t := range d.trimmed {
			if t == "" {
				continue
			}
			s := dice(km, bigrams(t))
			if s < minSimilarity || (len(best) == maxWindows && s <= best[len(best)-1].sim) {
				continue
			}
			pos, _ := slices.BinarySearchFunc(best, s, func(h hit, s float64) int { return cmp.Compare(s, h.sim) })
			best = slices.Insert(best, pos, hit{i, s})
			if len(best) > maxWindows {
				best = best[:maxWindows]
			}
		}
		for _, h := range best {
			votes[clamp(h.line-key)] += h.sim
		}
	}
	if len(votes) == 0 {
		return nil
	}

	type window struct {
		start int
		votes float64
	}
	ws := make([]window, 0, len(votes))
	for s, v := range votes {
		ws = append(ws, window{s, v})
	}
	slices.SortFunc(ws, func(a, b window) int {
		if c := cmp.Compare(b.votes, a.votes); c != 0 {
			return c
		}
		return a.start - b.start
	})
	bestStart, bestScore := -1, 0.0
	for _, w := range ws[:min(len(ws), maxWindows)] {
		score := windowScore(ot, d.trimmed[w.start:w.start+k])
		if score > bestScore || (score == bestScore && w.start < bestStart) {
			bestStart, bestScore = w.start, score
		}
	}
	if bestScore < minSimilarity {
		return nil
	}
	return d.candidate(bestStart, k, ol, bestScore)
}

// candidate describes the k lines of the base from line (0-based) as a
// match for old's lines, with similarity sim (0: compute it).
func (d *diagnoser) candidate(line, k int, ol []string, sim float64) *Candidate {
	bl := d.baseLines()
	if line >= len(bl) {
		return nil
	}
	k = max(1, min(k, len(bl)-line))
	if sim <= 0 {
		ot := make([]string, len(ol))
		for j, l := range ol {
			ot[j] = strings.TrimSpace(l)
		}
		sim = windowScore(ot, d.trimmed[line:line+k])
	}
	c := &Candidate{StartLine: line + 1, EndLine: line + k, Similarity: sim}
	from, to := max(0, line-contextBefore), line+k+contextAfter
	if k > contextRegion {
		to = line + contextRegion
	}
	for i := from; i < min(to, len(bl)); i++ {
		c.Context = append(c.Context, NumberedLine{N: i + 1, Text: clip(strings.TrimSuffix(bl[i], "\r"), contextWidth)})
	}
	return c
}

// windowScore is the mean similarity of old's trimmed lines to a window of
// the base's, compared in order; old lines beyond the window score 0.
func windowScore(ot, win []string) float64 {
	if len(ot) == 0 {
		return 0
	}
	sum := 0.0
	for j, o := range ot {
		if j < len(win) {
			sum += lineSim(o, win[j])
		}
	}
	return sum / float64(len(ot))
}

// lineSim is a cheap similarity of two lines in [0, 1]: the larger of their
// common prefix and suffix over the longer length, and the Dice coefficient
// of their (hashed) character bigrams.
func lineSim(a, b string) float64 {
	if a == b {
		return 1
	}
	if a == "" || b == "" {
		return 0
	}
	n := min(len(a), len(b))
	p := 0
	for p < n && a[p] == b[p] {
		p++
	}
	s := 0
	for s < n-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return max(float64(p+s)/float64(max(len(a), len(b))), dice(bigrams(a), bigrams(b)))
}

// bigramSet is a 256-bit hashed set of a string's byte pairs.
type bigramSet [4]uint64

func bigrams(s string) bigramSet {
	var m bigramSet
	add := func(h uint) { m[h>>6&3] |= 1 << (h & 63) }
	if len(s) == 1 {
		add(uint(s[0]))
	}
	for i := 0; i+1 < len(s); i++ {
		add((uint(s[i])*31 + uint(s[i+1])) & 255)
	}
	return m
}

func dice(a, b bigramSet) float64 {
	var both, na, nb int
	for i := range a {
		both += bits.OnesCount64(a[i] & b[i])
		na += bits.OnesCount64(a[i])
		nb += bits.OnesCount64(b[i])
	}
	if na+nb == 0 {
		return 0
	}
	return 2 * float64(both) / float64(na+nb)
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
