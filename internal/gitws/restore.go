package gitws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Ignored files whose content Snapshot keeps for Rollback: regular files of
// at most backupFileMax bytes, shallowest first (then by path), while the
// total stays within backupTotalMax. Shallow files are the likely secrets and
// hand-made settings (.env, config/local.py); deep ones are mostly
// reproducible trees such as a .venv.
const (
	backupFileMax  = 64 << 10
	backupTotalMax = 4 << 20
)

// baselineState is the part of a Baseline only Snapshot fills in.
type baselineState struct {
	meta    metaSnapshot  // the git metadata that can run code or steer git (see metaSpots)
	headRef string        // full name of the branch HEAD is on ("refs/heads/main"); "" when detached
	refs    []string      // sorted full names of every ref
	ignored []ignoredFile // every ignored path that could be Lstat'ed, sorted by path
	// dirModes holds the permission bits of every directory above an
	// ignored path, so Rollback can recreate them as they were (a 0700
	// secrets/ must not come back world-readable).
	dirModes map[string]fs.FileMode
	// indexStamp and refsStamp (see stamp.go) let Rollback skip git when
	// the index and the refs are as they were; "" when unknown.
	indexStamp, refsStamp string
	// staged is what TreeHashAt last staged, for CommitStaged.
	staged *stagedIndex
}

// entry is what Snapshot knows about one file, symlink or directory.
type entry struct {
	mode   fs.FileMode // type and permission bits, from Lstat
	size   int64
	mtime  time.Time
	target string // symlink target
	// change is changeStamp's for a backed-up file ("" when unknown or not
	// backed up): the inode and ctime, to tell a rewrite that kept the size
	// and mtime.
	change string
	data   []byte // content, when backed
	backed bool   // data holds the file's content (which may be empty)
}

type ignoredFile struct {
	path string // as in Baseline.Ignored; a trailing "/" marks a nested repository
	entry
}

// permBits keeps the bits os.Chmod can set.
func permBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// listRefs returns the sorted full names of every ref and the branch HEAD is
// on; head is "" when HEAD is detached or on a branch with no commits yet.
func (r *Repo) listRefs(ctx context.Context) (refs []string, head string, err error) {
	out, err := r.query(ctx, "for-each-ref", "--format=%(HEAD)%(refname)")
	if err != nil {
		return nil, "", fmt.Errorf("list refs: %w", err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if len(line) < 2 {
			continue
		}
		name := line[1:]
		refs = append(refs, name)
		if line[0] == '*' {
			head = name
		}
	}
	slices.Sort(refs)
	return refs, head, nil
}

// reportNewRefs lists in rep the refs created since the baseline. HEAD
// itself is put back with the rest of the git metadata (restoreMeta), so the
// reset that follows moves the baseline branch (or the detached HEAD).
func (r *Repo) reportNewRefs(ctx context.Context, st *baselineState, rep *RollbackReport) error {
	if st.refsStamp != "" && r.refsStamp() == st.refsStamp {
		return nil
	}
	refs, _, err := r.listRefs(ctx)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if _, found := slices.BinarySearch(st.refs, ref); !found {
			rep.NewRefs = append(rep.NewRefs, ref)
		}
	}
	return nil
}

// snapshotIgnored Lstats every ignored path and the directories above them,
// and reads the content of the files chosen for backup (see backupFileMax).
// Paths that cannot be Lstat'ed (gone since git listed them) are left out.
func (r *Repo) snapshotIgnored(paths []string) ([]ignoredFile, map[string]fs.FileMode) {
	files := make([]ignoredFile, 0, len(paths))
	dirModes := map[string]fs.FileMode{}
	for _, p := range paths {
		clean := strings.TrimSuffix(p, "/")
		for dir := path.Dir(clean); dir != "."; dir = path.Dir(dir) {
			if _, seen := dirModes[dir]; seen {
				break
			}
			mode := fs.FileMode(0o755)
			if info, err := os.Lstat(r.abs(dir)); err == nil && info.IsDir() {
				mode = permBits(info.Mode())
			}
			dirModes[dir] = mode
		}
		info, err := os.Lstat(r.abs(clean))
		if err != nil {
			continue
		}
		f := ignoredFile{path: p, entry: entry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime()}}
		if info.Mode()&fs.ModeSymlink != 0 {
			if f.target, err = os.Readlink(r.abs(clean)); err != nil {
				continue
			}
		}
		files = append(files, f)
	}

	var candidates []*ignoredFile
	for i := range files {
		if f := &files[i]; f.mode.IsRegular() && f.size <= backupFileMax {
			candidates = append(candidates, f)
		}
	}
	slices.SortFunc(candidates, func(a, b *ignoredFile) int {
		return cmp.Or(strings.Count(a.path, "/")-strings.Count(b.path, "/"), strings.Compare(a.path, b.path))
	})
	var total int64
	for _, f := range candidates {
		if total+f.size > backupTotalMax {
			continue // a smaller file further on may still fit
		}
		if data, stamp, ok := readUnchanged(r.abs(f.path), &f.entry); ok {
			f.data, f.backed, f.change = data, true, stamp
			total += f.size
		}
	}
	return files, dirModes
}

