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
	return p.WrapPort(cmd, nil)
}

// WrapPort is Wrap for a command that reaches the gateway port pt, which p opened (OpenPort): off
// Linux a listener on the host's 127.0.0.1, which nothing confines.
func (p *Policy) WrapPort(cmd *exec.Cmd, pt *Port) (cleanup func(), err error) {
	if p.Confined() {
		return nil, errors.New("sandbox: confinement is only implemented on Linux")
	}
	if _, err := pt.use(p); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// openHandover is never called off Linux, where no policy has the namespaces mechanism.
func (p *Policy) openHandover() (*Port, error) {
	return nil, errors.New("sandbox: a gateway port in a network namespace needs Linux")
}

func privatePIDs() error { return errors.New("not Linux") }
