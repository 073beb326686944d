// Package sandbox confines the commands factory runs (verification and acceptance commands, which run
// code the model wrote): no network but loopback, writes only to the work tree, a private temporary
// directory and HOME, the git directory and other listed paths read-only, chosen paths hidden.
//
// On Linux with unprivileged user namespaces, each command's process first runs a small embedded
// init (package initbin), which makes new user, mount and network namespaces, builds the view of the
// file system with read-only bind mounts, adds a Landlock ruleset as a second layer, drops its
// capabilities and executes the command in its place. Without user namespaces it falls back to
// Landlock alone, which protects less (see Summary and docs/sandbox.md).
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Mode is what the user asked for (--sandbox).
type Mode string

const (
	// ModeAuto confines with the strongest mechanism the machine has, or runs unconfined with a warning.
	ModeAuto Mode = "auto"
	// ModeRequired refuses to run when no mechanism is available.
	ModeRequired Mode = "required"
	// ModeOff runs commands with the user's full privileges.
	ModeOff Mode = "off"
)

// ParseMode checks a --sandbox value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeRequired, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown sandbox mode %q: want %q (confine when the machine can, else warn), %q (refuse to run unconfined) or %q (no confinement)",
		s, ModeAuto, ModeRequired, ModeOff)
}

// Mechanism is how commands are confined.
type Mechanism string

const (
	// MechanismNamespaces: user, mount and network namespaces, with Landlock as a second layer.
	MechanismNamespaces Mechanism = "namespaces+landlock"
	// MechanismLandlock: Landlock alone (no user namespaces): no private /tmp, .git inside the work tree
	// and --sandbox-hide cannot be protected, and the network only on Landlock ABI 4 or later.
	MechanismLandlock Mechanism = "landlock"
	// MechanismNone: not confined.
	MechanismNone Mechanism = "none"
)

// Request is what a caller wants confined, for every command of a run.
type Request struct {
	Mode Mode
	// WorkTree is the one writable directory besides the private temporary directory and HOME.
	WorkTree string
	// ReadOnly are paths kept read-only even inside WorkTree: the git directories (a .git file or
	// directory, a linked worktree's git dir and the common dir) and the artifact directory. Paths that
	// do not exist when a command starts are skipped.
	ReadOnly []string
	// Home is a directory that commands get as a writable HOME (--sandbox-home); "" gives each command a
	// private empty HOME.
	Home string
	// Hide are paths made unreadable (--sandbox-hide), such as ~/.ssh.
	Hide []string
	// PrivatePIDs gives commands a new PID namespace and a fresh /proc: they see only the processes
	// they start, never their ancestors (nor their environment or command line). It needs user
	// namespaces: with Landlock alone it is not applied (Warning says so; ModeRequired refuses).
	PrivatePIDs bool
	// HostNetwork keeps the host's network instead of loopback only, for a command that must reach
	// a server outside the sandbox. TCP connections are then allowed only to ConnectPorts (on any
	// address), where Landlock can restrict them (ABI 4 or later); below that they are unrestricted.
	HostNetwork  bool
	ConnectPorts []uint16
	// Caches are the toolchains' caches and homes, which commands see copy-on-write (with user
	// namespaces): they read what is there, and what they write goes to a layer of their own, gone
	// when they end, so that no command changes what a later one, or the user, reads. Skipped: a
	// directory that does not exist, the work tree itself and what is inside a hidden path. One
	// inside another is seen through the outer one's view.
	Caches []Cache
	// Env holds NAME=value entries set for confined commands whose environment lacks NAME, such as
	// GOTOOLCHAIN=local (nothing can be downloaded there); one whose value is a hidden path is
	// dropped.
	Env []string
}

