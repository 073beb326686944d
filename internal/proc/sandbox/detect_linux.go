package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Detect reports what this machine supports, probing once per process: a trial run of the init,
// which sets up the whole namespaces mechanism and exits instead of running a command, tells
// whether unprivileged user namespaces work here (a sysctl, AppArmor or a container's seccomp
// filter may forbid them or the mounts the init makes).
//
// Prepare calls it. Call it (or Prepare) before running commands concurrently in a process that
// called proc.BecomeSubreaper: a command ending meanwhile would take the trial run for its orphan.
func Detect() Support {
	detectOnce.Do(func() { support = detect() })
	return support
}

var (
	detectOnce sync.Once
	support    Support
)

func detect() Support {
	var s Support
	s.LandlockABI, s.LandlockError = landlockABI()
	if _, err := initExe(); err != nil {
		s.UserNamespacesError, s.LandlockABI, s.LandlockError = err.Error(), 0, err.Error()
		return s
	}
	err := probe(s.LandlockABI)
	if err == nil {
		s.UserNamespaces = true
		return s
	}
	s.UserNamespacesError = err.Error()
	// A kernel or security module may refuse to execute the init from its memfd at all; then
	// Landlock alone cannot be had either.
	if s.LandlockABI > 0 {
		if err := probeWith(&Policy{mode: ModeAuto, mech: MechanismLandlock, abi: s.LandlockABI}); err != nil {
			s.LandlockABI, s.LandlockError = 0, err.Error()
		}
	}
	return s
}

// privatePIDs reports whether a PID namespace with its own /proc works on top of the namespaces
// mechanism (a container may forbid mounting proc), probing once per process.
func privatePIDs() error {
	pidsOnce.Do(func() {
		pidsErr = probeWith(&Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: Detect().LandlockABI, pids: true})
	})
	return pidsErr
}

var (
	pidsOnce sync.Once
	pidsErr  error
)

// probe runs the init through the namespaces mechanism on a scratch directory.
func probe(abi int) error {
	return probeWith(&Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: abi})
}

// probeWith runs the init with p's mechanism on a scratch directory, its work tree.
func probeWith(p *Policy) error {
	dir, err := os.MkdirTemp("", "factory-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("cannot create a directory for the probe: %w", err)
	}
	defer removeAll(dir)
	p.workTree = dir
	cmd := exec.Command("/bin/true")
	// In the scratch work tree: the init re-enters its directory after the
	// mounts, and factory's own may be under a /tmp the probe does not show.
	cmd.Dir = dir
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cleanup, err := p.wrap(cmd, true)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("trial run: %w: %s", err, strings.TrimPrefix(msg, "factory sandbox: "))
		}
		return fmt.Errorf("trial run: %w", err)
	}
	return nil
}
