package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// plan is what the init does: see the options in initbin/c/init.c, which args writes.
type plan struct {
	makeNS, pids, hostNet, probe bool
	hostTmp, tmp, makeHome       string
	writable, readOnly, hide     []string
	caches                       []string
	ports                        []uint16
	abi, parent                  int
	gateway                      int    // the descriptor on which to hand the gateway port over, or 0
	gatewayPort                  uint16 // with gateway
}

// args is pl as the init's options, then "--", the command's path and argv.
func (pl plan) args(path string, argv []string) []string {
	args := []string{initArg0}
	for _, f := range []struct {
		set bool
		opt string
	}{{pl.makeNS, "-n"}, {pl.pids, "-N"}, {pl.hostNet, "-H"}, {pl.probe, "-q"}} {
		if f.set {
			args = append(args, f.opt)
		}
	}
	for _, f := range []struct{ opt, val string }{{"-T", pl.hostTmp}, {"-t", pl.tmp}, {"-m", pl.makeHome}} {
		if f.val != "" {
			args = append(args, f.opt, f.val)
		}
	}
	for _, f := range []struct {
		opt   string
		paths []string
	}{{"-w", pl.writable}, {"-r", pl.readOnly}, {"-x", pl.hide}, {"-o", pl.caches}} {
		for _, path := range f.paths {
			args = append(args, f.opt, path)
		}
	}
	for _, port := range pl.ports {
		args = append(args, "-c", strconv.Itoa(int(port)))
	}
	if pl.gateway != 0 {
		args = append(args, "-g", strconv.Itoa(pl.gateway), "-p", strconv.Itoa(int(pl.gatewayPort)))
	}
	args = append(args, "-a", strconv.Itoa(pl.abi), "-u", strconv.Itoa(pl.parent), "--", path)
	return append(args, argv...)
}

// initArg0 is the init's argv[0], as ps shows it until the command takes the process over.
const initArg0 = "factory-sandbox-init"

// Wrap rewrites cmd, built by exec.Command for the command to confine, so that it runs the
// sandbox's init (package initbin), which confines itself and then runs the command. It keeps the
// command's process group, environment (but for HOME, TMPDIR where the environment sets one, the
// variables of the caches it sees and the defaults of Request.Env), directory and output files.
// With the namespaces mechanism the command runs as the child of an init that is PID 1 of a new PID
// namespace, and the process started stands in for it: it leads the process group the command is
// in, ends with the command's exit code or signal, and takes PID 1, and so everything the command
// started, with it when it dies (as it does with factory). Otherwise the process started is the
// command's own. The returned cleanup removes the private directories once the command and
// everything it started are gone. A policy that does not confine leaves cmd alone.
//
// If cmd.Err is set (the program was not found), cmd is left alone so that Start reports it. If
// the init cannot confine or execute the command, the command exits with code 125 and a
// "factory sandbox: ..." line on its stderr.
func (p *Policy) Wrap(cmd *exec.Cmd) (cleanup func(), err error) {
	return p.WrapPort(cmd, nil)
}

// WrapPort is Wrap for a command that reaches the gateway port pt, which p opened (OpenPort) for
// it; a nil pt is none. With the namespaces mechanism the command's process gets one more
// descriptor (in cmd.ExtraFiles), on which its init hands the port over before it confines itself
// further, and which the command does not inherit; otherwise the command gets the host's network,
// and Landlock allows TCP connections to the port. Call pt.Started once cmd.Start has returned; the
// cleanup calls it too.
func (p *Policy) WrapPort(cmd *exec.Cmd, pt *Port) (cleanup func(), err error) {
	child, err := pt.use(p)
	if err != nil {
		return nil, err
	}
	remove, err := p.wrap(cmd, false, pt, child)
	if err != nil {
		pt.Started()
		return nil, err
	}
	if pt == nil {
		return remove, nil
	}
	return func() { pt.Started(); remove() }, nil
}

