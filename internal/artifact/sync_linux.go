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
