package repomap

import (
	"cmp"
	"maps"
	"math"
	"path"
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
	defined := map[string]bool{}
	for _, f := range m.Files {
		for _, d := range f.Defs {
			defined[d.Name] = true
		}
	}
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
			if len(word) >= 3 && defined[word] && (marked || qualified || codeLike(word)) {
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

// rank orders every definition of m for focus: the focus files'
// definitions first (in source order), then the focus identifiers', then
// the rest by a PageRank over the files, personalised on the focus, in
// which a file that uses a name links to the files defining it (aider's
// repository map does the same). Ties go to the path, then the line.
func rank(m *Map, focus Focus) []ranked {
	n := len(m.Files)
	index := make(map[string]int, n)
	for i, f := range m.Files {
		index[f.Path] = i
	}
	focusFile := make([]bool, n)
	for _, p := range focus.Files {
		if i, ok := index[p]; ok {
			focusFile[i] = true
		}
	}
	focusIdent := map[string]bool{}
	for _, id := range focus.Idents {
		focusIdent[id] = true
	}
	// Names are lexical, so a use links only to definitions of the same
	// language family ("len" in Go code is not a C function).
	type fname struct{ family, name string }
	definers := map[fname][]int32{}
	for i, f := range m.Files {
		fam := family(f.Lang)
		for _, d := range f.Defs {
			k := fname{fam, d.Name}
			if ds := definers[k]; len(ds) == 0 || ds[len(ds)-1] != int32(i) {
				definers[k] = append(ds, int32(i))
			}
		}
	}

	type edge struct {
		from, to int32
		name     string
		w        float64
	}
	var edges []edge
	out := make([]float64, n)
	for i, f := range m.Files {
		fam := family(f.Lang)
		for _, r := range f.Refs {
			ds := definers[fname{fam, r.Name}]
			if len(ds) == 0 || len(ds) > maxDefiners && !focusIdent[r.Name] {
				continue
			}
			w := nameWeight(r.Name, len(ds), focusIdent[r.Name]) * math.Sqrt(float64(r.Count))
			if focusFile[i] {
				w *= 50
			}
			// An unexported Go name is visible only in its own package.
			local := fam == "go" && !isExportedGo(r.Name)
			for _, j := range ds {
				if int(j) == i || local && path.Dir(m.Files[j].Path) != path.Dir(f.Path) {
					continue
				}
				edges = append(edges, edge{int32(i), j, r.Name, w})
				out[i] += w
			}
		}
	}

	personal := make([]float64, n)
	total := 0.0
	for i, f := range m.Files {
		if focusFile[i] {
			personal[i]++
		}
		for _, d := range f.Defs {
			if focusIdent[d.Name] {
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
		for i := range next {
			next[i] = (1 - damping + damping*dangling) * personal[i]
		}
		for _, e := range edges {
			next[e.to] += damping * pr[e.from] * e.w / out[e.from]
		}
		pr, next = next, pr
	}

	// A definition's score is the rank that flows to it through the names
	// pointing at it, plus a little of its file's own, so that definitions
	// nothing names still follow their file.
	type key struct {
		file int32
		name string
	}
	flow := map[key]float64{}
	for _, e := range edges {
		flow[key{e.to, e.name}] += pr[e.from] * e.w / out[e.from]
	}
	var defs []ranked
	for i, f := range m.Files {
		for j, d := range f.Defs {
			r := ranked{file: i, def: j, tier: 2, score: flow[key{int32(i), d.Name}] + pr[i]*1e-3}
			switch {
			case focusFile[i]:
				r.tier = 0
			case focusIdent[d.Name]:
				r.tier = 1
			}
			defs = append(defs, r)
		}
	}
	slices.SortStableFunc(defs, func(a, b ranked) int {
		if c := cmp.Compare(a.tier, b.tier); c != 0 {
			return c
		}
		if a.tier == 0 { // a focus file reads top to bottom
			return cmp.Or(cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
		}
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
	})
	return defs
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

// nameWeight is how much a use of name says about the files defining it:
// named by the task, long and specific (FetchUserRecord, parse_config)
// more; private (_helper) or defined all over less.
func nameWeight(name string, definers int, focus bool) float64 {
	w := 1.0
	if focus {
		w *= 10
	}
	if len(name) >= 8 && (strings.Contains(name, "_") || strings.ToLower(name) != name && strings.ToUpper(name) != name) {
		w *= 10
	}
	if strings.HasPrefix(name, "_") {
		w *= 0.1
	}
	if definers > 5 {
		w *= 0.1
	}
	return w
}