// wrap is WrapPort, child pt's end of the handover; with probe set, the init exits once confined
// instead of executing the command.
func (p *Policy) wrap(cmd *exec.Cmd, probe bool, pt *Port, child *os.File) (cleanup func(), err error) {
	if !p.Confined() || cmd.Err != nil {
		return func() {}, nil
	}
	init, err := initExe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	ns := p.mech == MechanismNamespaces
	// With p.pids (agent CLIs; only ever set with namespaces) the fork makes the namespaces and the
	// agent is PID 1 of its PID namespace; otherwise the init makes them, a PID namespace among them,
	// and runs the command under PID 1 of it.
	pl := plan{makeNS: ns && !p.pids, pids: p.pids, hostNet: p.hostNet, probe: probe,
		writable: []string{p.workTree}, readOnly: p.readOnly, hide: p.hide, ports: p.ports, abi: p.abi, parent: os.Getpid()}
	home, tmpdir := p.home, "/tmp"
	cleanup = func() {}
	if ns {
		pl.hostTmp, pl.caches = hostTmp(), p.cows
		// The init mounts a fresh tmpfs at /tmp and makes HOME in it: no
		// directory to make and remove on the host for each command, and
		// nothing left behind when factory is killed.
		if home == "" {
			home = filepath.Join(pl.hostTmp, "home")
			pl.makeHome = home
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
		pl.tmp = filepath.Join(priv, "tmp")
		tmpdir = pl.tmp
		if home == "" {
			home = filepath.Join(priv, "home")
		}
		for _, dir := range []string{pl.tmp, filepath.Join(priv, "home")} {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: cannot create the private directory: %w", err)
			}
		}
	}
	if pl.makeHome == "" {
		pl.writable = append(pl.writable, home)
	}
	switch {
	case pt != nil && pt.inNS:
		// ExtraFiles[i] is the child's descriptor 3+i.
		pl.gateway, pl.gatewayPort = 3+len(cmd.ExtraFiles), uint16(pt.addr.Port)
		cmd.ExtraFiles = append(cmd.ExtraFiles, child)
	case pt != nil:
		pl.hostNet, pl.ports = true, pt.hostPorts()
	}
	wrapCmd(cmd, pl, init)
	set := []string{"HOME=" + home}
	// The private /tmp is where programs look without TMPDIR: set it only to replace the
	// environment's, so that a go test whose result depends on TMPDIR finds its result cached.
	if !ns || slices.ContainsFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "TMPDIR=") }) {
		set = append(set, "TMPDIR="+tmpdir)
	}
	for _, c := range p.caches {
		if c.Env != "" {
			set = append(set, c.Env+"="+c.Dir)
		}
	}
	for _, kv := range p.env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			set = append(set, kv)
		}
	}
	cmd.Env = setEnv(cmd.Env, set...)
	return cleanup, nil
}

// wrapCmd makes cmd run the init, at path init, with pl instead of its program.
//
// The fork stays cheap: Go forks sharing factory's address space until the exec (vfork) unless the
// child is to enter a new user namespace at the fork, when it copies the whole address space, at a
// cost that grows with factory's heap (5.7 ms of CPU per command with an empty heap, 17.5 ms with
// 150 MB: bench/README.md). So the init makes the namespaces itself, a PID namespace among them,
// but for an agent CLI's, where the agent itself is to be PID 1, which only the fork can give.
func wrapCmd(cmd *exec.Cmd, pl plan, init string) {
	cmd.Args = pl.args(cmd.Path, cmd.Args)
	cmd.Path = init
	if !pl.pids {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	if !pl.hostNet {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	// The same ids inside, as the init maps them when it makes the namespaces. The init keeps the
	// capabilities it needs to set up as ambient ones, and drops them.
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	a.GidMappingsEnableSetgroups = false
	a.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin, capSetpcap}
}

// hostTmp is /tmp with symlinks resolved: the directory the namespaces mechanism replaces. Resolved
// once per process, not for every command.
var hostTmp = sync.OnceValue(func() string {
	if real, err := filepath.EvalSymlinks("/tmp"); err == nil {
		return real
	}
	return "/tmp"
})

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
