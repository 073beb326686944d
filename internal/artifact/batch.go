package artifact

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// A Batch writes files atomically for readers now (as WriteFilesAtomic) and
// makes them durable together later, with Sync: one sync of each file
// system instead of one per write. It is for files whose loss in a crash of
// the machine before Sync costs only the record of an unfinished step, not
// the ability to recover: an attempt's artifacts, or the files it wrote to
// the work tree, which a journal already made durable lets recovery undo.
// Keep the two in separate batches: work-tree writes may be undone (see
// Forget) or removed by the commands that run after them (see SyncPresent).
// The zero Batch is ready to use.
type Batch struct {
	dirs map[string][]string // directory -> the files written there
}

// Write writes files into dir, each atomically, without waiting for the disk.
func (b *Batch) Write(dir string, files []File) error {
	for _, f := range files {
		if err := b.WriteFile(filepath.Join(dir, f.Name), f.Data, f.Perm); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile replaces path with data atomically, without waiting for the disk.
func (b *Batch) WriteFile(path string, data []byte, perm fs.FileMode) error {
	if err := replaceFile(path, data, perm); err != nil {
		return err
	}
	if b.dirs == nil {
		b.dirs = map[string][]string{}
	}
	dir := filepath.Dir(path)
	b.dirs[dir] = append(b.dirs[dir], path)
	return nil
}

// Sync makes every file written since the last Sync durable, and empties
// the batch.
func (b *Batch) Sync() error {
	dirs := make([]string, 0, len(b.dirs))
	for dir := range b.dirs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	err := syncDirs(dirs, b.dirs)
	b.dirs = nil
	return err
}

// SyncPresent is Sync for files that others may have removed or replaced
// since they were written, such as work-tree writes a command could
// delete: what is no longer a regular file holds nothing of the write to
// make durable, and is passed over.
func (b *Batch) SyncPresent() error {
	for dir, paths := range b.dirs {
		kept := slices.DeleteFunc(paths, func(p string) bool {
			info, err := os.Lstat(p)
			return err != nil || !info.Mode().IsRegular()
		})
		if len(kept) == 0 {
			delete(b.dirs, dir)
		} else {
			b.dirs[dir] = kept
		}
	}
	return b.Sync()
}

// Forget empties the batch without syncing: for writes that were undone.
func (b *Batch) Forget() { b.dirs = nil }
