//go:build !linux

package artifact

// syncTogether makes the files just written in dir durable: each file,
// then dir.
func syncTogether(dir string, paths []string) error {
	return syncEach(dir, paths)
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
