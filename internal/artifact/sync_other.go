//go:build !linux

package artifact

import (
	"fmt"
	"os"
)

// syncTogether makes the files just written in dir durable: each file,
// then dir.
func syncTogether(dir string, paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", p, err)
		}
	}
	return SyncDir(dir)
}

// syncDirs makes the files written in dirs durable: each file, then its
// directory.
func syncDirs(dirs []string, files map[string][]string) error {
	for _, dir := range dirs {
		if err := syncTogether(dir, files[dir]); err != nil {
			return err
		}
	}
	return nil
}
