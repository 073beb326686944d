//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// Detect reports no support off Linux.
func Detect() Support {
	return Support{UserNamespacesError: "not Linux", LandlockError: "not Linux"}
}

// Wrap leaves cmd alone: off Linux no policy confines.
func (p *Policy) Wrap(cmd *exec.Cmd) (cleanup func(), err error) {
	if p.Confined() {
		return nil, errors.New("sandbox: confinement is only implemented on Linux")
	}
	return func() {}, nil
}

func privatePIDs() error { return errors.New("not Linux") }