// Cache is a directory of a toolchain's: a build or package cache, or a toolchain home.
type Cache struct {
	Dir string
	// Env names the variable that points the tool at Dir ("GOCACHE"), set for the commands that see
	// Dir; "" for none.
	Env string
	// ReadOnlyFallback: with Landlock alone, which cannot make writes private, commands still see Dir
	// (and Env), read-only: a toolchain home they run from and would write to only to download
	// (rustup's and cargo's homes, Go's module cache). Other caches are then not shown: the tool
	// makes an empty one in the private HOME.
	ReadOnlyFallback bool
}

// Policy is a prepared confinement: Prepare decided the mechanism once, and Wrap applies it to each
// command, whose directory must be inside the work tree. A nil *Policy runs commands unconfined,
// like ModeOff. It is safe for concurrent use.
type Policy struct {
	mode     Mode
	mech     Mechanism
	abi      int    // Landlock ABI version, 0 without Landlock
	reason   string // why the mechanism is weaker than namespaces, for Warning
	workTree string
	readOnly []string
	home     string
	hide     []string
	pids     bool     // PrivatePIDs, when the mechanism can honor it
	wantPIDs bool     // PrivatePIDs was asked for
	hostNet  bool     // HostNetwork
	ports    []uint16 // ConnectPorts
	caches   []Cache  // Caches that exist, with Dir resolved; for Landlock alone the ReadOnlyFallback ones
	cows     []string // the outermost directories of caches, mounted copy-on-write (namespaces only)
	env      []string // Env
	unshared string   // why caches asked for are not shown, or ""
}

// UnavailableError is the error Prepare returns in ModeRequired when the machine cannot confine
// commands, or cannot honor part of the request.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return "--sandbox required: cannot confine commands on this machine: " + e.Reason
}

// unavailable, when set, is why Prepare must find no mechanism (MakeUnavailable).
var unavailable atomic.Pointer[string]

// MakeUnavailable makes Prepare decide, until restore is called, as on a machine that can confine
// nothing, for reason: for the tests of callers that must refuse or warn there.
func MakeUnavailable(reason string) (restore func()) {
	unavailable.Store(&reason)
	return func() { unavailable.Store(nil) }
}

// Prepare checks req and decides how to confine commands on this machine. In ModeAuto it never fails
// for lack of support: the policy then runs commands unconfined and Warning says why. Errors: bad
// paths, and *UnavailableError in ModeRequired.
func Prepare(req Request) (*Policy, error) {
	if _, err := ParseMode(string(req.Mode)); err != nil {
		return nil, err
	}
	p := &Policy{mode: req.Mode, mech: MechanismNone}
	if req.Mode == ModeOff {
		return p, nil
	}
	var err error
	if p.workTree, err = absDir(req.WorkTree, "work tree"); err != nil {
		return nil, err
	}
	if req.Home != "" {
		if p.home, err = absDir(req.Home, "--sandbox-home"); err != nil {
			return nil, err
		}
	}
	for _, path := range req.ReadOnly {
		p.readOnly = appendResolved(p.readOnly, path)
	}
	for _, path := range req.Hide {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("--sandbox-hide %s: not an absolute path", path)
		}
		p.hide = appendResolved(p.hide, path)
	}
	p.wantPIDs, p.hostNet, p.ports = req.PrivatePIDs, req.HostNetwork, slices.Clone(req.ConnectPorts)
	for _, kv := range req.Env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("sandbox: environment entry %q: not NAME=value", kv)
		}
		// A default naming a hidden file (GOENV under a hidden ~/.config) would make the tool
		// fail on it: the tool's own default is better.
		if filepath.IsAbs(value) {
			if real, err := filepath.EvalSymlinks(value); err == nil {
				value = real
			}
			if slices.ContainsFunc(p.hide, func(h string) bool { return within(filepath.Clean(value), h) }) {
				continue
			}
		}
		p.env = append(p.env, kv)
	}
	caches := existingCaches(req.Caches, p.workTree, p.hide)
	sup := Detect()
	p.abi = sup.LandlockABI
	switch {
	case unavailable.Load() != nil:
		p.reason = *unavailable.Load()
	case sup.UserNamespaces:
		p.mech = MechanismNamespaces
		var noViews error
		if !sup.CopyOnWrite {
			noViews = errors.New(sup.CopyOnWriteError)
		}
		p.showCaches(caches, noViews)
		if !req.PrivatePIDs {
			return p, nil
		}
		err := privatePIDs()
		if err == nil {
			p.pids = true
			return p, nil
		}
		p.reason = "a private PID namespace does not work here (" + err.Error() + ")"
		if req.Mode == ModeRequired {
			return nil, &UnavailableError{Reason: p.reason}
		}
		return p, nil
	case sup.LandlockABI > 0:
		p.mech = MechanismLandlock
		p.reason = "user namespaces are unavailable (" + sup.UserNamespacesError + "); Landlock alone cannot keep .git inside the work tree read-only, give a private /tmp or honor --sandbox-hide"
		if sup.LandlockABI < 4 {
			p.reason += ", and with Landlock ABI < 4 it cannot block the network"
		}
	default:
		p.reason = "neither user namespaces (" + sup.UserNamespacesError + ") nor Landlock (" + sup.LandlockError + ") are available"
	}
	p.showCaches(caches, nil)
	if req.Mode == ModeRequired && (p.mech == MechanismNone || len(p.hide) > 0 || req.PrivatePIDs) {
		reason := p.reason
		switch {
		case p.mech != MechanismNone && len(p.hide) > 0:
			reason = "--sandbox-hide needs user namespaces: " + reason
		case p.mech != MechanismNone:
			reason = "a private process view needs user namespaces: " + reason
		}
		return nil, &UnavailableError{Reason: reason}
	}
	return p, nil
}