// readUnchanged returns the content of the regular file p if it is still
// the file e describes, with its changeStamp. It never follows a symlink or
// blocks on a FIFO.
func readUnchanged(p string, e *entry) (data []byte, stamp string, ok bool) {
	file, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", false
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() != e.size || !info.ModTime().Equal(e.mtime) {
		return nil, "", false
	}
	data, err = io.ReadAll(io.LimitReader(file, e.size+1))
	if err != nil || int64(len(data)) != e.size {
		return nil, "", false
	}
	return data, changeStamp(info), true
}

// changed reports whether what Lstat found (info, or err) differs from e.
func (e *entry) changed(info fs.FileInfo, err error) bool {
	switch {
	case err != nil, info.Mode().Type() != e.mode.Type():
		return true
	case e.mode&fs.ModeSymlink != 0:
		return false // compared by target, by the caller
	case e.mode.IsDir():
		return false
	}
	return info.Mode() != e.mode || info.Size() != e.size || !info.ModTime().Equal(e.mtime)
}

// restoreIgnored puts back the baseline ignored files the attempt changed
// or deleted, where it can, and reports the rest in rep.Unrestored.
func (r *Repo) restoreIgnored(st *baselineState, rep *RollbackReport) []error {
	var errs []error
	created := map[string]bool{} // directories made to hold restored files
	for i := range st.ignored {
		f := &st.ignored[i]
		p := r.abs(strings.TrimSuffix(f.path, "/"))
		info, err := os.Lstat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			errs = append(errs, fmt.Errorf("restore ignored file: %w", err))
			continue
		}
		// A file whose content is backed up is rewritten from it when its
		// inode or ctime changed too; one that is not, only when its size,
		// mode or mtime say so, as then it is reported lost.
		rewritten := f.change != "" && err == nil && changeStamp(info) != f.change
		if !f.changed(info, err) && !rewritten {
			if f.mode&fs.ModeSymlink == 0 {
				continue
			}
			if target, err := os.Readlink(p); err == nil && target == f.target {
				continue
			}
		}
		restorable := f.backed || f.mode&fs.ModeSymlink != 0
		if !restorable {
			rep.Unrestored = append(rep.Unrestored, f.path)
			continue
		}
		if err := r.restoreIgnoredFile(f, p, info, created); err != nil {
			errs = append(errs, fmt.Errorf("restore ignored file %s: %w", f.path, err))
			continue
		}
		if f.change != "" {
			// The file put back is the baseline's now, for a later Rollback.
			if info, err := os.Lstat(p); err == nil {
				f.change = changeStamp(info)
			}
		}
		rep.Restored = append(rep.Restored, f.path)
	}
	// Directories were made writable to fill them; give them their modes now,
	// deepest first so that a parent stays traversable meanwhile.
	dirs := make([]string, 0, len(created))
	for dir := range created {
		dirs = append(dirs, dir)
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return cmp.Or(strings.Count(b, "/")-strings.Count(a, "/"), strings.Compare(a, b))
	})
	for _, dir := range dirs {
		mode, ok := st.dirModes[dir]
		if !ok {
			mode = 0o755
		}
		if err := os.Chmod(r.abs(dir), mode); err != nil {
			errs = append(errs, fmt.Errorf("restore ignored file: %w", err))
		}
	}
	return errs
}

// restoreIgnoredFile writes f back at p, where Lstat found info (nil if
// nothing is there), creating missing parent directories.
func (r *Repo) restoreIgnoredFile(f *ignoredFile, p string, info fs.FileInfo, created map[string]bool) error {
	if err := r.makeParents(f.path, created); err != nil {
		return err
	}
	if info != nil && info.IsDir() {
		// Only an empty one: anything inside was created by the attempt and
		// is either gone by now or something Rollback must not delete.
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	if f.mode&fs.ModeSymlink != 0 {
		return symlinkAtomic(p, f.target)
	}
	return writeFileAtomic(p, f.data, permBits(f.mode), f.mtime)
}

// makeParents makes sure every directory above rel is a real directory,
// creating missing ones (writable for now; restoreIgnored sets their modes).
// A symlink or file in the way is an error: writing through it could land
// outside the work tree.
func (r *Repo) makeParents(rel string, created map[string]bool) error {
	var dirs []string
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		dirs = append(dirs, dir)
	}
	for _, dir := range slices.Backward(dirs) {
		info, err := os.Lstat(r.abs(dir))
		switch {
		case err == nil && info.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("%s is not a directory", dir)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := os.Mkdir(r.abs(dir), 0o700); err != nil {
			return err
		}
		created[dir] = true
	}
	return nil
}

// writeFileAtomic replaces p (a missing path or a non-directory) with a
// regular file holding data with mode perm and, unless zero, mtime. It
// writes a temporary file in the same directory and renames it over p, so p
// is never seen half-written and a symlink at p is replaced, not followed.
func writeFileAtomic(p string, data []byte, perm fs.FileMode, mtime time.Time) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".factory-restore-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if !mtime.IsZero() {
		// A zero atime leaves the access time alone.
		if err := os.Chtimes(tmp.Name(), time.Time{}, mtime); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	done = true
	return nil
}

// symlinkAtomic replaces p (a missing path or a non-directory) with a
// symlink to target, by renaming a new symlink over it.
func symlinkAtomic(p, target string) error {
	dir := filepath.Dir(p)
	for i := 0; ; i++ {
		tmp := filepath.Join(dir, fmt.Sprintf(".factory-restore-%d-%d", os.Getpid(), i))
		err := os.Symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	}
}
