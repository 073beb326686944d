package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
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
	if !hooked.Load() {
		s.UserNamespacesError = errNoHook.Error()
		return s
	}
	// util-linux's unshare makes the namespaces cheaper than the fork does (launchWithUnshare); a
	// machine without it, with one too old for --map-current-user (before 2.38) or where it fails,
	// keeps the fork.
	if tool := systemUnshare(); tool != "" {
		setUnshareTool(tool)
		if probe(s.LandlockABI) == nil {
			s.UserNamespaces = true
			return s
		}
		setUnshareTool("")
	}
	if err := probe(s.LandlockABI); err != nil {
		// A kernel or security module may refuse to execute the embedded init from its memfd.
		if !useSelfExe() || probe(s.LandlockABI) != nil {
			s.UserNamespacesError = err.Error()
			return s
		}
	}
	s.UserNamespaces = true
	return s
}

// systemUnshare returns the system's util-linux unshare, or "". Never one found on the PATH: it runs
// before the confinement, and a PATH that holds a directory of the work tree (an activated
// virtualenv, node_modules/.bin) would let an attempt plant its own. Only a root-owned file no
// one else may write qualifies.
func systemUnshare() string {
	for _, p := range []string{"/usr/bin/unshare", "/bin/unshare"} {
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o022 != 0 {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
			return p
		}
	}
	return ""
}

// privatePIDs reports whether a PID namespace with its own /proc works on top of the namespaces
// mechanism (a container may forbid mounting proc), probing once per process.
func privatePIDs() error {
	pidsOnce.Do(func() { pidsErr = probeWith(Detect().LandlockABI, true) })
	return pidsErr
}

var (
	pidsOnce sync.Once
	pidsErr  error
)

// probe runs the init through the namespaces mechanism on a scratch directory.
func probe(abi int) error { return probeWith(abi, false) }

// probeWith is probe, with a private PID namespace when pids is set.
func probeWith(abi int, pids bool) error {
	dir, err := os.MkdirTemp("", "factory-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("cannot create a directory for the probe: %w", err)
	}
	defer removeAll(dir)
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: abi, workTree: dir, pids: pids}
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
