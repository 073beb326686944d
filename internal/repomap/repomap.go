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

// Ref is an identifier a file uses and how often.
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
}

// File is the definitions of one source file and the identifiers it uses.
type File struct {
	Path string `json:"path"`
	Lang string `json:"lang"`
	Defs []Def  `json:"defs"`
	Refs []Ref  `json:"-"`
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
}

// Build extracts the definitions of the source files among o.Files,
// parsing in parallel the blobs the cache does not hold. A file that does
// not parse yields what the parser recovered; only reading or a cancelled
// ctx fail.
func Build(ctx context.Context, o Options) (*Map, error) {
	maxBytes := o.MaxFileBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	m := &Map{}
	type source struct {
		Entry
		g *grammar
	}
	var sources []source
	for _, e := range o.Files {
		g := grammarFor(e.Path)
		switch {
		case g == nil:
		case vendored(e.Path):
			m.Skipped.Vendored++
		case e.Size > maxBytes:
			m.Skipped.Huge++
		case minified(e.Path):
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
		m.Files = append(m.Files, File{Path: s.Path, Lang: s.g.name, Defs: p.Defs, Refs: p.Refs})
	}
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	if err := cache.save(results); err != nil {
		return nil, err
	}
	return m, nil
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
	jobs := make(chan job, workers)
	out := make(map[string]*parsed, len(blobs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			ps := parsers{}
			defer ps.close()
			for j := range jobs {
				for _, g := range want[j.blob] {
					p, err := parseOne(ctx, ps, g, j.data)
					if err != nil {
						cancel(err)
						break
					}
					mu.Lock()
					out[cacheKey(g, j.blob)] = p
					mu.Unlock()
				}
			}
		})
	}
	err := o.Read(ctx, blobs, func(blob string, data []byte) error {
		if _, ok := want[blob]; !ok {
			return fmt.Errorf("the reader returned blob %s, which was not asked for", blob)
		}
		select {
		case jobs <- job{blob, data}:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
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

// parseOne classifies and parses one file's content.
func parseOne(ctx context.Context, ps parsers, g *grammar, data []byte) (*parsed, error) {
	switch {
	case binary(data):
		return &parsed{Skip: skipBinary}, nil
	case generated(data):
		return &parsed{Skip: skipGenerated}, nil
	}
	defs, err := extract(ctx, ps, g, data)
	if err != nil {
		return nil, err
	}
	return &parsed{Defs: defs, Refs: identifiers(data)}, nil
}

// vendored reports a path inside a directory of third-party code.
func vendored(p string) bool {
	for _, dir := range strings.Split(path.Dir(p), "/") {
		switch dir {
		case "vendor", "node_modules", "third_party", "thirdparty", "bower_components":
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
func binary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// generated reports the markers code generators write near the top of a
// file: Go's "Code generated ... DO NOT EDIT." and the "@generated" tag
// other tools use.
func generated(data []byte) bool {
	head := data[:min(len(data), 2048)]
	if i := bytes.Index(head, []byte("Code generated ")); i >= 0 && bytes.Contains(head[i:], []byte("DO NOT EDIT")) {
		return true
	}
	return bytes.Contains(head, []byte("@generated"))
}

// identifiers counts the identifier-like words of src, sorted by name.
// It is lexical on purpose: comments and strings that name a definition
// count as using it, which suits ranking, and it costs no tree walk.
func identifiers(src []byte) []Ref {
	counts := map[string]int{}
	for i := 0; i < len(src); {
		c := src[i]
		if c >= '0' && c <= '9' { // a number, 0x1F included
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

func identStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
