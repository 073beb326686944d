package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/factory-harness/factory/internal/proc/sandbox/initproc"
)

// plan is what the init does (package initproc).
type plan = initproc.Plan

// Wrap rewrites cmd, built by exec.Command for the command to confine, so that it runs the factory
// binary as the sandbox's init, which confines itself and then executes the command. It keeps the
// command's process group, environment (but for TMPDIR and HOME), directory and output files, so
// that the process started is the command's own, with its pid, exit status and signals; the
// returned cleanup removes the private directories once the command and everything it started are
// gone. A policy that does not confine leaves cmd alone.
//
// If cmd.Err is set (the program was not found), cmd is left alone so that Start reports it. If
// the init cannot confine or execute the command, the command exits with code 125 and a
// "factory sandbox: ..." line on its stderr.
func (p *Policy) Wrap(cmd *exec.Cmd) (cleanup func(), err error) {
	return p.wrap(cmd, false)
}

// wrap is Wrap; with probe set, the init exits once confined instead of executing the command.
func (p *Policy) wrap(cmd *exec.Cmd, probe bool) (cleanup func(), err error) {
	if !p.Confined() || cmd.Err != nil {
		return func() {}, nil
	}
	pl := plan{Namespaces: p.mech == MechanismNamespaces, Probe: probe,
		Writable: []string{p.workTree}, ReadOnly: p.readOnly, Hide: p.hide, ABI: p.abi, Parent: os.Getpid(),
		PIDs: p.pids, HostNet: p.hostNet, Ports: p.ports}
	home, tmpdir := p.home, "/tmp"
	cleanup = func() {}
	if pl.Namespaces {
		// The init mounts a fresh tmpfs at /tmp and makes HOME in it: no
		// directory to make and remove on the host for each command, and
		// nothing left behind when factory is killed.
		if home == "" {
			home = filepath.Join(initproc.HostTmp(), "home")
			pl.MakeHome = home
		}
	} else {
		priv, err := os.MkdirTemp("", "factory-sandbox-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: cannot create the private directory: %w", err)
		}
		cleanup = func() { _ = removeAll(priv) }
		defer func() {
			if err != nil {
				cleanup()
			}
		}()
		pl.Tmp = filepath.Join(priv, "tmp")
		tmpdir = pl.Tmp
		if home == "" {
			home = filepath.Join(priv, "home")
		}
		for _, dir := range []string{pl.Tmp, filepath.Join(priv, "home")} {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: cannot create the private directory: %w", err)
			}
		}
	}
	if pl.MakeHome == "" {
		pl.Writable = append(pl.Writable, home)
	}
	if err := wrapCmd(cmd, pl); err != nil {
		return nil, err
	}
	cmd.Env = setEnv(cmd.Env, "TMPDIR="+tmpdir, "HOME="+home)
	return cleanup, nil
}

// wrapCmd makes cmd run the init with pl instead of its program.
func wrapCmd(cmd *exec.Cmd, pl plan) error {
	tool, init := launcher()
	viaUnshare := tool != "" && pl.Namespaces && !pl.PIDs && len(cmd.ExtraFiles) == 0 && !loaderEnv(cmd.Environ())
	if viaUnshare {
		pl.InitFD = 3
	}
	data, err := json.Marshal(pl)
	if err != nil {
		return fmt.Errorf("sandbox: cannot encode the plan: %w", err)
	}
	if viaUnshare {
		launchWithUnshare(cmd, pl, string(data), tool, init)
		return nil
	}
	cmd.Args = append([]string{initproc.Arg0, string(data), cmd.Path}, cmd.Args...)
	cmd.Path = initExe()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if pl.Namespaces {
		a := cmd.SysProcAttr
		a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		if !pl.HostNet {
			a.Cloneflags |= syscall.CLONE_NEWNET
		}
		if pl.PIDs {
			a.Cloneflags |= syscall.CLONE_NEWPID
		}
		// The same ids inside: files the command creates are the user's, and tools see the user they
		// expect. The init keeps the capabilities it needs to set up as ambient ones, and drops them.
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		a.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin, capSetpcap}
	}
	return nil
}

// launchWithUnshare makes cmd run util-linux's unshare (tool), which makes the user, mount and
// network namespaces in its own process, maps the user's ids to themselves, keeps the capabilities
// the init needs as ambient ones, and executes the embedded init with plan pl, encoded as data
// (the init's memfd, init, is passed as the child's descriptor 3, pl.InitFD, which the init closes
// as it executes the command).
//
// Why not the fork, as wrapCmd does otherwise: Go forks a child that is to enter a new user namespace
// with a full copy of factory's address space instead of sharing it until the exec (the parent must
// write the child's id maps while the child waits), and that copy, and the faults it leaves factory
// on every page it writes afterwards, grow with factory's heap: 5.7 ms of CPU per command with an
// empty heap, 11 ms with 50 MB, 17.5 ms with 150 MB, against ~5 ms whatever the heap this way
// (BenchmarkLaunch, bench/README.md). The process started is still the command's own: unshare and
// the init each execute the next program in place.
func launchWithUnshare(cmd *exec.Cmd, pl plan, data, tool string, init *os.File) {
	args := []string{"unshare", "--user", "--map-current-user", "--mount", "--keep-caps"}
	if !pl.HostNet {
		args = append(args, "--net")
	}
	args = append(args, "--", "/proc/self/fd/"+strconv.Itoa(pl.InitFD), data, cmd.Path)
	cmd.Args = append(args, cmd.Args...)
	cmd.Path = tool
	cmd.ExtraFiles = []*os.File{init}
}

// loaderEnv reports whether env holds a variable that makes the C library load code or change how
// a dynamically linked program starts (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, GLIBC_TUNABLES,
// GCONV_PATH...). util-linux's unshare is such a program and runs before any confinement, with the
// command's environment: a library the attempt wrote into the work tree and named there would run
// with the user's full rights. Those commands are launched by the fork instead, whose init is
// static and ignores them; the command itself still gets them, confined.
func loaderEnv(env []string) bool {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "LD_"), strings.HasPrefix(name, "GLIBC_"), strings.HasPrefix(name, "MALLOC_"),
			name == "GCONV_PATH", name == "LOCPATH", name == "NLSPATH":
			return true
		}
	}
	return false
}

// Capability numbers from <linux/capability.h>.
const (
	capSetpcap  = 8
	capNetAdmin = 12
	capSysAdmin = 21
)

// setEnv sets the given NAME=value entries in env, replacing earlier values.
func setEnv(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for _, set := range kvs {
			if strings.HasPrefix(set, name+"=") {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}

// removeAll removes dir, first making writable the directories a command made read-only.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