// showCaches decides which caches commands see, and how, for p's mechanism: all, copy-on-write,
// with namespaces whose views work (noViews nil); else the ReadOnlyFallback ones, read-only.
func (p *Policy) showCaches(caches []Cache, noViews error) {
	switch {
	case p.mech == MechanismNamespaces && noViews == nil:
		p.caches, p.cows = caches, outermost(caches)
	case p.mech != MechanismNone:
		p.caches = slices.DeleteFunc(slices.Clone(caches), func(c Cache) bool { return !c.ReadOnlyFallback })
		if len(p.caches) < len(caches) {
			p.unshared = "no copy-on-write without user namespaces"
			if noViews != nil {
				p.unshared = "copy-on-write views do not work here (" + noViews.Error() + ")"
			}
		}
	}
}

// existingCaches are the caches whose directories exist, resolved, but for the work tree itself
// (which is writable, not copy-on-write) and those inside hidden paths (which stay hidden).
func existingCaches(caches []Cache, workTree string, hide []string) []Cache {
	var out []Cache
	for _, c := range caches {
		dir, err := filepath.Abs(c.Dir)
		if err == nil {
			dir, err = filepath.EvalSymlinks(dir)
		}
		if err != nil {
			continue
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() || dir == workTree ||
			slices.ContainsFunc(hide, func(h string) bool { return within(dir, h) }) ||
			slices.ContainsFunc(out, func(o Cache) bool { return o.Dir == dir && o.Env == c.Env }) {
			continue
		}
		c.Dir = dir
		out = append(out, c)
	}
	return out
}

// outermost are the caches' directories but those inside another one's, which its view shows.
func outermost(caches []Cache) []string {
	var dirs []string
	for _, c := range caches {
		if !slices.ContainsFunc(caches, func(o Cache) bool { return o.Dir != c.Dir && within(c.Dir, o.Dir) }) &&
			!slices.Contains(dirs, c.Dir) {
			dirs = append(dirs, c.Dir)
		}
	}
	return dirs
}

// within reports whether path is dir or lies beneath it; both clean and absolute.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// absDir returns dir as an absolute path with symlinks resolved, checking it is a directory.
func absDir(dir, what string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("sandbox: no %s given", what)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if info, err := os.Stat(abs); err != nil || !info.IsDir() {
		return "", fmt.Errorf("%s %s: not a directory", what, dir)
	}
	return abs, nil
}

// appendResolved appends path, absolute and with symlinks resolved as far as it exists, unless it is
// already in list.
func appendResolved(list []string, path string) []string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return list
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if slices.Contains(list, abs) {
		return list
	}
	return append(list, abs)
}

