package repomap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
)

// A snapshot is a whole Map, its index included, saved under a key that
// names one tree for good (a commit id): a later map of the same tree
// reads this one file, ranks for its task and renders, without listing or
// reading the tree or decoding a cache entry per file.

const (
	snapshotDir   = "maps"
	snapshotMagic = "factory repomap snapshot 1\n"
	// snapshotsKept bounds the snapshots in a cache directory: the newest
	// used are kept (a hit refreshes the file's time).
	snapshotsKept = 8
	// maxSnapshotDepth bounds a definition's depth read from a file.
	maxSnapshotDepth = 64
)

// snapshotName is the file of key, "" for a key that is not a plain name
// of letters and digits (a commit id is).
func snapshotName(dir, key string) string {
	if dir == "" || key == "" || len(key) > 128 || strings.ContainsFunc(key, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return ""
	}
	return filepath.Join(dir, snapshotDir, key)
}

// rules are what a map depends on besides the tree: a snapshot made under
// other rules is not used.
func rules(o Options) [3]uint64 {
	avail := uint64(0)
	if Available {
		avail = 1
	}
	return [3]uint64{extractVersion, uint64(maxBytes(o)), avail}
}

// LoadSnapshot returns the map saved under key in o.CacheDir by
// SaveSnapshot with the same options, or nil when there is none or it
// cannot be used (unreadable, corrupt, made under other rules): then the
// caller builds the map. Its Cached counts what the map was built from;
// Parsed is 0.
func LoadSnapshot(o Options, key string) *Map {
	name := snapshotName(o.CacheDir, key)
	if name == "" {
		return nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	m, err := decodeSnapshot(data, rules(o))
	if err != nil {
		return nil
	}
	// Mark it used, for pruning; a cache directory that cannot be written
	// to only costs the order of pruning.
	now := time.Now()
	_ = os.Chtimes(name, now, now)
	return m
}

// SaveSnapshot keeps m, built by Build with o, under key in o.CacheDir
// (nothing without one) and prunes the snapshots there to the newest few.
func (m *Map) SaveSnapshot(o Options, key string) error {
	name := snapshotName(o.CacheDir, key)
	if name == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("create the repository map snapshot directory: %w", err)
	}
	// A cache: losing it in a crash costs a build from the parse cache, so
	// no fsync; a torn file fails its checksum.
	if err := artifact.ReplaceFile(name, m.encodeSnapshot(rules(o)), 0o644); err != nil {
		return fmt.Errorf("write the repository map snapshot: %w", err)
	}
	pruneSnapshots(filepath.Dir(name), snapshotsKept)
	return nil
}

// pruneSnapshots removes all but the keep most recently used snapshots
// of dir. Another process may be pruning or writing too: whatever it
// removes first is not an error.
func pruneSnapshots(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) <= keep {
		return
	}
	type snap struct {
		name string
		used time.Time
	}
	var snaps []snap
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			snaps = append(snaps, snap{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(snaps, func(a, b snap) int { return b.used.Compare(a.used) })
	for _, s := range snaps[min(keep, len(snaps)):] {
		if err := os.Remove(filepath.Join(dir, s.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}

func (m *Map) encodeSnapshot(r [3]uint64) []byte {
	ix := m.index()
	e := newEncoder()
	for _, name := range ix.names { // ids 0..len(names)-1: a name's id is its index
		e.intern(name)
	}
	for _, v := range r {
		e.uint(v)
	}
	e.uint(uint64(len(ix.names)))
	s := m.Skipped
	for _, v := range []int{s.Huge, s.Generated, s.Vendored, s.Binary, m.Parsed + m.Cached, len(m.Files), len(ix.defName), len(ix.refs)} {
		e.uint(uint64(v))
	}
	for i, f := range m.Files {
		e.str(f.Path)
		e.str(f.Lang)
		e.uint(uint64(len(f.Defs)))
		for g, d := range f.Defs {
			e.uint(uint64(ix.defName[int(ix.defStart[i])+g]))
			e.str(d.Parent)
			e.str(d.Kind)
			e.uint(uint64(d.Line))
			e.uint(uint64(d.Depth))
			e.str(d.Sig)
		}
		refs := ix.refs[ix.refStart[i]:ix.refStart[i+1]]
		e.uint(uint64(len(refs)))
		prev := int32(-1)
		for _, r := range refs {
			e.uint(uint64(r.name - prev - 1)) // ascending: the gap
			e.uint(uint64(r.count))
			prev = r.name
		}
	}
	return e.file(snapshotMagic)
}

func decodeSnapshot(data []byte, r [3]uint64) (*Map, error) {
	d, err := newDecoder(data, snapshotMagic)
	if err != nil {
		return nil, err
	}
	for _, v := range r {
		if d.uint() != v {
			return nil, errors.New("made under other rules")
		}
	}
	nn := d.int(len(d.strs) + 1)
	names := d.strs[:nn]
	if !sortedStrings(names) || nn > 0 && names[0] == "" {
		return nil, errCorrupt
	}
	m := &Map{}
	limit := len(data) + 1 // no count can exceed the file's size
	m.Skipped = Skipped{Huge: d.int(limit), Generated: d.int(limit), Vendored: d.int(limit), Binary: d.int(limit)}
	m.Cached = d.int(limit)
	nfiles, ndefs, nrefs := d.int(limit), d.int(limit), d.int(limit)
	if d.bad {
		return nil, errCorrupt
	}
	// One array each for all definitions and uses, made at their size.
	m.Files = make([]File, nfiles)
	defs := make([]Def, 0, ndefs)
	ix := &index{names: names, defStart: make([]int32, nfiles+1), refStart: make([]int32, nfiles+1),
		defName: make([]int32, 0, ndefs), refs: make([]nameCount, 0, nrefs)}
	for i := range m.Files {
		f := &m.Files[i]
		f.Path, f.Lang = d.str(), d.str()
		if i > 0 && strings.Compare(m.Files[i-1].Path, f.Path) >= 0 {
			return nil, errCorrupt
		}
		n := d.int(ndefs - len(defs) + 1)
		if d.bad {
			return nil, errCorrupt
		}
		for range n {
			k := d.int(nn)
			ix.defName = append(ix.defName, int32(k))
			defs = append(defs, Def{Name: names[k], Parent: d.str(), Kind: d.str(), Line: d.int(1 << 31), Depth: d.int(maxSnapshotDepth), Sig: d.str()})
		}
		if n > 0 {
			f.Defs = defs[len(defs)-n : len(defs) : len(defs)]
		}
		ix.defStart[i+1] = int32(len(ix.defName))
		n = d.int(nrefs - len(ix.refs) + 1)
		prev := -1
		for range n {
			k := prev + 1 + d.int(nn-prev)
			if k >= nn || d.bad {
				return nil, errCorrupt
			}
			ix.refs = append(ix.refs, nameCount{int32(k), int32(d.int(1 << 31))})
			prev = k
		}
		ix.refStart[i+1] = int32(len(ix.refs))
		if d.bad {
			return nil, errCorrupt
		}
	}
	if !d.done() || len(defs) != ndefs || len(ix.refs) != nrefs {
		return nil, errCorrupt
	}
	ix.derive(m.Files)
	m.ix = ix
	return m, nil
}
