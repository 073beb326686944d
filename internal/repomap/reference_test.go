//go:build cgo

package repomap

// The slow path the fast ones replace, kept as it was before the map was
// indexed (issue 40): the differential tests compare the fast path's maps,
// orders and text with these, on the fixture and on random trees.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
)

// refMap is a map as the slow path held it: every file with the
// identifiers it uses.
type refMap struct {
	Files   []refFile
	Skipped Skipped
}

type refFile struct {
	File
	Refs []Ref
}

// refIdentifiers is identifiers before the per-worker interner.
func refIdentifiers(src []byte) []Ref {
	counts := map[string]int{}
	for i := 0; i < len(src); {
		c := src[i]
		if c >= '0' && c <= '9' {
			for i < len(src) && (identStart(src[i]) || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			continue
		}
		if !identStart(c) {
			i++
			continue
		}
		j := i + 1
		for j < len(src) && (identStart(src[j]) || src[j] >= '0' && src[j] <= '9') {
			j++
		}
		if j-i >= 2 && j-i <= 64 {
			counts[string(src[i:j])]++
		}
		i = j
	}
	refs := make([]Ref, 0, len(counts))
	for name, n := range counts {
		refs = append(refs, Ref{Name: name, Count: n})
	}
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

func (m *refMap) FocusFromText(text string) Focus {
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

func (m *refMap) pathsEndingWith(tail string) []string {
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

func refRank(m *refMap, focus Focus) []ranked {
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
			w := refNameWeight(r.Name, len(ds), focusIdent[r.Name]) * math.Sqrt(float64(r.Count))
			if focusFile[i] {
				w *= 50
			}
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
		if a.tier == 0 {
			return cmp.Or(cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
		}
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.file, b.file), cmp.Compare(a.def, b.def))
	})
	return defs
}

func refNameWeight(name string, definers int, focus bool) float64 {
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

func (m *refMap) Render(focus Focus, tokens int) View {
	v := View{Skipped: m.Skipped, Files: []File{}}
	if tokens <= 0 {
		return v
	}
	omit := map[int]bool{}
	for i, f := range m.Files {
		if slices.Contains(focus.Omit, f.Path) {
			omit[i] = true
		}
	}
	var order []ranked
	for _, r := range refRank(m, focus) {
		if !omit[r.file] {
			order = append(order, r)
		}
	}
	v.Total = len(order)
	lo, hi := 0, len(order)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if text, _ := m.render(order[:mid], v.Total); EstimateTokens(text) <= tokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return v
	}
	v.Text, v.Files = m.render(order[:lo], v.Total)
	for _, f := range v.Files {
		v.Shown += len(f.Defs)
	}
	return v
}

func (m *refMap) render(chosen []ranked, total int) (string, []File) {
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
	var b strings.Builder
	fmt.Fprintf(&b, "Repository map: %d of the %d definitions in %d source files (line: signature; most relevant files first)", shown, total, len(m.Files))
	if s := m.Skipped; s.Total() > 0 {
		fmt.Fprintf(&b, "; skipped %d files (%d generated, %d vendored, %d huge, %d binary)", s.Total(), s.Generated, s.Vendored, s.Huge, s.Binary)
	}
	b.WriteString(".\n")
	b.WriteString(body.String())
	return b.String(), out
}
