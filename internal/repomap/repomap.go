// Package repomap builds a repository map: the definitions and signatures
// of every tracked source file (from tree-sitter), ranked for a task and cut
// to a token budget. It reads files only through the Reader it is given and
// caches what it parsed by blob hash, so a second map of a tree parses only
// the files that changed.
package repomap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Def is one definition: a function, type, class, method, constant.
type Def struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"` // the enclosing type or class; "" at top level
	Kind   string `json:"kind"`
	Line   int    `json:"line"` // 1-based
	Depth  int    `json:"depth,omitempty"`
	Sig    string `json:"sig"` // the definition up to its body, on one line
}

// Ref is an identifier a file uses and how often (kept in the parse cache;
// the map keeps those that link files, in its index).
type Ref struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// Entry is one tracked file as git lists it.
type Entry struct {
	Path string
	Blob string // git object id of its content
	Size int64
}

// Reader calls each once with the content of every blob asked for, in any
// order; data stays valid after each returns. An error from each stops it
// and is returned.
type Reader func(ctx context.Context, blobs []string, each func(blob string, data []byte) error) error

// DefaultMaxFileBytes is the size above which a file is skipped as huge:
// amalgamations and data tables, not code a model could take in anyway.
const DefaultMaxFileBytes = 256 << 10

// Options configure Build.
type Options struct {
	Files        []Entry
	Read         Reader
	CacheDir     string // where parsed blobs are kept between runs; "" keeps none
	MaxFileBytes int64  // 0 means DefaultMaxFileBytes
	Workers      int    // parsers running at once; 0 means GOMAXPROCS
	// Attributes are the tree's linguist attributes (ParseAttributes of its
	// .gitattributes files); nil for none. linguist-vendored sets or unsets
	// vendored, over the directory names; linguist-generated marks a file
	// generated, or unmarks a name that looks minified (a content marker
	// still counts).
	Attributes *Attributes
}

// File is the definitions of one source file.
type File struct {
	Path string `json:"path"`
	Lang string `json:"lang"`
	Defs []Def  `json:"defs"`
}

// Skipped counts the source files left out of a map, by reason.
type Skipped struct {
	Huge      int `json:"huge"`
	Generated int `json:"generated"`
	Vendored  int `json:"vendored"`
	Binary    int `json:"binary"`
}

// Total is the number of files skipped for any reason.
func (s Skipped) Total() int { return s.Huge + s.Generated + s.Vendored + s.Binary }

// Map is every source file of a tree with its definitions.
type Map struct {
	Files   []File // sorted by path
	Skipped Skipped
	Parsed  int // distinct contents parsed by this Build (not found in the cache)
	Cached  int // distinct contents taken from the cache

	ix *index // what ranking needs that no task changes (index.go)
}

// Build extracts the definitions of the source files among o.Files,
// parsing in parallel the blobs the cache does not hold. A file that does
// not parse yields what the parser recovered; only reading or a cancelled
// ctx fail.
func Build(ctx context.Context, o Options) (*Map, error) {
	maxBytes := maxBytes(o)
	m := &Map{}
	type source struct {
		Entry
		g *grammar
	}
	var sources []source
	for _, e := range o.Files {
		g := grammarFor(e.Path)
		var vend, gen attrState
		if g != nil {
			vend, gen = o.Attributes.linguist(e.Path)
		}
		switch {
		case g == nil:
		case vend == attrSet || vend != attrUnset && vendored(e.Path):
			m.Skipped.Vendored++
		case e.Size > maxBytes:
			m.Skipped.Huge++
		case gen == attrSet || gen != attrUnset && minified(e.Path):
			m.Skipped.Generated++
		default:
			sources = append(sources, source{e, g})
		}
	}
	cache, err := loadCache(o.CacheDir)
	if err != nil {
		return nil, err
	}
	results := make(map[string]*parsed, len(sources))
	want := map[string][]*grammar{} // blob -> the grammars to parse it with
	for _, s := range sources {
		k := cacheKey(s.g, s.Blob)
		if _, done := results[k]; done {
			continue
		}
		if p, ok := cache.get(k); ok {
			results[k] = p
			m.Cached++
			continue
		}
		if !slices.Contains(want[s.Blob], s.g) {
			want[s.Blob] = append(want[s.Blob], s.g)
		}
	}
	if len(want) > 0 {
		parsedNow, err := parseBlobs(ctx, o, want)
		if err != nil {
			return nil, err
		}
		for k, p := range parsedNow {
			results[k] = p
			cache.put(k, p)
		}
		m.Parsed = len(parsedNow)
	}
	slices.SortFunc(sources, func(a, b source) int { return strings.Compare(a.Path, b.Path) })
	var refs [][]Ref
	for _, s := range sources {
		p := results[cacheKey(s.g, s.Blob)]
		switch p.Skip {
		case skipGenerated:
			m.Skipped.Generated++
			continue
		case skipBinary:
			m.Skipped.Binary++
			continue
		}
		m.Files = append(m.Files, File{Path: s.Path, Lang: s.g.name, Defs: p.Defs})
		refs = append(refs, p.Refs)
	}
	// Writing the cache back (encoding a large tree's takes a while) and
	// indexing the map share nothing: one goroutine each.
	saved := make(chan error, 1)
	go func() { saved <- cache.save(results) }()
	m.ix = newIndex(m.Files, refs)
	if err := <-saved; err != nil {
		return nil, err
	}
	return m, nil
}