// Mechanism says how commands are confined; MechanismNone for a nil policy.
func (p *Policy) Mechanism() Mechanism {
	if p == nil {
		return MechanismNone
	}
	return p.mech
}

// Confined reports whether commands run confined.
func (p *Policy) Confined() bool { return p.Mechanism() != MechanismNone }

// Warning is a line to show the user when commands are less confined than asked, or "".
func (p *Policy) Warning() string {
	switch {
	case p == nil || p.mode == ModeOff:
		return "warning: --sandbox off: verification and acceptance commands run with your full privileges (network, every file you can write)"
	case p.mech == MechanismNone:
		return "warning: sandbox unavailable, commands run unconfined: " + p.reason
	case p.wantPIDs && !p.pids && p.mech == MechanismNamespaces:
		return "warning: sandbox: commands can see their ancestors' processes (environment, command line): " + p.reason
	case p.unshared != "" && p.mech == MechanismNamespaces:
		return "warning: sandbox: toolchain caches are not shared (" + p.unshared + "): builds start with empty ones in the private HOME; toolchain homes are read-only"
	case p.mech == MechanismLandlock:
		w := "warning: sandbox: Landlock only: " + p.reason
		if len(p.hide) > 0 {
			w += "; --sandbox-hide is NOT applied"
		}
		if p.wantPIDs {
			w += "; commands can see their ancestors' processes (environment, command line)"
		}
		if p.unshared != "" {
			w += "; toolchain caches are not shared (" + p.unshared + "): builds start with empty ones in the private HOME"
		}
		return w
	}
	return ""
}

// Summary is how commands are confined, as run_summary.json records it.
type Summary struct {
	Mode      Mode      `json:"mode"`
	Mechanism Mechanism `json:"mechanism"`
	Network   string    `json:"network"`
	Writable  []string  `json:"writable"`
	// Processes is "private" when commands see only the processes they start (Request.PrivatePIDs).
	Processes string `json:"processes,omitempty"`
	// Caches are the toolchains' caches commands see, each as "DIR (VARIABLE, copy-on-write)", or
	// "read-only" with Landlock alone.
	Caches []string `json:"caches,omitempty"`
}

// PrivateTmp and PrivateHome stand for the per-command directories in Summary.Writable.
const (
	PrivateTmp  = "TMPDIR (private, removed after each command)"
	PrivateHome = "HOME (private, removed after each command)"
)

// Summary describes the policy; a nil policy is ModeOff.
func (p *Policy) Summary() Summary {
	if p == nil {
		return Summary{Mode: ModeOff, Mechanism: MechanismNone, Network: "unrestricted", Writable: []string{"(anything the user can write)"}}
	}
	s := Summary{Mode: p.mode, Mechanism: p.mech}
	if p.pids {
		s.Processes = "private"
	}
	s.Network = p.network(p.hostNet, p.ports)
	if p.mech == MechanismNone {
		s.Writable = []string{"(anything the user can write)"}
		return s
	}
	home := PrivateHome
	if p.home != "" {
		home = p.home
	}
	tmp := PrivateTmp
	if p.mech == MechanismNamespaces {
		tmp = "/tmp as " + PrivateTmp
	}
	s.Writable = []string{p.workTree, tmp, home}
	view := "copy-on-write"
	if p.cows == nil {
		view = "read-only"
	}
	for _, c := range p.caches {
		if c.Env != "" {
			s.Caches = append(s.Caches, c.Dir+" ("+c.Env+", "+view+")")
		} else {
			s.Caches = append(s.Caches, c.Dir+" ("+view+")")
		}
	}
	return s
}

