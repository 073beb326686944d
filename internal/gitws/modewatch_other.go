//go:build !linux

package gitws

// Without inotify there is no watch: restoreModes always walks the tree.
type watchImpl struct{}

func startWatch(string) (watchImpl, bool)     { return watchImpl{}, false }
func (*watchImpl) add(string) bool            { return false }
func (*watchImpl) drain(map[string]bool) bool { return false }
func (*watchImpl) close()                     {}
