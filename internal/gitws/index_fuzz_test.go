package gitws

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// FuzzParseIndex feeds parseIndex real index files (versions 2, 3 and 4,
// split, SHA-256) and mutations of them, with the checksum as mutated or
// made to match. An index that parses must hold
// what git's format allows (as many entries as its header says, sorted,
// valid paths), parse the same twice, and come back the same when written
// out again by encodeIndex and parsed once more.
func FuzzParseIndex(f *testing.F) {
	isolateGit(f)
	dir := f.TempDir()
	git(f, dir, "init", "-q")
	for _, p := range []string{"README.md", "src/app.py", "src/pkg/util.py", "with space", "ünï"} {
		writeFile(f, dir, p, p)
	}
	git(f, dir, "add", "-A")
	git(f, dir, "commit", "-q", "-m", "init")
	add := func() {
		data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false, false)
		f.Add(data, false, true)
	}
	add()
	git(f, dir, "update-index", "--skip-worktree", "src/app.py") // version 3
	add()
	git(f, dir, "update-index", "--index-version", "4")
	add()
	git(f, dir, "update-index", "--no-skip-worktree", "src/app.py")
	git(f, dir, "update-index", "--index-version", "2", "--split-index")
	add()
	root := f.TempDir()
	if _, err := gitOutput(root, "init", "-q", "--object-format=sha256"); err == nil {
		writeFile(f, root, "a/b.txt", "x")
		git(f, root, "add", "-A")
		data, err := os.ReadFile(filepath.Join(root, ".git", "index"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true, false)
		f.Add(data, true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, sha256Ids, fixSum bool) {
		hashLen := sha1.Size
		if sha256Ids {
			hashLen = sha256.Size
		}
		// With fixSum, the trailer is made to match, so that mutations
		// reach the parser past the checksum.
		if fixSum && len(data) >= hashLen {
			data = withChecksum(data[:len(data)-hashLen], hashLen)
		}
		idx, err := parseIndex(data, hashLen)
		if err != nil {
			if idx != nil {
				t.Fatal("an index with an error")
			}
			return
		}
		if got := binary.BigEndian.Uint32(data[8:12]); int(got) != len(idx.entries) {
			t.Fatalf("%d entries, header says %d", len(idx.entries), got)
		}
		for i, e := range idx.entries {
			if !validIndexPath(e.path) {
				t.Fatalf("entry %d: invalid path %q", i, e.path)
			}
			if e.flags&^(entryAssumeValid|entryStage) != 0 || e.extFlags&^(entrySkipWorktree|entryIntentToAdd) != 0 {
				t.Fatalf("entry %d: flags %#04x, extended %#04x: more than git reads", i, e.flags, e.extFlags)
			}
			if i > 0 && idx.entries[i-1].path > e.path {
				t.Fatalf("entry %d: %q after %q", i, e.path, idx.entries[i-1].path)
			}
		}
		if idx.tree != "" && len(idx.tree) != 2*hashLen {
			t.Fatalf("tree %q for %d-byte ids", idx.tree, hashLen)
		}
		again, err := parseIndex(data, hashLen)
		if err != nil || !reflect.DeepEqual(idx, again) {
			t.Fatalf("parsed differently the second time: %v", err)
		}
		enc := encodeIndex(idx, hashLen)
		round, err := parseIndex(enc, hashLen)
		if err != nil {
			t.Fatalf("re-encoded index does not parse: %v", err)
		}
		idx.version = round.version // the encoder writes version 2 or 3
		if !reflect.DeepEqual(idx, round) {
			t.Fatalf("round trip changed the index:\n%+v\n%+v", idx, round)
		}
	})
}

// encodeIndex writes idx as a version 2 index (3 if an entry has extended
// flags), with a cache-tree root when idx has one and zero object ids.
func encodeIndex(idx *gitIndex, hashLen int) []byte {
	version := uint32(2)
	for _, e := range idx.entries {
		if e.extFlags != 0 {
			version = 3
		}
	}
	b := []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(idx.entries)))
	for _, e := range idx.entries {
		start := len(b)
		s := e.stat
		for _, v := range []uint32{s.ctimeSec, s.ctimeNsec, s.mtimeSec, s.mtimeNsec, s.dev, s.ino, e.mode, s.uid, s.gid, s.size} {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		b = append(b, make([]byte, hashLen)...)
		flags := e.flags | uint16(min(len(e.path), entryNameMask))
		if e.extFlags != 0 {
			flags |= entryExtended
		}
		b = binary.BigEndian.AppendUint16(b, flags)
		if e.extFlags != 0 {
			b = binary.BigEndian.AppendUint16(b, e.extFlags)
		}
		b = append(b, e.path...)
		b = append(b, make([]byte, (len(b)-start+8)&^7-(len(b)-start))...)
	}
	if idx.tree != "" {
		oid, _ := hex.DecodeString(idx.tree)
		ext := append([]byte("\x00"+strconv.Itoa(len(idx.entries))+" 0\n"), oid...)
		b = append(b, "TREE"...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(ext)))
		b = append(b, ext...)
	}
	return withChecksum(b, hashLen)
}

// withChecksum returns body followed by its checksum, as git writes it.
func withChecksum(body []byte, hashLen int) []byte {
	out := append([]byte(nil), body...)
	if hashLen == sha256.Size {
		sum := sha256.Sum256(body)
		return append(out, sum[:]...)
	}
	sum := sha1.Sum(body)
	return append(out, sum[:]...)
}
