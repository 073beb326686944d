package repomap

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/artifact"
)

// extractVersion names the extraction rules; a cache written under other
// rules is ignored. 3: a signature is made valid UTF-8 before it is cut;
// "generated ... do not edit" on one line marks a generated file.
const extractVersion = 3

const (
	cacheFile = "parsed.bin"
	// oldCacheFile is where releases before the compact form kept the
	// cache (encoding/gob, several times slower to read); removed when the
	// new one is written.
	oldCacheFile = "defs.gob"
	cacheMagic   = "factory repomap parse cache 1\n"
)

// cache holds parsed blobs by cacheKey, read from and written to one file
// in dir: one read on a run that misses the snapshot rather than one per
// source file.
type cache struct {
	dir     string
	entries map[string]*parsed
	changed bool
}

func cacheKey(g *grammar, blob string) string { return g.name + " " + blob }

// loadCache reads the cache of dir; a missing, unreadable or outdated file
// is an empty cache (it only costs a parse), a directory that cannot be
// read an error.
func loadCache(dir string) (*cache, error) {
	c := &cache{dir: dir, entries: map[string]*parsed{}}
	if dir == "" {
		return c, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, cacheFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the repository map cache: %w", err)
	}
	if entries, err := decodeCache(data); err == nil {
		c.entries = entries
	}
	return c, nil
}

func (c *cache) get(k string) (*parsed, bool) {
	p, ok := c.entries[k]
	return p, ok
}

func (c *cache) put(k string, p *parsed) {
	c.entries[k] = p
	c.changed = true
}

// save writes the cache back when it changed. Entries this run did not use
// are kept (another branch may need them) until they outnumber the used
// ones, then dropped: the file stays within twice the tree's size.
func (c *cache) save(used map[string]*parsed) error {
	if c.dir == "" {
		return nil
	}
	if len(c.entries) > 2*len(used)+64 {
		c.entries, c.changed = used, true
	}
	if !c.changed {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("create the repository map cache directory: %w", err)
	}
	// A cache: losing it in a crash costs a parse, so no fsync.
	if err := artifact.ReplaceFile(filepath.Join(c.dir, cacheFile), encodeCache(c.entries), 0o644); err != nil {
		return fmt.Errorf("write the repository map cache: %w", err)
	}
	_ = os.Remove(filepath.Join(c.dir, oldCacheFile))
	return nil
}

var skipCodes = []string{"", skipGenerated, skipBinary}

// encodeCache writes entries in the compact form (codec.go), by key so
// that the same entries make the same bytes.
func encodeCache(entries map[string]*parsed) []byte {
	e := newEncoder()
	e.uint(extractVersion)
	e.uint(uint64(len(entries)))
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		p := entries[k]
		e.str(k)
		e.uint(uint64(max(0, slices.Index(skipCodes, p.Skip))))
		e.uint(uint64(len(p.Defs)))
		for _, d := range p.Defs {
			e.str(d.Name)
			e.str(d.Parent)
			e.str(d.Kind)
			e.uint(uint64(d.Line))
			e.uint(uint64(d.Depth))
			e.str(d.Sig)
		}
		e.uint(uint64(len(p.Refs)))
		for _, r := range p.Refs {
			e.str(r.Name)
			e.uint(uint64(r.Count))
		}
	}
	return e.file(cacheMagic)
}

func decodeCache(data []byte) (map[string]*parsed, error) {
	d, err := newDecoder(data, cacheMagic)
	if err != nil {
		return nil, err
	}
	if d.uint() != extractVersion {
		return nil, errors.New("written under other extraction rules")
	}
	limit := len(data) + 1
	n := d.int(limit)
	if d.bad {
		return nil, errCorrupt
	}
	entries := make(map[string]*parsed, n)
	for range n {
		k := d.str()
		p := &parsed{Skip: skipCodes[d.int(len(skipCodes))]}
		ndefs := d.int(limit)
		if d.bad {
			return nil, errCorrupt
		}
		if ndefs > 0 {
			p.Defs = make([]Def, ndefs)
		}
		for i := range p.Defs {
			p.Defs[i] = Def{Name: d.str(), Parent: d.str(), Kind: d.str(), Line: d.int(1 << 31), Depth: d.int(maxSnapshotDepth), Sig: d.str()}
			if p.Defs[i].Name == "" {
				d.bad = true
			}
		}
		nrefs := d.int(limit)
		if d.bad {
			return nil, errCorrupt
		}
		if nrefs > 0 || p.Skip == "" {
			p.Refs = make([]Ref, nrefs)
		}
		for i := range p.Refs {
			p.Refs[i] = Ref{Name: d.str(), Count: d.int(1 << 31)}
			if i > 0 && strings.Compare(p.Refs[i-1].Name, p.Refs[i].Name) >= 0 {
				d.bad = true
			}
		}
		if d.bad {
			return nil, errCorrupt
		}
		entries[k] = p
	}
	if !d.done() {
		return nil, errCorrupt
	}
	return entries, nil
}
