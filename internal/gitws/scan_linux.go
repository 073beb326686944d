package gitws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// scanTree records, at or below rel, the empty directories (in empty) and
// the permission bits of every file and directory (in modes), skipping .git
// directories and symlinks' modes, and has watch (which may be nil) watch
// each directory before reading it. Like git, it passes over directories it
// may not read: Rollback cannot remove anything inside them either. With
// files not nil, it also appends the stat data of every regular file and
// symlink, which git's index records too (see DirtyAt).
//
// It stats each entry relative to its directory's descriptor, with no
// FileInfo: on a 10,000-file tree that is a third less CPU than a walk by
// path (BenchmarkScanTree), and this walk runs before every attempt.
func scanTree(root, rel string, empty *[]string, modes map[string]fs.FileMode, watch *modeWatch, files *[]walkedFile) error {
	fd, err := unix.Open(filepath.Join(root, filepath.FromSlash(rel)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return scanError(err, watch)
	}
	return scanDir(fd, rel, empty, modes, watch, files)
}

// scanDir is scanTree for the directory open as fd, which it closes.
func scanDir(fd int, rel string, empty *[]string, modes map[string]fs.FileMode, watch *modeWatch, files *[]walkedFile) error {
	watch.addDir(rel)
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return scanError(err, watch)
	}
	if len(names) == 0 && rel != "." {
		*empty = append(*empty, rel)
	}
	prefix := rel + "/"
	if rel == "." {
		prefix = ""
	}
	stats, ok, all := statAll(fd, names)
	if !all {
		watch.invalidate() // what it could not state, it does not watch: see scanError
	}
	for i, name := range names {
		if name == ".git" {
			// Below the root, a repository of its own, which git status
			// lists as untracked: DirtyAt must not take it for nothing.
			// Its mode is recorded so that Rollback can tell one present at
			// baseline from one a command made.
			if rel != "." {
				if files != nil {
					*files = append(*files, walkedFile{path: prefix + name})
				}
				if ok[i] {
					modes[prefix+name] = unixPerm(stats[i].Mode)
				}
			}
			continue
		}
		if !ok[i] {
			continue // gone meanwhile
		}
		st := &stats[i]
		p := prefix + name
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if files != nil {
				*files = append(*files, walked(p, st))
			}
		case unix.S_IFDIR:
			modes[p] = unixPerm(st.Mode)
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
			if err != nil {
				if err := scanError(err, watch); err != nil {
					return err
				}
				continue
			}
			if err := scanDir(sub, p, empty, modes, watch, files); err != nil {
				return err
			}
		case unix.S_IFREG:
			modes[p] = unixPerm(st.Mode)
			if files != nil {
				*files = append(*files, walked(p, st))
			}
		default:
			modes[p] = unixPerm(st.Mode)
		}
	}
	return nil
}

// statAll stats names in the directory open as fd, without following
// symlinks; ok[i] is false for a name that could not be stated, and all is
// false when one failed for another reason than being gone meanwhile (a
// directory that may be listed but not searched). A large directory is
// stated in parts at once, one per processor: the walk is the longest step
// of a snapshot (Preflight's other steps have run by its end), and these
// system calls are nearly all of it.
func statAll(fd int, names []string) (stats []unix.Stat_t, ok []bool, all bool) {
	stats, ok = make([]unix.Stat_t, len(names)), make([]bool, len(names))
	var failed atomic.Bool
	inParts(len(names), func(from, to int) {
		for i := from; i < to; i++ {
			err := unix.Fstatat(fd, names[i], &stats[i], unix.AT_SYMLINK_NOFOLLOW)
			ok[i] = err == nil
			if err != nil && err != unix.ENOENT {
				failed.Store(true)
			}
		}
	})
	return stats, ok, !failed.Load()
}

