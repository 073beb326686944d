//go:build !linux

package proc

import (
	"errors"
	"fmt"
)

func setChildSubreaper() error {
	return fmt.Errorf("cannot become a child subreaper: %w", errors.ErrUnsupported)
}

// childrenOf is never called: only Linux processes become subreapers.
func childrenOf(int) []child { return nil }

func startTime(int) (uint64, bool) { return 0, false }
