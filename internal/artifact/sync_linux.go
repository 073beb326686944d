package artifact

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncTogether makes the files just written in dir durable with one
// syncfs(2) of dir's file system: one wait for the disk instead of one per
// file and directory. One file alone (a journal, a summary) is fsynced with
// its directory instead: syncfs also waits for every other dirty page of the
// file system, which made it the slower of the two for a journal on a quiet
// machine (3.3 against 1.3–2.5 ms, bench/README.md), and one syncfs of an
// attempt's artifacts there took 228 ms.
func syncTogether(dir string, paths []string) error {
	if len(paths) == 1 {
		return syncEach(dir, paths)
	}
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
