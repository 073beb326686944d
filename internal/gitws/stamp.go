package gitws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A stamp tells, without running git, that git's index or refs cannot have
// changed since a snapshot, so that Rollback may skip asking git. It is a
// hash of the inode, size, mtime and ctime of the files and directories git
// writes them to: git replaces them by renaming a lock file into place,
// which changes the directory's ctime, and no command can set a ctime back
// (a command can set an mtime). "" means unknown: ask git.

// indexStamp stamps the index of this work tree.
func (r *Repo) indexStamp() string {
	return stampPaths([]string{filepath.Join(r.GitDir, "index")}, nil)
}

// refsStamp stamps the refs: packed-refs, and every directory under refs/
// (and reftable/, for that format).
func (r *Repo) refsStamp() string {
	c := r.CommonDir
	return stampPaths([]string{filepath.Join(c, "packed-refs")}, []string{filepath.Join(c, "refs"), filepath.Join(c, "reftable")})
}

// stampPaths hashes the stat data of files and, recursively, of the
// directories in trees (their subdirectories, and files for reftable whose
// tables.list is rewritten in place). Missing paths are stamped as missing.
func stampPaths(files, trees []string) string {
	var b strings.Builder
	add := func(p string) (os.FileInfo, bool) {
		info, err := os.Lstat(p)
		if os.IsNotExist(err) {
			fmt.Fprintf(&b, "%q -\n", p)
			return nil, true
		}
		if err != nil {
			return nil, false
		}
		line, ok := statLine(info)
		if !ok {
			return nil, false
		}
		fmt.Fprintf(&b, "%q %s\n", p, line)
		return info, true
	}
	for _, p := range files {
		if _, ok := add(p); !ok {
			return ""
		}
	}
	var walk func(dir string) bool
	walk = func(dir string) bool {
		info, ok := add(dir)
		if !ok {
			return false
		}
		if info == nil || !info.IsDir() {
			return true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if e.IsDir() {
				if !walk(p) {
					return false
				}
			} else if strings.HasSuffix(dir, "reftable") {
				if _, ok := add(p); !ok {
					return false
				}
			}
		}
		return true
	}
	for _, t := range trees {
		if !walk(t) {
			return ""
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
