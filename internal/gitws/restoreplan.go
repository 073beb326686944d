package gitws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path"
	"slices"
	"syscall"
)

// treeChanges is what changed in a work tree since its snapshot, against
// an index that held every tracked file as it was then, found without `git
// reset --hard` or `git status` (each stats every tracked file in one
// process, and reset rewrites the index) and without `git ls-files
// --others` (which reads every directory).
//
// Tracked files are judged by stat data, as git judges them: a tracked file
// whose inode, size, times, owner and type are those the index recorded
// cannot have changed (a command cannot set a ctime back), however it was
// written — even through a hard link whose other name no watch saw.
//
// Untracked files come from the watch. A name appears in a directory only
// through an operation on that directory (create, link, symlink, mknod,
// rename), which inotify reports to the directory's watch; every directory
// of the tree is watched from the snapshot on, and a directory created or
// moved in since is read whole here. Whenever that record may be incomplete
// (events lost, a watched directory moved, more directories than watched,
// no inotify) there is no treeChanges and the caller asks git as before.
type treeChanges struct {
	stale     []string // tracked paths whose file changed, was replaced or deleted
	untracked []string // untracked files and symlinks present, sorted
	tracked   []string // every tracked path, sorted
}

// planRestore returns what Rollback to b must restore, or false where git
// must do it: no snapshot state, the index or the refs changed since, or
// what changesSince refuses.
func (r *Repo) planRestore(b Baseline) (treeChanges, bool) {
	st := b.state
	if st == nil || st.indexStamp == "" || st.refsStamp == "" || b.tree == "" ||
		r.indexStamp() != st.indexStamp || r.refsStamp() != st.refsStamp {
		return treeChanges{}, false
	}
	// The index is the snapshot's, which Preflight found clean; its cache
	// tree being the baseline's says that no entry is staged.
	return r.changesSince(b, b.tree)
}

// changesSince returns what changed since b's snapshot against the
// repository's index, whose cache tree must be tree, or false where git must judge: no complete watch, an index this
// package does not read or with entries git treats specially (submodules,
// skip-worktree, assume-unchanged, conflicts), a tracked path now a
// directory or below something that is no longer a plain directory, a new
// nested repository.
func (r *Repo) changesSince(b Baseline, tree string) (treeChanges, bool) {
	changed, ok := b.watch.paths()
	if !ok {
		return treeChanges{}, false
	}
	idx, info, err := r.readIndex(b.Commit)
	if err != nil || idx.tree == "" || idx.tree != tree {
		return treeChanges{}, false
	}
	c := treeChanges{tracked: make([]string, len(idx.entries))}
	for i, e := range idx.entries {
		if e.special() || e.mode == 0o160000 {
			return treeChanges{}, false
		}
		c.tracked[i] = e.path
	}
	if c.stale, ok = staleEntries(r.Root, idx, info.ModTime()); !ok {
		return treeChanges{}, false
	}
	isTracked := func(p string) bool {
		_, found := slices.BinarySearch(c.tracked, p)
		return found
	}
	for _, p := range slices.Sorted(maps.Keys(changed)) {
		if p == ".git" {
			continue // the repository's own; restoreMeta deals with it
		}
		if path.Base(p) == ".git" {
			return treeChanges{}, false // a nested repository: git's rules decide what is in it
		}
		if isTracked(p) {
			continue // judged by its stat data
		}
		info, err := os.Lstat(r.abs(p))
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), err == nil && info.IsDir() && !changed[p]:
			continue // gone, or a directory only chmod'ed
		case err != nil, !r.underPlainDirs(p):
			return treeChanges{}, false // a symlink on the way could lead out of the tree
		case info.IsDir():
			files, ok := r.filesUnder(p)
			if !ok {
				return treeChanges{}, false
			}
			for _, f := range files {
				if !isTracked(f) {
					c.untracked = append(c.untracked, f)
				}
			}
		case info.Mode().IsRegular() || info.Mode()&fs.ModeSymlink != 0:
			c.untracked = append(c.untracked, p)
		}
		// Anything else (a FIFO, a socket) git does not list either.
	}
	slices.Sort(c.untracked)
	c.untracked = slices.Compact(c.untracked)
	return c, true
}

// filesUnder lists the regular files and symlinks at any depth below the
// directory rel (created or moved in since the snapshot, so unwatched), or
// false if it holds a .git (a repository of its own) or cannot be read.
func (r *Repo) filesUnder(rel string) ([]string, bool) {
	entries, err := os.ReadDir(r.abs(rel))
	if err != nil {
		return nil, false
	}
	var files []string
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		switch {
		case e.Name() == ".git":
			return nil, false
		case e.IsDir():
			sub, ok := r.filesUnder(p)
			if !ok {
				return nil, false
			}
			files = append(files, sub...)
		case e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0:
			files = append(files, p)
		}
	}
	return files, true
}

// underPlainDirs reports whether every directory above rel is a directory
// and not a symlink to one.
func (r *Repo) underPlainDirs(rel string) bool {
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		info, err := os.Lstat(r.abs(dir))
		if err != nil || !info.IsDir() {
			return false
		}
	}
	return true
}

// checkoutIndex writes the tracked paths back from the index, replacing
// whatever is there. The index itself stays as it was, byte for byte (no
// -u): the stat data it holds for these paths no longer match, so git
// compares their content the next time it looks (and finds it unchanged),
// and a later rollback writes them again; rewriting the index would cost
// more on every rollback, for the same content.
func (r *Repo) checkoutIndex(ctx context.Context, paths []string) error {
	for chunk := range argChunks(paths) {
		if _, err := r.mutate(ctx, append([]string{"checkout-index", "-f", "--"}, chunk...)...); err != nil {
			return fmt.Errorf("restore tracked files: %w", err)
		}
	}
	return nil
}

// argChunks splits paths into runs short enough for one command line each.
func argChunks(paths []string) iter.Seq[[]string] {
	const maxArgBytes = 128 << 10
	return func(yield func([]string) bool) {
		for len(paths) > 0 {
			n, size := 0, 0
			for n < len(paths) && (n == 0 || size+len(paths[n]) < maxArgBytes) {
				size += len(paths[n]) + 1
				n++
			}
			if !yield(paths[:n]) {
				return
			}
			paths = paths[n:]
		}
	}
}
