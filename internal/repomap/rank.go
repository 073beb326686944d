package repomap

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
)

// Focus is what a task names: its definitions come first, and the rank
// flows from them to what they use and what uses them.
type Focus struct {
	Files  []string `json:"files"`  // tracked paths the task names
	Idents []string `json:"idents"` // identifiers the task names
	// Omit are files the reader already sees in full (an SE prompt's
	// context files): they steer the rank but are not listed.
	Omit []string `json:"omit,omitempty"`
}

const (
	damping       = 0.85
	iterations    = 40 // fixed, so every run does the same arithmetic
	maxDefiners   = 20 // a name defined in more files (String, New, main) says nothing about which
	maxFocusFiles = 5  // a bare file name matching more tracked files names none of them
)

// FocusFromText finds what text (a specification, a work order) names:
// tracked paths, written whole or as a unique-enough tail such as
// "server/handler.go", and identifiers that some file of m defines and that
// the text writes as code — in backquotes, called (`name(`), qualified
// (Store.Find), or spelt as no English word is (snake_case, camelCase,
// FetchUser) — so that "Add a flag" does not name every Add in the tree.
func (m *Map) FocusFromText(text string) Focus {
	ix := m.index()
	files, idents := map[string]bool{}, map[string]bool{}
	isTok := func(c byte) bool {
		return c == '_' || c == '.' || c == '/' || c == '-' || c == '$' || identStart(c) || c >= '0' && c <= '9'
	}
	for i := 0; i < len(text); {
		if !isTok(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isTok(text[j]) {
			j++
		}
		raw := text[i:j]
		tok := strings.Trim(raw, ".-/")
		marked := i > 0 && text[i-1] == '`' || j < len(text) && (text[j] == '(' || text[j] == '`')
		i = j
		var paths []string
		if strings.ContainsAny(tok, "./") {
			paths = m.pathsEndingWith(tok)
			for _, p := range paths {
				files[p] = true
			}
		}
		words := strings.FieldsFunc(tok, func(r rune) bool { return r == '.' || r == '/' || r == '-' })
		qualified := len(words) > 1 && len(paths) == 0 && !strings.Contains(tok, "/") && grammarFor(tok) == nil
		for _, word := range words {
			if len(word) >= 3 && (marked || qualified || codeLike(word)) && ix.nameID(word) >= 0 {
				idents[word] = true
			}
		}
	}
	return Focus{Files: slices.Sorted(maps.Keys(files)), Idents: slices.Sorted(maps.Keys(idents))}
}

// codeLike reports a word no English sentence has: with an underscore, or
// an upper-case letter after its first.
func codeLike(word string) bool {
	return strings.Contains(word, "_") || strings.ContainsFunc(word[1:], func(r rune) bool { return r >= 'A' && r <= 'Z' })
}

// FocusOn is FocusFromText(text) with files added to the focus files and
// omit (files shown in full elsewhere) left out of the map: a work order's
// allowed and context files, its intent and notes, its context files.
func (m *Map) FocusOn(files []string, text string, omit []string) Focus {
	f := m.FocusFromText(text)
	f.Files = slices.Compact(slices.Sorted(slices.Values(append(f.Files, files...))))
	f.Omit = slices.Clone(omit)
	return f
}

// pathsEndingWith returns the files whose path is tail or ends with
// "/"+tail, none when more than maxFocusFiles do.
func (m *Map) pathsEndingWith(tail string) []string {
	var out []string
	for _, f := range m.Files {
		if f.Path == tail || strings.HasSuffix(f.Path, "/"+tail) {
			out = append(out, f.Path)
			if len(out) > maxFocusFiles {
				return nil
			}
		}
	}
	return out
}

// ranked is one definition with its place in the order.
type ranked struct {
	file, def int // indexes into Map.Files and its Defs
	tier      int // 0 a focus file's, 1 a focus identifier's, 2 the rest
	score     float64
}

// before is the order of the ranking: tier, then a focus file top to
// bottom, the rest by score; ties go to the path, then the line. It is a
// total order (file and def differ between two definitions).
func before(a, b ranked) int {
	if c := cmp.Compare(a.tier, b.tier); c != 0 {
		return c
	}
	if a.tier == 0 { // a focus file reads top to bottom
		return cmp.Or(cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
	}
	return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
}

// rank scores every definition of m for focus, leaving out the files omit
// marks (nil: none), in no particular order: before orders them. The
// focus files' definitions come first (in source order), then the focus
// identifiers', then the rest by a PageRank over the files, personalised
// on the focus, in which a file that uses a name links to the files
// defining it (aider's repository map does the same).
//
// It does, in the same order and so with the same floating-point results,
// what the string-keyed version did (kept in reference_test.go), over the
// index's numbers.
func rank(m *Map, focus Focus, omit []bool) []ranked {
	ix := m.index()
	n := len(m.Files)
	focusFile := make([]bool, n)
	for _, p := range focus.Files {
		if i, ok := slices.BinarySearchFunc(m.Files, p, func(f File, p string) int { return strings.Compare(f.Path, p) }); ok {
			focusFile[i] = true
		}
	}
	focusIdent := make([]bool, len(ix.names))
	for _, id := range focus.Idents {
		if k := ix.nameID(id); k >= 0 {
			focusIdent[k] = true
		}
	}

	// A use of a name in a file links it to every file defining the name
	// (targets[lo:hi]; slots[lo:hi] are the definitions), all with weight
	// weights[w]. File i's uses are uses[useStart[i]:useStart[i+1]], its
	// weights weights[weightStart[i]:weightStart[i+1]]: a file's uses share
	// a few weights, so an iteration divides once per weight, not per use.
	type use struct {
		lo, hi int32
		w      int32
	}
	// Room for every use and link first: at most one per use the index
	// keeps, at most its definers each.
	nuses, nlinks := 0, 0
	for i := range n {
		for _, r := range ix.refs[ix.refStart[i]:ix.refStart[i+1]] {
			from, to := ix.definers(i, r.name)
			if ds := int(to - from); ds <= maxDefiners || focusIdent[r.name] {
				nuses++
				nlinks += ds
			}
		}
	}
	uses := make([]use, 0, nuses)
	targets, slots := make([]int32, 0, nlinks), make([]int32, 0, nlinks)
	useStart, weightStart := make([]int32, n+1), make([]int32, n+1)
	var weights []float64
	out := make([]float64, n)
	for i := range n {
		useStart[i], weightStart[i] = int32(len(uses)), int32(len(weights))
		for _, r := range ix.refs[ix.refStart[i]:ix.refStart[i+1]] {
			from, to := ix.definers(i, r.name)
			ds := int(to - from)
			if ds == 0 || ds > maxDefiners && !focusIdent[r.name] {
				continue
			}
			w := ix.nameWeight(r.name, ds, focusIdent[r.name]) * math.Sqrt(float64(r.count))
			if focusFile[i] {
				w *= 50
			}
			// An unexported Go name is visible only in its own package.
			local := ix.local(i, r.name)
			lo := int32(len(targets))
			for d := from; d < to; d++ {
				j := ix.defnFiles[d]
				if int(j) == i || local && ix.fileDir[j] != ix.fileDir[i] {
					continue
				}
				targets = append(targets, j)
				slots = append(slots, ix.defnSlot[d])
				out[i] += w
			}
			if hi := int32(len(targets)); hi > lo {
				// The file's weight equal to w among its last few, else a
				// new one (a repeated weight costs a division, no more).
				c := int32(len(weights)) - 1
				for ; c >= max(weightStart[i], int32(len(weights))-16) && weights[c] != w; c-- {
				}
				if c < weightStart[i] || c < int32(len(weights))-16 {
					c = int32(len(weights))
					weights = append(weights, w)
				}
				uses = append(uses, use{lo, hi, c})
			}
		}
	}
	useStart[n], weightStart[n] = int32(len(uses)), int32(len(weights))
	// The links into each file, in the order of the uses: what each adds
	// to the file's rank is values[w], added in that order.
	inStart := make([]int32, n+1)
	for _, j := range targets {
		inStart[j+1]++
	}
	for j := range n {
		inStart[j+1] += inStart[j]
	}
	in := make([]int32, len(targets))
	fill := slices.Clone(inStart[:n])
	for _, u := range uses {
		for _, j := range targets[u.lo:u.hi] {
			in[fill[j]] = u.w
			fill[j]++
		}
	}
	values := make([]float64, len(weights))

	personal := make([]float64, n)
	total := 0.0
	for i := range n {
		if focusFile[i] {
			personal[i]++
		}
		for _, k := range ix.defName[ix.defStart[i]:ix.defStart[i+1]] {
			if focusIdent[k] {
				personal[i]++
				break
			}
		}
		total += personal[i]
	}
	if total == 0 {
		for i := range personal {
			personal[i] = 1
		}
		total = float64(n)
	}
	for i := range personal {
		personal[i] /= total
	}
	pr := slices.Clone(personal)
	next := make([]float64, n)
	for range iterations {
		dangling := 0.0
		for i, o := range out {
			if o == 0 {
				dangling += pr[i]
			}
		}
		for i := range n {
			// damping * pr[i] * w / out[i], left to right as for one link
			// at a time, so the same value.
			dp, o := damping*pr[i], out[i]
			for c := weightStart[i]; c < weightStart[i+1]; c++ {
				values[c] = dp * weights[c] / o
			}
		}
		for j := range n {
			// The same additions, in the same order, as adding each link's
			// value to next[j] link by link: the same sum.
			acc := (1 - damping + damping*dangling) * personal[j]
			for _, c := range in[inStart[j]:inStart[j+1]] {
				acc += values[c]
			}
			next[j] = acc
		}
		pr, next = next, pr
	}

	// A definition's score is the rank that flows to it through the names
	// pointing at it, plus a little of its file's own, so that definitions
	// nothing names still follow their file.
	flow := make([]float64, len(ix.defName))
	for i := range n {
		for _, u := range uses[useStart[i]:useStart[i+1]] {
			v := pr[i] * weights[u.w] / out[i]
			for _, slot := range slots[u.lo:u.hi] {
				flow[slot] += v
			}
		}
	}
	defs := make([]ranked, 0, len(ix.defName))
	for i := range n {
		if omit != nil && omit[i] {
			continue
		}
		start := ix.defStart[i]
		for g := start; g < ix.defStart[i+1]; g++ {
			r := ranked{file: i, def: int(g - start), tier: 2, score: flow[ix.defSlot[g]] + pr[i]*1e-3}
			switch {
			case focusFile[i]:
				r.tier = 0
			case focusIdent[ix.defName[g]]:
				r.tier = 1
			}
			defs = append(defs, r)
		}
	}
	return defs
}

// nameWeight is how much a use of name k says about the files defining it:
// named by the task, long and specific (FetchUserRecord, parse_config)
// more; private (_helper) or defined all over less.
func (ix *index) nameWeight(k int32, definers int, focus bool) float64 {
	fl := ix.nameFlags[k]
	w := 1.0
	if focus {
		w *= 10
	}
	if fl&nameSpecific != 0 {
		w *= 10
	}
	if fl&namePrivate != 0 {
		w *= 0.1
	}
	if definers > 5 {
		w *= 0.1
	}
	return w
}

// heap orders ranked definitions by before, smallest first: a map shows
// a few hundred definitions of maybe a hundred thousand, so it takes them
// one by one rather than sorting them all.
type heap []ranked

func newHeap(defs []ranked) heap {
	h := heap(defs)
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

func (h *heap) pop() (ranked, bool) {
	s := *h
	if len(s) == 0 {
		return ranked{}, false
	}
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top, true
}

func (h heap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && before(h[c+1], h[c]) < 0 {
			c++
		}
		if before(h[c], h[i]) >= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// family groups the languages whose files use each other's names.
func family(lang string) string {
	switch lang {
	case "c", "cpp":
		return "c"
	case "javascript", "typescript", "tsx":
		return "js"
	}
	return lang
}

func isExportedGo(name string) bool { return name[0] >= 'A' && name[0] <= 'Z' }