func maxBytes(o Options) int64 {
	if o.MaxFileBytes <= 0 {
		return DefaultMaxFileBytes
	}
	return o.MaxFileBytes
}

// parsed is what Build keeps of one blob, in the cache too.
type parsed struct {
	Skip string // "", skipGenerated or skipBinary
	Defs []Def
	Refs []Ref
}

const (
	skipGenerated = "generated"
	skipBinary    = "binary"
)

// readAhead bounds the bytes of content read and not yet parsed: git
// reads the next blobs while the parsers work, within this much memory.
const readAhead = 16 << 20

// parseBlobs reads the blobs of want and parses each with its grammars,
// on o.Workers goroutines.
func parseBlobs(ctx context.Context, o Options, want map[string][]*grammar) (map[string]*parsed, error) {
	blobs := slices.Sorted(maps.Keys(want))
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type job struct {
		blob string
		data []byte
	}
	jobs := make(chan job, len(blobs))
	budget := newByteBudget(readAhead)
	out := make(map[string]*parsed, len(blobs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			ps := parsers{}
			defer ps.close()
			words := newIdents()
			for j := range jobs {
				for _, g := range want[j.blob] {
					if ctx.Err() != nil {
						break
					}
					p, err := parseOne(ctx, ps, words, g, j.data)
					if err != nil {
						cancel(err)
						break
					}
					mu.Lock()
					out[cacheKey(g, j.blob)] = p
					mu.Unlock()
				}
				budget.release(len(j.data))
			}
		})
	}
	err := o.Read(ctx, blobs, func(blob string, data []byte) error {
		if _, ok := want[blob]; !ok {
			return fmt.Errorf("the reader returned blob %s, which was not asked for", blob)
		}
		if err := budget.acquire(ctx, len(data)); err != nil {
			return err
		}
		jobs <- job{blob, data} // never blocks: room for every blob
		return nil
	})
	close(jobs)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause
	}
	if err != nil {
		return nil, fmt.Errorf("read files for the repository map: %w", err)
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	for _, b := range blobs {
		if _, ok := out[cacheKey(want[b][0], b)]; !ok {
			return nil, fmt.Errorf("read files for the repository map: blob %s of %d was not returned", b, len(blobs))
		}
	}
	return out, nil
}

// byteBudget is a counting semaphore over bytes: acquire waits while what
// is held would pass the limit (one request larger than the limit passes
// alone).
type byteBudget struct {
	mu    sync.Mutex
	held  int
	limit int
	freed chan struct{} // closed and replaced at every release
}

func newByteBudget(limit int) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

