package gitws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"syscall"
)

// A restorePlan is what Rollback must do to a work tree whose index and
// refs are as they were at the snapshot, found without `git reset --hard`
// (which stats every tracked file in one process and rewrites the index)
// and without `git ls-files --others` (which reads every directory).
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
// no inotify) there is no plan and Rollback asks git as before.
type restorePlan struct {
	stale     []string // tracked paths to write back from the index
	untracked []string // untracked files and symlinks present, sorted
	tracked   []string // every tracked path, sorted
}

// planRestore returns the plan for rolling back to b, or false where git
// must do it: no snapshot state, the index or the refs changed since, an
// index this package does not read or with entries a reset treats
// specially (submodules, skip-worktree, assume-unchanged, conflicts), or a
// tree the stat data or the watch cannot vouch for.
func (r *Repo) planRestore(b Baseline) (restorePlan, bool) {
	st := b.state
	if st == nil || st.indexStamp == "" || st.refsStamp == "" || b.tree == "" ||
		r.indexStamp() != st.indexStamp || r.refsStamp() != st.refsStamp {
		return restorePlan{}, false
	}
	changed, ok := b.watch.paths()
	if !ok {
		return restorePlan{}, false
	}
	idx, info, err := r.readIndex(b.Commit)
	// The index is the snapshot's, which Preflight found clean; its cache
	// tree being the baseline's says that no entry is staged.
	if err != nil || idx.tree != b.tree {
		return restorePlan{}, false
	}
	plan := restorePlan{tracked: make([]string, len(idx.entries))}
	for i, e := range idx.entries {
		if e.flags&(entryAssumeValid|entryStage) != 0 || e.extFlags&(entrySkipWorktree|entryIntentToAdd) != 0 ||
			e.mode&0o170000 == 0o160000 {
			return restorePlan{}, false
		}
		plan.tracked[i] = e.path
	}
	if plan.stale, ok = staleEntries(r.Root, idx, info.ModTime()); !ok {
		return restorePlan{}, false
	}
	isTracked := func(p string) bool {
		_, found := slices.BinarySearch(plan.tracked, p)
		return found
	}
	for _, p := range slices.Sorted(maps.Keys(changed)) {
		if p == ".git" {
			continue // the repository's own; restoreMeta deals with it
		}
		if path.Base(p) == ".git" {
			return restorePlan{}, false // a nested repository: git's rules decide what is in it
		}
		if isTracked(p) {
			continue // judged by its stat data
		}
		info, err := os.Lstat(r.abs(p))
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), err == nil && info.IsDir() && !changed[p]:
			continue // gone, or a directory only chmod'ed
		case err != nil, !r.underPlainDirs(p):
			return restorePlan{}, false // a symlink on the way could lead out of the tree
		case info.IsDir():
			files, ok := r.filesUnder(p)
			if !ok {
				return restorePlan{}, false
			}
			for _, f := range files {
				if !isTracked(f) {
					plan.untracked = append(plan.untracked, f)
				}
			}
		case info.Mode().IsRegular() || info.Mode()&fs.ModeSymlink != 0:
			plan.untracked = append(plan.untracked, p)
		}
		// Anything else (a FIFO, a socket) git does not list either.
	}
	slices.Sort(plan.untracked)
	plan.untracked = slices.Compact(plan.untracked)
	return plan, true
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
// whatever is there, and records their new stat data in the index.
func (r *Repo) checkoutIndex(ctx context.Context, paths []string) error {
	const maxArgBytes = 128 << 10
	for len(paths) > 0 {
		n, size := 0, 0
		for n < len(paths) && (n == 0 || size+len(paths[n]) < maxArgBytes) {
			size += len(paths[n]) + 1
			n++
		}
		args := append([]string{"checkout-index", "-f", "-u", "--"}, paths[:n]...)
		if _, err := r.mutate(ctx, args...); err != nil {
			return fmt.Errorf("restore tracked files: %w", err)
		}
		paths = paths[n:]
	}
	return nil
}