// inParts calls do(from, to) on parts of [0, n), one per processor at once
// when each part would hold at least minStatPart items, else once.
func inParts(n int, do func(from, to int)) {
	parts := min(runtime.GOMAXPROCS(0), n/minStatPart)
	if parts < 2 {
		do(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { do(k*n/parts, (k+1)*n/parts) })
	}
	wg.Wait()
}

// minStatPart is the fewest names worth a goroutine of their own.
const minStatPart = 1024

// walked is the walkedFile of path p with stat data st, truncated to 32
// bits as git stores it.
func walked(p string, st *unix.Stat_t) walkedFile {
	return walkedFile{path: p, mode: st.Mode, stat: statData{
		ctimeSec: uint32(st.Ctim.Sec), ctimeNsec: uint32(st.Ctim.Nsec),
		mtimeSec: uint32(st.Mtim.Sec), mtimeNsec: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino), uid: st.Uid, gid: st.Gid, size: uint32(st.Size)}}
}

// scanError is nil for a directory the walk may not read, else the error.
// A directory passed over is not watched either: a command that unlocks it
// can fill it unseen, so the watch no longer vouches for the tree.
func scanError(err error, watch *modeWatch) error {
	if errors.Is(err, fs.ErrPermission) {
		watch.invalidate()
		return nil
	}
	return fmt.Errorf("scan the work tree: %w", err)
}

// unixPerm is permBits for a stat mode.
func unixPerm(mode uint32) fs.FileMode {
	perm := fs.FileMode(mode & 0o777)
	if mode&unix.S_ISUID != 0 {
		perm |= fs.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		perm |= fs.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		perm |= fs.ModeSticky
	}
	return perm
}

// staleEntries returns, in index order, the paths of idx's entries whose
// file no longer has the stat data and type the index recorded for it
// (rewritten, replaced or deleted), and those git would call racily clean
// (written no earlier than the index, modified at idxMtime). It is git's
// index refresh, done here because the index is known to be as it was at
// the snapshot: a stat of each tracked file relative to its directory, in
// parts at once (inParts). ok is false where that cannot tell: a
// directory above an entry is no longer a plain directory, an entry is now
// a directory, or a system call failed otherwise.
func staleEntries(root string, idx *gitIndex, idxMtime time.Time) (stale []string, ok bool) {
	rootFd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(rootFd)
	isStale := make([]bool, len(idx.entries))
	// check stats entries[from:to]; false when it cannot tell.
	check := func(from, to int) bool {
		dirFd, dirName, dirGone := rootFd, ".", false
		defer func() {
			if dirFd != rootFd {
				unix.Close(dirFd)
			}
		}()
		var st unix.Stat_t
		for i := from; i < to; i++ {
			e := &idx.entries[i]
			if dir := path.Dir(e.path); dir != dirName {
				if dirFd != rootFd {
					unix.Close(dirFd)
				}
				dirFd, dirName, dirGone = rootFd, dir, false
				if dir != "." {
					// No symlink anywhere on the way: git would not follow one either.
					fd, err := unix.Openat2(rootFd, dir, &unix.OpenHow{
						Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
						Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
					})
					switch {
					case errors.Is(err, unix.ENOENT):
						dirGone = true // deleted with its directory
					case err != nil:
						return false
					default:
						dirFd = fd
					}
				}
			}
			if dirGone {
				isStale[i] = true
				continue
			}
			err := unix.Fstatat(dirFd, path.Base(e.path), &st, unix.AT_SYMLINK_NOFOLLOW)
			switch {
			case errors.Is(err, unix.ENOENT):
				isStale[i] = true
				continue
			case err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR:
				return false
			}
			isStale[i] = !e.unchanged(walked(e.path, &st), idxMtime)
		}
		return true
	}
	var failed atomic.Bool
	inParts(len(idx.entries), func(from, to int) {
		if !check(from, to) {
			failed.Store(true)
		}
	})
	if failed.Load() {
		return nil, false
	}
	for i, s := range isStale {
		if s {
			stale = append(stale, idx.entries[i].path)
		}
	}
	return stale, true
}
