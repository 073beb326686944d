package gitws

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The index file, read without git (gitformat-index(5)), so that Preflight
// can tell a clean tree from the baseline walk's stat data instead of a
// `git status` that stats every file a second time. Only what that needs
// is read; anything unusual (a split or sparse index, a version or a
// required extension this code does not know, a bad checksum) is an error,
// and the caller asks git instead.

// indexEntry is one entry of the index: the stat data git recorded for the
// file (each field truncated to 32 bits, as git stores it), its mode and
// flags, and its path.
type indexEntry struct {
	stat     statData
	mode     uint32
	flags    uint16 // assume-valid 0x8000, stage 0x3000 (not the layout bits)
	extFlags uint16 // skip-worktree 0x4000, intent-to-add 0x2000 (version 3 and later)
	path     string
}

// statData is the stat data git keeps for an index entry.
type statData struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec uint32
	dev, ino, uid, gid, size                 uint32
}

const (
	entryAssumeValid  = 0x8000
	entryExtended     = 0x4000
	entryStage        = 0x3000
	entryNameMask     = 0x0fff
	entrySkipWorktree = 0x4000
	entryIntentToAdd  = 0x2000
)

// gitIndex is a parsed index.
type gitIndex struct {
	version int
	entries []indexEntry
	// tree is the root of the cache-tree extension (the tree the index
	// would write, as hex) when that extension is present and valid for the
	// whole index, else "".
	tree string
}

