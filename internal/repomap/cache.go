package repomap

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/artifact"
)

// extractVersion names the extraction rules; a cache written under other
// rules is ignored.
const extractVersion = 2

const cacheFile = "defs.gob"

// cache holds parsed blobs by cacheKey, read from and written to one file
// in dir: one read on a warm run rather than one per source file.
type cache struct {
	dir     string
	entries map[string]*parsed
	changed bool
}

type cacheFileData struct {
	Version int
	Entries map[string]*parsed
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
	var f cacheFileData
	if gob.NewDecoder(bytes.NewReader(data)).Decode(&f) == nil && f.Version == extractVersion && f.Entries != nil {
		c.entries = f.Entries
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
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(cacheFileData{Version: extractVersion, Entries: c.entries}); err != nil {
		return fmt.Errorf("encode the repository map cache: %w", err)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("create the repository map cache directory: %w", err)
	}
	// A cache: losing it in a crash costs a parse, so no fsync.
	if err := artifact.ReplaceFile(filepath.Join(c.dir, cacheFile), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the repository map cache: %w", err)
	}
	return nil
}
