//go:build !linux

package proc

import (
	"errors"
	"fmt"
)

func setChildSubreaper() error {
	return fmt.Errorf("cannot become a child subreaper: %w", errors.ErrUnsupported)
}

// childFinder finds nothing: only Linux processes become subreapers, and only they scan for children.
type childFinder struct{ childless bool }

func (*childFinder) starting(bool)                {}
func (*childFinder) scanned(bool, int)            {}
func (*childFinder) children(int) ([]child, bool) { return nil, true }

// StartTicks is false: only Linux has /proc/<pid>/stat.
func StartTicks(int) (uint64, bool) { return 0, false }

// KillGroupIfSame kills nothing: it needs Linux's /proc.
func KillGroupIfSame(pgid int, _ uint64) (bool, error) {
	return false, fmt.Errorf("cannot check process group %d before killing it: %w", pgid, errors.ErrUnsupported)
}