func (b *byteBudget) acquire(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		if b.held == 0 || b.held+n <= b.limit {
			b.held += n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.held -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// parseOne classifies and parses one file's content.
func parseOne(ctx context.Context, ps parsers, words *idents, g *grammar, data []byte) (*parsed, error) {
	switch {
	case isBinary(data):
		return &parsed{Skip: skipBinary}, nil
	case generated(data):
		return &parsed{Skip: skipGenerated}, nil
	}
	defs, err := extract(ctx, ps, g, data)
	if err != nil {
		return nil, err
	}
	return &parsed{Defs: defs, Refs: words.count(data)}, nil
}

// vendored reports a path inside a directory of third-party code.
func vendored(p string) bool {
	for _, dir := range strings.Split(path.Dir(p), "/") {
		switch dir {
		case "vendor", "node_modules", "third_party", "thirdparty", "bower_components", "jspm_packages", "site-packages", "Pods":
			return true
		}
	}
	return false
}

func minified(p string) bool {
	base := path.Base(p)
	return strings.Contains(base, ".min.") || strings.HasSuffix(base, ".bundle.js")
}

// binary is git's test: a NUL byte in the first 8000 bytes.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// generated reports the markers code generators write near the top of a
// file: Go's "Code generated ... DO NOT EDIT.", the "@generated" tag
// other tools use, and a line that says both "generated" and "do not
// edit" in any case (protobuf's "Generated by the protocol buffer
// compiler.  DO NOT EDIT!" in every language it writes, and many others).
func generated(data []byte) bool {
	head := data[:min(len(data), 2048)]
	if i := bytes.Index(head, []byte("Code generated ")); i >= 0 && bytes.Contains(head[i:], []byte("DO NOT EDIT")) {
		return true
	}
	if bytes.Contains(head, []byte("@generated")) {
		return true
	}
	for line := range bytes.Lines(head) {
		if containsFold(line, "do not edit") && containsFold(line, "generated") {
			return true
		}
	}
	return false
}

// containsFold reports that b holds word (lower-case ASCII) in any case.
func containsFold(b []byte, word string) bool {
	for i := 0; i+len(word) <= len(b); i++ {
		if b[i]|0x20 == word[0] && bytes.EqualFold(b[i:i+len(word)], []byte(word)) {
			return true
		}
	}
	return false
}

// identifiers counts the identifier-like words of src, sorted by name.
// It is lexical on purpose: comments and strings that name a definition
// count as using it, which suits ranking, and it costs no tree walk.
func identifiers(src []byte) []Ref { return newIdents().count(src) }

// idents counts identifiers file after file for one goroutine. It keeps
// every word it has met, so a word is one string however many files use
// it. A file's words are counted in a small open-addressing table of
// spans of the file itself, hashed as they are scanned (a map keyed by
// strings cost a third of a cold map's CPU outside the parser), and only
// each distinct word of a file is looked up among all the words.
type idents struct {
	words map[string]string // every word met, by itself
	slots []int32           // index+1 into spans, 0 for none; a power of two long
	spans []wordSpan        // this file's distinct words
}

type wordSpan struct {
	start, end int32
	hash       uint32
	count      int32
}

func newIdents() *idents {
	return &idents{words: map[string]string{}, slots: make([]int32, 1024)}
}

func (c *idents) count(src []byte) []Ref {
	c.spans = c.spans[:0]
	clear(c.slots)
	for i := 0; i < len(src); {
		ch := src[i]
		if ch >= '0' && ch <= '9' { // a number, 0x1F included
			for i < len(src) && (identStart(src[i]) || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			continue
		}
		if !identStart(ch) {
			i++
			continue
		}
		h := uint32(2166136261) // FNV-1a
		j := i
		for j < len(src) && (identStart(src[j]) || src[j] >= '0' && src[j] <= '9') {
			h = (h ^ uint32(src[j])) * 16777619
			j++
		}
		if j-i >= 2 && j-i <= 64 {
			c.add(src, i, j, h)
		}
		i = j
	}
	refs := make([]Ref, len(c.spans))
	for k, sp := range c.spans {
		w := unsafe.String(&src[sp.start], int(sp.end-sp.start)) // looked up only, never kept
		word, ok := c.words[w]
		if !ok {
			word = strings.Clone(w)
			c.words[word] = word
		}
		refs[k] = Ref{Name: word, Count: int(sp.count)}
	}
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

// add counts src[i:j], whose hash is h.
func (c *idents) add(src []byte, i, j int, h uint32) {
	mask := uint32(len(c.slots) - 1)
	for k := h & mask; ; k = (k + 1) & mask {
		s := c.slots[k]
		if s == 0 {
			c.spans = append(c.spans, wordSpan{int32(i), int32(j), h, 1})
			c.slots[k] = int32(len(c.spans))
			if 2*len(c.spans) > len(c.slots) {
				c.grow()
			}
			return
		}
		sp := &c.spans[s-1]
		if sp.hash == h && int(sp.end-sp.start) == j-i && string(src[sp.start:sp.end]) == string(src[i:j]) {
			sp.count++
			return
		}
	}
}

// grow doubles the table and puts every span back.
func (c *idents) grow() {
	c.slots = make([]int32, 2*len(c.slots))
	mask := uint32(len(c.slots) - 1)
	for s, sp := range c.spans {
		k := sp.hash & mask
		for c.slots[k] != 0 {
			k = (k + 1) & mask
		}
		c.slots[k] = int32(s + 1)
	}
}

func identStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
