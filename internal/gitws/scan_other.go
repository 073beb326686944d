//go:build !linux

package gitws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// scanTree records, at or below rel, the empty directories (in empty) and
// the permission bits of every file and directory (in modes), not looking
// inside .git directories and skipping symlinks' modes, and has watch (which may be nil) watch
// each directory before reading it. Like git, it passes over directories it
// may not read: Rollback cannot remove anything inside them either. It
// records no stat data in files: DirtyAt then asks git.
func scanTree(root, rel string, empty *[]string, modes map[string]fs.FileMode, watch *modeWatch, _ *[]walkedFile) error {
	watch.addDir(rel)
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrPermission) {
		watch.invalidate() // see scan_linux.go's scanError
		return nil
	}
	if err != nil {
		return fmt.Errorf("scan the work tree: %w", err)
	}
	if len(entries) == 0 && rel != "." {
		*empty = append(*empty, rel)
	}
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		switch {
		case e.Name() == ".git":
			// Recorded so that Rollback can tell one present at baseline
			// from one a command made.
			if info, err := e.Info(); err == nil && rel != "." {
				modes[p] = permBits(info.Mode())
			}
		case e.Type()&fs.ModeSymlink != 0:
			continue
		case e.IsDir():
			info, err := e.Info()
			if err != nil {
				continue // gone meanwhile
			}
			modes[p] = permBits(info.Mode())
			if err := scanTree(root, p, empty, modes, watch, nil); err != nil {
				return err
			}
		default:
			if info, err := e.Info(); err == nil {
				modes[p] = permBits(info.Mode())
			}
		}
	}
	return nil
}

// staleEntries is not done here: Rollback resets with git instead.
func staleEntries(string, *gitIndex, time.Time) ([]string, bool) { return nil, false }