// parseIndex parses an index file whose object ids are hashLen bytes long
// (20 for SHA-1, 32 for SHA-256).
func parseIndex(data []byte, hashLen int) (*gitIndex, error) {
	if hashLen != sha1.Size && hashLen != sha256.Size {
		return nil, fmt.Errorf("object ids of %d bytes", hashLen)
	}
	if len(data) < 12+hashLen {
		return nil, errors.New("index file too short")
	}
	if string(data[:4]) != "DIRC" {
		return nil, errors.New("not an index file (no DIRC signature)")
	}
	body, sum := data[:len(data)-hashLen], data[len(data)-hashLen:]
	// index.skipHash writes zeros instead of the checksum.
	if !allZero(sum) {
		var h hash.Hash = sha1.New()
		if hashLen == sha256.Size {
			h = sha256.New()
		}
		h.Write(body)
		if !bytes.Equal(h.Sum(nil), sum) {
			return nil, errors.New("index checksum mismatch")
		}
	}
	idx := &gitIndex{version: int(binary.BigEndian.Uint32(body[4:8]))}
	if idx.version < 2 || idx.version > 4 {
		return nil, fmt.Errorf("index version %d", idx.version)
	}
	count := binary.BigEndian.Uint32(body[8:12])
	// An entry takes at least its fixed part and one byte of path: a count
	// the file cannot hold is refused before anything is allocated for it.
	fixed := 40 + hashLen + 2
	if uint64(count) > uint64(len(body)-12)/uint64(fixed+1) {
		return nil, fmt.Errorf("index claims %d entries in %d bytes", count, len(body))
	}
	idx.entries = make([]indexEntry, 0, count)
	rest := body[12:]
	var prev string
	for i := range int(count) {
		if len(rest) < fixed {
			return nil, fmt.Errorf("entry %d: truncated", i)
		}
		var e indexEntry
		f := func(k int) uint32 { return binary.BigEndian.Uint32(rest[4*k:]) }
		e.stat = statData{ctimeSec: f(0), ctimeNsec: f(1), mtimeSec: f(2), mtimeNsec: f(3),
			dev: f(4), ino: f(5), uid: f(7), gid: f(8), size: f(9)}
		e.mode = f(6)
		e.flags = binary.BigEndian.Uint16(rest[40+hashLen:])
		n := fixed
		if e.flags&entryExtended != 0 {
			if idx.version < 3 {
				return nil, fmt.Errorf("entry %d: extended flags in a version %d index", i, idx.version)
			}
			if len(rest) < n+2 {
				return nil, fmt.Errorf("entry %d: truncated", i)
			}
			e.extFlags = binary.BigEndian.Uint16(rest[n:])
			if e.extFlags&^(entrySkipWorktree|entryIntentToAdd) != 0 {
				// git dies on an index with flags it does not know.
				return nil, fmt.Errorf("entry %d: unknown extended flags %#04x", i, e.extFlags)
			}
			n += 2
		}
		var err error
		if idx.version == 4 {
			e.path, n, err = v4Path(rest, n, prev)
		} else {
			e.path, n, err = paddedPath(rest, n)
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if nl := int(e.flags & entryNameMask); nl != entryNameMask && nl != len(e.path) {
			return nil, fmt.Errorf("entry %d: name length %d for a path of %d bytes", i, nl, len(e.path))
		}
		// Keep what the flags say of the entry, not how it is laid out: the
		// name length is the path's (git also reads 0xFFF, "see the path",
		// for a short one) and the extended bit only says extFlags follow.
		e.flags &^= entryNameMask | entryExtended
		if !validIndexPath(e.path) {
			return nil, fmt.Errorf("entry %d: invalid path %q", i, e.path)
		}
		// Sorted by path, then stage: git refuses an index that is not.
		if i > 0 {
			last := idx.entries[i-1]
			if e.path < last.path || e.path == last.path && e.flags&entryStage <= last.flags&entryStage {
				return nil, fmt.Errorf("entry %d: %q out of order", i, e.path)
			}
		}
		idx.entries = append(idx.entries, e)
		prev = e.path
		rest = rest[n:]
	}
	for len(rest) > 0 {
		if len(rest) < 8 {
			return nil, errors.New("truncated extension header")
		}
		sig, size := rest[:4], binary.BigEndian.Uint32(rest[4:8])
		if uint64(size) > uint64(len(rest)-8) {
			return nil, fmt.Errorf("extension %q: truncated", sig)
		}
		ext := rest[8 : 8+size]
		switch {
		case string(sig) == "TREE":
			tree, err := cacheTreeRoot(ext, hashLen, len(idx.entries))
			if err != nil {
				return nil, fmt.Errorf("extension TREE: %w", err)
			}
			idx.tree = tree
		case sig[0] < 'A' || sig[0] > 'Z':
			// Required to understand the index: a split index ("link") or a
			// sparse one ("sdir"), among others.
			return nil, fmt.Errorf("extension %q is not supported", sig)
		}
		rest = rest[8+size:]
	}
	return idx, nil
}

// paddedPath reads the NUL-terminated path of a version 2 or 3 entry at
// rest[n:], and returns it with the length of the whole entry, which NULs
// pad to a multiple of 8 bytes.
func paddedPath(rest []byte, n int) (string, int, error) {
	end := bytes.IndexByte(rest[n:], 0)
	if end < 0 {
		return "", 0, errors.New("unterminated path")
	}
	path := string(rest[n : n+end])
	total := (n + end + 8) &^ 7
	if total > len(rest) || !allZero(rest[n+end:total]) {
		return "", 0, errors.New("bad padding")
	}
	return path, total, nil
}

// v4Path reads the prefix-compressed path of a version 4 entry at rest[n:]:
// how many bytes to drop from the end of the previous path (a varint),
// then the NUL-terminated rest. There is no padding.
func v4Path(rest []byte, n int, prev string) (string, int, error) {
	drop, used, ok := indexVarint(rest[n:])
	if !ok {
		return "", 0, errors.New("bad path prefix length")
	}
	n += used
	if drop > uint64(len(prev)) {
		return "", 0, errors.New("path prefix longer than the previous path")
	}
	end := bytes.IndexByte(rest[n:], 0)
	if end < 0 {
		return "", 0, errors.New("unterminated path")
	}
	return prev[:len(prev)-int(drop)] + string(rest[n:n+end]), n + end + 1, nil
}

// indexVarint decodes git's offset varint (varint.c): seven bits a byte,
// most significant first, each continuation adding one.
func indexVarint(b []byte) (uint64, int, bool) {
	var v uint64
	for i, c := range b {
		if i == 9 {
			break
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1, true
		}
		v++
	}
	return 0, 0, false
}

// cacheTreeRoot returns the root tree of a cache-tree extension as hex, or
// "" when it is invalidated or does not cover all entries entries.
func cacheTreeRoot(ext []byte, hashLen, entries int) (string, error) {
	nul := bytes.IndexByte(ext, 0)
	if nul != 0 {
		return "", errors.New("the first entry is not the root")
	}
	nl := bytes.IndexByte(ext, '\n')
	if nl < 0 {
		return "", errors.New("truncated")
	}
	countText, _, ok := bytes.Cut(ext[1:nl], []byte(" "))
	if !ok {
		return "", errors.New("malformed root entry")
	}
	if string(countText) == "-1" {
		return "", nil
	}
	var count int
	if _, err := fmt.Sscanf(string(countText), "%d", &count); err != nil || count < 0 {
		return "", errors.New("malformed root entry count")
	}
	if len(ext) < nl+1+hashLen {
		return "", errors.New("truncated")
	}
	if count != entries {
		return "", nil
	}
	return hex.EncodeToString(ext[nl+1 : nl+1+hashLen]), nil
}

// validIndexPath reports whether p is a path git could have written to an
// index: relative, slash-separated, no empty, "." or ".." component.
func validIndexPath(p string) bool {
	if p == "" {
		return false
	}
	for rest := p; ; {
		c, after, more := strings.Cut(rest, "/")
		if c == "" || c == "." || c == ".." {
			return false
		}
		if !more {
			return true
		}
		rest = after
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walkedFile is a regular file or symlink the baseline walk saw, with its
// stat data as git would record it and its full st_mode.
type walkedFile struct {
	path string
	stat statData
	mode uint32
}

// maxSuspects bounds the tracked files whose stat data differ from the
// index that DirtyAt has git compare by content; more, and it runs `git
// status` as Dirty does.
const maxSuspects = 64

// DirtyAt is Dirty for the tree b was just snapshotted from, using the stat
// data b's walk recorded so that no file is stated twice: a clean tree is
// one whose index matches HEAD (its cache tree says so), whose tracked
// files all have the stat data the index recorded for them (those that do
// not are compared by content, by git) and which holds no file that is
// neither tracked nor ignored. Whatever it cannot prove clean that way (an
// index this package does not read, an untracked file, a deleted one,
// unmerged entries...) it hands to Dirty, which also makes the list. It
// consumes b's stat data: call it once, before the tree changes.
func (r *Repo) DirtyAt(ctx context.Context, b *Baseline) ([]string, error) {
	files := b.walked
	b.walked = nil
	if files != nil {
		if r.provablyClean(ctx, *b, files) {
			return nil, nil
		}
	}
	return r.Dirty(ctx)
}

// provablyClean is DirtyAt's check; false means "ask git status".
func (r *Repo) provablyClean(ctx context.Context, b Baseline, files []walkedFile) bool {
	idx, info, err := r.readIndex(b.Commit)
	if err != nil || idx.tree == "" {
		return false
	}
	tracked := make(map[string]int, len(idx.entries))
	for i, e := range idx.entries {
		if e.special() {
			return false
		}
		tracked[e.path] = i
	}
	var suspects []string
	seen := 0
	for _, w := range files {
		i, ok := tracked[w.path]
		if !ok {
			if b.keeps(w.path) {
				continue
			}
			return false // untracked, not ignored
		}
		seen++
		e := idx.entries[i]
		if !e.unchanged(w, info.ModTime()) {
			if suspects = append(suspects, e.path); len(suspects) > maxSuspects {
				return false
			}
		}
	}
	if seen != len(idx.entries) {
		return false // deleted, or not a file or symlink now
	}
	if b.tree == "" || b.tree != idx.tree {
		return false // staged changes, or an index git's own commands must judge
	}
	if len(suspects) == 0 {
		return true
	}
	// Content equal despite new stat data (a file rewritten as it was, or
	// one written just before the index) is for git to judge: `git diff`
	// compares content where stat data differ (diff-files would not), and
	// writes nothing with GIT_OPTIONAL_LOCKS=0. Exit status 1 means a
	// difference.
	_, err = r.query(ctx, append([]string{"--literal-pathspecs", "diff", "--quiet", "--no-ext-diff", "--no-textconv", "--"}, suspects...)...)
	return err == nil
}

// readIndex reads and parses the index of this work tree, whose object
// ids are as long as head's, and returns it with the file's stat data. The
// result is shared: callers must not change it.
func (r *Repo) readIndex(head string) (*gitIndex, os.FileInfo, error) {
	if !isHexHash(head) {
		return nil, nil, errors.New("no commit to tell the object id length")
	}
	f, err := os.Open(filepath.Join(r.GitDir, "index"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	stamp, stamped := statLine(info)
	if idx := r.index.get(stamp, len(head)); stamped && idx != nil {
		return idx, info, nil
	}
	data := make([]byte, info.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	idx, err := parseIndex(data, len(head)/2)
	if err == nil && stamped {
		r.index.put(stamp, len(head), idx)
	}
	return idx, info, err
}

// indexCache keeps the last index parsed, by the stamp (stat.go) of the
// file it was read from: a Preflight reads it three times, a rollback once
// more, and a 10,000-entry index takes milliseconds to check and parse. Git
// replaces the file by a rename (a new inode) and any write in place
// changes its ctime, which no command can set back.
type indexCache struct {
	mu      sync.Mutex
	stamp   string
	hashLen int
	idx     *gitIndex
}

func (c *indexCache) get(stamp string, hashLen int) *gitIndex {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp != stamp || c.hashLen != hashLen {
		return nil
	}
	return c.idx
}

func (c *indexCache) put(stamp string, hashLen int, idx *gitIndex) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp, c.hashLen, c.idx = stamp, hashLen, idx
}

// special reports whether git treats e apart from a plain staged file:
// assume-unchanged, a conflict stage, skip-worktree or intent-to-add.
func (e *indexEntry) special() bool {
	return e.flags&(entryAssumeValid|entryStage) != 0 || e.extFlags&(entrySkipWorktree|entryIntentToAdd) != 0
}

// unchanged reports whether w, a file or symlink at e's path, is provably
// what e records: the same stat data and type, and not racily clean
// (gitformat-index, "racy git": written no earlier than the index, modified
// at idxMtime, so equal stat data prove nothing).
func (e *indexEntry) unchanged(w walkedFile, idxMtime time.Time) bool {
	// git stores the index's own mtime as seconds and nanoseconds too.
	idxSec, idxNsec := uint32(idxMtime.Unix()), uint32(idxMtime.Nanosecond())
	racy := w.stat.mtimeSec > idxSec || w.stat.mtimeSec == idxSec && w.stat.mtimeNsec >= idxNsec
	return !racy && w.stat == e.stat && e.mode == ceMode(w.mode)
}

// ceMode is the index mode git gives a file of st_mode mode: a regular
// file is 0100755 when its owner may execute it, else 0100644.
func ceMode(mode uint32) uint32 {
	switch mode & 0o170000 {
	case 0o120000:
		return 0o120000
	case 0o100000:
		if mode&0o100 != 0 {
			return 0o100755
		}
		return 0o100644
	}
	return 0
}
