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

// overlays reports whether the copy-on-write views of caches work on top of the namespaces
// mechanism, probing once per process: overlayfs in a user namespace needs Linux 5.11, and
// removing from a view what the cache holds needs user xattrs on tmpfs (Linux 6.6).
func overlays() error {
	overlayOnce.Do(func() { overlayErr = probeOverlay() })
	return overlayErr
}

var (
	overlayOnce sync.Once
	overlayErr  error
)

// probeOverlay removes, through a view, a directory of a scratch cache, which must stay.
func probeOverlay() error {
	dir, err := os.MkdirTemp("", "factory-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("cannot create a directory for the probe: %w", err)
	}
	defer removeAll(dir)
	work, cache := filepath.Join(dir, "work"), filepath.Join(dir, "cache")
	for _, d := range []string{work, filepath.Join(cache, "d")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("cannot create a directory for the probe: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, "d", "f"), nil, 0o600); err != nil {
		return fmt.Errorf("cannot create a file for the probe: %w", err)
	}
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: Detect().LandlockABI, workTree: work, cows: []string{cache}}
	cmd := exec.Command("/bin/sh", "-c", `rm -r "$0/d" && test ! -e "$0/d"`, cache)
	cmd.Dir, cmd.Env = work, []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cleanup, err := p.wrap(cmd, false)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("trial run: %w: %s", err, strings.TrimPrefix(strings.TrimSpace(out.String()), "factory sandbox: "))
	}
	if _, err := os.Stat(filepath.Join(cache, "d", "f")); err != nil {
		return fmt.Errorf("trial run: the view changed the cache: %w", err)
	}
	return nil
}

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
