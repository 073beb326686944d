package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Detect reports what this machine supports, probing once per process: a trial run of the init,
// which sets up the whole namespaces mechanism, a copy-on-write view of a cache among it, and exits
// instead of running a command, tells whether unprivileged user namespaces work here (a sysctl,
// AppArmor or a container's seccomp filter may forbid them or the mounts the init makes); only
// when it fails, a second one without the view tells whether the views alone do not work (overlayfs
// in a user namespace needs Linux 5.11).
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
	err := probe(s.LandlockABI, true)
	if err == nil {
		s.UserNamespaces, s.CopyOnWrite = true, true
		return s
	}
	plain := probe(s.LandlockABI, false)
	if plain == nil {
		s.UserNamespaces, s.CopyOnWriteError = true, err.Error()
		return s
	}
	s.UserNamespacesError = plain.Error()
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

// probe runs the init through the namespaces mechanism on a scratch directory, with a
// copy-on-write view of a directory in it if view is set.
func probe(abi int, view bool) error {
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: abi}
	if view {
		p.cows = []string{"cache"} // in the scratch directory: probeWith makes it
	}
	return probeWith(p)
}

// probeWith runs the init with p's mechanism on a scratch directory, its work tree.
func probeWith(p *Policy) error {
	dir, err := os.MkdirTemp("", "factory-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("cannot create a directory for the probe: %w", err)
	}
	defer removeAll(dir)
	p.workTree = dir
	for i, cache := range p.cows {
		p.cows[i] = filepath.Join(dir, cache)
		if err := os.Mkdir(p.cows[i], 0o700); err != nil {
			return fmt.Errorf("cannot create a directory for the probe: %w", err)
		}
	}
	cmd := exec.Command("/bin/true")
	// In the scratch work tree: the init re-enters its directory after the
	// mounts, and factory's own may be under a /tmp the probe does not show.
	cmd.Dir = dir
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cleanup, err := p.wrap(cmd, true, nil, nil)
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
