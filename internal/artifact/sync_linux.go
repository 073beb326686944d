package artifact

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncTogether makes the files just written in dir durable with one
// syncfs(2) of dir's file system: one wait for the disk instead of one per
// file and directory.
func syncTogether(dir string, _ []string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("sync the file system of %s: %w", dir, err)
	}
	return nil
}

// syncDirs makes the files written in dirs durable: one syncfs per file
// system among them.
func syncDirs(dirs []string, _ map[string][]string) error {
	synced := map[uint64]bool{}
	for _, dir := range dirs {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return fmt.Errorf("stat directory %s: %w", dir, err)
		}
		if synced[st.Dev] {
			continue
		}
		if err := syncTogether(dir, nil); err != nil {
			return err
		}
		synced[st.Dev] = true
	}
	return nil
}
