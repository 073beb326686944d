package proc

import (
	"errors"
	"os/exec"
)

// Found reports whether name resolves to an executable on PATH. A name that
// exists but cannot be run counts as found: running it reports the reason.
func Found(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil || !errors.Is(err, exec.ErrNotFound)
}