// network is what commands reach, with the host's network or not and, with it, TCP connections
// allowed to ports: Summary.Network.
func (p *Policy) network(hostNet bool, ports []uint16) string {
	switch {
	case hostNet && p.mech != MechanismNone && p.abi < 4:
		return "host, TCP connect unrestricted (Landlock ABI < 4)"
	case hostNet && p.mech != MechanismNone && len(ports) == 0:
		return "host, TCP connect denied (Landlock)"
	case hostNet && p.mech != MechanismNone:
		return "host, TCP connect only to port " + joinPorts(ports) + " (Landlock)"
	case p.mech == MechanismNamespaces:
		return "loopback only"
	case p.mech == MechanismLandlock && p.abi >= 4:
		return "TCP connect denied (Landlock)"
	}
	return "unrestricted"
}

// joinPorts lists ports as "1, 2".
func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// Describe is a one-line account for a progress line.
func (p *Policy) Describe() string {
	s := p.Summary()
	if s.Mechanism == MechanismNone {
		return fmt.Sprintf("sandbox %s: NOT confined", s.Mode)
	}
	caches := ""
	if len(s.Caches) > 0 {
		caches = "; caches: " + strings.Join(s.Caches, ", ")
	}
	return fmt.Sprintf("sandbox %s: %s (network: %s; writable: %s%s)", s.Mode, s.Mechanism, s.Network, strings.Join(s.Writable, ", "), caches)
}

// dnsLookup is what a failed name lookup means in the sandbox.
const dnsLookup = "a DNS lookup: commands have no network, so a dependency or toolchain must already be in the caches (nothing can be downloaded)"

// denials are the kernel's messages for operations a sandbox denies, with what they most likely mean.
var denials = []struct{ msg, meaning string }{
	{"Read-only file system", "a write outside the work tree, TMPDIR and HOME, or to the git directory (EROFS)"},
	{"Permission denied", "a write or read the sandbox denies, or a hidden path (EACCES)"},
	{"Operation not permitted", "an operation the sandbox denies (EPERM)"},
	{"Network is unreachable", "a network connection: commands have loopback only (ENETUNREACH)"},
	{"Temporary failure in name resolution", dnsLookup},
	{"Name or service not known", dnsLookup},
	{"Could not resolve host", dnsLookup}, // curl's, in cargo's and git's errors
	{"EAI_AGAIN", dnsLookup},              // Node's, in npm's errors
	{"GOTOOLCHAIN=local)", "a Go toolchain download: go.mod asks for a newer Go than the installed one, and toolchains cannot be downloaded in the sandbox (no network); lower the go line of go.mod (and any toolchain line) to the installed Go's version"},
}

// Explain names the denials visible in a confined command's output, for a failure brief: "" when
// there are none.
func Explain(output string) string {
	var found []string
	for _, d := range denials {
		if strings.Contains(output, d.msg) && !slices.Contains(found, d.meaning) {
			found = append(found, d.meaning)
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "The command runs in a sandbox; its output shows a denied operation: " + strings.Join(found, "; ") + "."
}

// Support is what this machine offers for confining commands.
type Support struct {
	UserNamespaces      bool   `json:"user_namespaces"` // the whole namespaces setup works here
	UserNamespacesError string `json:"user_namespaces_error,omitempty"`
	LandlockABI         int    `json:"landlock_abi"` // 0: no Landlock
	LandlockError       string `json:"landlock_error,omitempty"`
	// CopyOnWrite: caches can be shown copy-on-write (with UserNamespaces).
	CopyOnWrite      bool   `json:"copy_on_write"`
	CopyOnWriteError string `json:"copy_on_write_error,omitempty"`
}
