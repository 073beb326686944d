package deps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// stepEnv is what a driver knows about one run of its step.
type stepEnv struct {
	Root    string   // the work tree, absolute
	Gateway *Gateway // the registry, as the package manager must reach it
	Cache   string   // this ecosystem's cache directory, writable during the step
	Opts    Options
	// Resolved reports that the inputs are, byte for byte (with the same registry and options),
	// those a successful step of this ecosystem left: what the package manager would resolve from
	// them is already in the lockfiles, and only the install is left to do (after a rollback
	// removed the installed tree, or in a fresh clone).
	Resolved bool
	// HostEnv reads the user's environment (GOPRIVATE, GONOSUMDB, GOSUMDB, …).
	HostEnv func(name string) string
	log     *Log
	ignored []string
	undo    []func() error
}

// Ignore records a setting in a file the model could write that the harness overrides (a
// registry or proxy line of a project .npmrc, a source replacement in .cargo/config.toml, an
// index URL in requirements.txt), for the step's report.
func (e *stepEnv) Ignore(what string) { e.ignored = append(e.ignored, what) }

// Undo registers f to run once the commands ended, whether they succeeded or not (after finish),
// last registered first: it puts back what prepare changed in files the user keeps (lockfile URLs
// pointed at the gateway), so that a failed step leaves no gateway address behind.
func (e *stepEnv) Undo(f func() error) { e.undo = append(e.undo, f) }

// Refuse logs a refusal decided before any request: a dependency URL on a host not configured.
func (e *stepEnv) Refuse(method, url, reason string) {
	e.log.Add(Request{Method: method, URL: url, Status: http.StatusForbidden, Decision: Refused, Reason: reason})
}

// command is one package manager run of a step.
type command struct {
	Argv []string
	Env  []string // NAME=value entries set for this command, over the step's environment
}

// driver is what the step does for one ecosystem.
type driver struct {
	eco Ecosystem
	// inputs are the manifests and lockfiles present in root (slash-separated, relative) whose
	// bytes decide whether the step must run; none: the ecosystem is not used here.
	inputs func(root string) ([]string, error)
	// installed is the directory of the work tree the step installs into ("node_modules",
	// ".venv"); "" when packages go to the cache only (Go, cargo).
	installed string
	// lockfiles are the files the step may write, committed with the work order's result.
	lockfiles []string
	// rewrite rewrites registry documents so that the URLs they name lead back to the gateway.
	rewrite func(g *Gateway, path, contentType string, body []byte) []byte
	// prepare checks and adjusts the tree before the commands (refuses dependency URLs on hosts
	// not configured: a StepError; points lockfile URLs at the gateway) and returns the commands.
	prepare func(e *stepEnv) ([]command, error)
	// finish runs once the commands succeeded: lockfile URLs back to the registry's. It returns
	// how many packages are installed, -1 when unknown.
	finish func(e *stepEnv) (int, error)
	// explain picks, from a failed command's output, the lines that say what failed (the package
	// and the registry's answer); nil keeps the last lines.
	explain func(output string) string
	// verifyEnv are the NAME=value entries later commands run with (GOPROXY=off, VIRTUAL_ENV, …).
	verifyEnv func(root, cache string) []string
}

// drivers are the ecosystems the step can install, by name.
var drivers = map[Ecosystem]*driver{}

// Spec is one dependency step: the work tree as an attempt left it.
type Spec struct {
	Root string // the work tree
	Opts Options
	// Sandbox confines the package managers: prepared from StepRequest, so that the dependency
	// cache is their writable HOME.
	Sandbox *sandbox.Policy
	// Env is the base environment of the commands (the run's, with the variables it passes).
	Env []string
	// Dir receives deps.jsonl and the commands' logs (logs/deps_<eco>_<n>.txt).
	Dir     string
	Timeout time.Duration // per command; 0: none
	// Progress receives one line per ecosystem; nil discards.
	Progress func(format string, args ...any)
	// OnStart is proc.Spec.OnStart for each command (the attempt journal records it).
	OnStart func(pgid int, startTicks uint64)
}

// Outcome is what the step did for one ecosystem, as run_summary.json records it.
type Outcome struct {
	Ecosystem  Ecosystem `json:"ecosystem"`
	Skipped    bool      `json:"skipped"`
	DurationMS int64     `json:"duration_ms"`
	// Packages is how many packages are installed after the step, -1 when the tool does not say.
	Packages  int      `json:"packages"`
	Bytes     int64    `json:"bytes_fetched"`
	Requests  int      `json:"requests"`
	Refused   int      `json:"refused"`
	Lockfiles []string `json:"lockfiles,omitempty"`
	// Ignored are the settings in model-writable files that the harness overrode.
	Ignored []string `json:"ignored,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Report is the step's account of one attempt.
type Report struct {
	Outcomes []Outcome `json:"ecosystems"`
	// Env are the NAME=value entries later commands of the attempt must run with.
	Env []string `json:"-"`
	// Lockfiles are the lockfiles the step wrote or changed, to commit with the result.
	Lockfiles []string `json:"-"`
	// Ran reports whether any package manager ran (a rollback must then forget the stamps).
	Ran bool `json:"-"`
}

// Step installs, for each ecosystem root uses, what its manifests and lockfiles name, unless what
// is installed already matches them. A failure the attempt is blamed for is a *StepError (errors.Is
// ErrStep); the Report then still says what ran.
func Step(ctx context.Context, s Spec) (Report, error) {
	var rep Report
	cache, err := s.Opts.CacheDir()
	if err != nil {
		return rep, err
	}
	for _, eco := range Ecosystems {
		d := drivers[eco]
		if d == nil {
			continue
		}
		inputs, err := d.inputs(s.Root)
		if err != nil {
			return rep, err
		}
		if len(inputs) == 0 {
			continue
		}
		ecoCache := filepath.Join(cache, string(eco))
		if err := os.MkdirAll(ecoCache, 0o755); err != nil {
			return rep, fmt.Errorf("dependency cache: %w", err)
		}
		before := hashFiles(s.Root, d.lockfiles)
		start := time.Now()
		out, err := s.one(ctx, d, inputs, ecoCache)
		out.DurationMS = time.Since(start).Milliseconds()
		if !out.Skipped {
			rep.Ran = true
		}
		if err != nil {
			out.Error = err.Error()
		}
		rep.Outcomes = append(rep.Outcomes, out)
		if err != nil {
			return rep, err
		}
		if d.verifyEnv != nil {
			rep.Env = append(rep.Env, d.verifyEnv(s.Root, ecoCache)...)
		}
		after := hashFiles(s.Root, d.lockfiles)
		for _, lf := range d.lockfiles {
			if after[lf] != before[lf] && after[lf] != "" {
				rep.Lockfiles = append(rep.Lockfiles, lf)
			}
		}
	}
	return rep, nil
}

// hashFiles hashes those of names that are regular files of root, by name.
func hashFiles(root string, names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(n))); err == nil {
			sum := sha256.Sum256(b)
			out[n] = hex.EncodeToString(sum[:])
		}
	}
	return out
}

// one runs the step of one ecosystem.
func (s Spec) one(ctx context.Context, d *driver, inputs []string, cache string) (Outcome, error) {
	out := Outcome{Ecosystem: d.eco, Packages: -1}
	key, err := stampKey(s.Root, d.eco, s.Opts, inputs)
	if err != nil {
		return out, err
	}
	if stamped(s.Root, d, cache, key) {
		out.Skipped = true
		s.progress("deps: %s: installed packages match %s; skipped", d.eco, strings.Join(inputs, ", "))
		return out, nil
	}
	s.progress("deps: %s: installing from %s through the gateway to %s", d.eco, strings.Join(inputs, ", "), s.Opts.Registry(d.eco))
	log, err := OpenLog(filepath.Join(s.Dir, "deps.jsonl"))
	if err != nil {
		return out, err
	}
	e := &stepEnv{Root: s.Root, Cache: cache, Opts: s.Opts, Resolved: fileExists(filepath.Join(cache, resolvedDir, key)), HostEnv: os.Getenv, log: log}
	err = s.install(ctx, d, e, &out)
	for _, undo := range slices.Backward(e.undo) {
		if uerr := undo(); err == nil {
			err = uerr
		}
	}
	out.Requests, out.Refused, out.Bytes = log.Counts()
	out.Ignored = e.ignored
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var se *StepError
		if errors.As(err, &se) {
			if refusals := log.Refusals(); len(refusals) > 0 && !strings.Contains(se.Message, "refused") {
				se.Message += "\nThe gateway refused: " + strings.Join(refusals, "; ")
			}
		}
		return out, err
	}
	for _, lf := range d.lockfiles {
		if slices.Contains(inputs, lf) || fileExists(filepath.Join(s.Root, filepath.FromSlash(lf))) {
			out.Lockfiles = append(out.Lockfiles, lf)
		}
	}
	// The key of what is there now: the step may have written the lockfile.
	after, err := d.inputs(s.Root)
	if err != nil {
		return out, err
	}
	if key, err = stampKey(s.Root, d.eco, s.Opts, after); err != nil {
		return out, err
	}
	if err := stamp(s.Root, d, cache, key); err != nil {
		return out, err
	}
	return out, resolved(d, cache, key)
}

// install opens the gateway and runs the driver's commands through it, each through a port of
// its own. With the namespaces mechanism every port has the same address; elsewhere each has a
// new one, and the lockfiles, which may name the gateway between two commands, follow it.
func (s Spec) install(ctx context.Context, d *driver, e *stepEnv, out *Outcome) error {
	port, err := s.Sandbox.OpenPort()
	if err != nil {
		return fmt.Errorf("dependency gateway: %w", err)
	}
	defer func() { _ = port.Close() }()
	upstream := s.Opts.Registry(d.eco)
	g, err := NewGateway(d.eco, upstream, "http://"+port.Addr()+"/", e.log, GatewayOptions{Private: s.Opts.configured(d.eco)})
	if err != nil {
		return err
	}
	g.rewrite = d.rewrite
	e.Gateway = g
	cmds, err := d.prepare(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "logs"), 0o755); err != nil {
		return err
	}
	for i, c := range cmds {
		if i > 0 {
			old := g.Base()
			if port, err = s.Sandbox.OpenPort(); err != nil {
				return fmt.Errorf("dependency gateway: %w", err)
			}
			if err := g.rebase("http://"+port.Addr()+"/", s.Root, d.lockfiles); err != nil {
				return err
			}
			// The command names the gateway as prepare knew it (npm's --registry, GOPROXY).
			for _, list := range [][]string{c.Argv, c.Env} {
				for j := range list {
					list[j] = strings.ReplaceAll(list[j], old, g.Base())
				}
			}
		}
		logPath := filepath.Join(s.Dir, "logs", fmt.Sprintf("deps_%s_%d.txt", d.eco, i+1))
		res := s.runThrough(ctx, port, g, c, logPath)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if res.ExitCode != 0 {
			tail, _ := proc.Tail(logPath, 16000)
			msg := lastLines(tail, 20)
			if d.explain != nil {
				if m := d.explain(tail); m != "" {
					msg = m
				}
			}
			if res.Err != "" {
				msg = res.Err + "\n" + msg
			}
			return &StepError{Ecosystem: d.eco, Command: strings.Join(c.Argv, " "), Message: strings.ReplaceAll(msg, g.Base(), g.Upstream())}
		}
	}
	if d.finish != nil {
		n, err := d.finish(e)
		if err != nil {
			return err
		}
		out.Packages = n
	}
	return nil
}

// runThrough runs one command with the gateway serving its port until it ends.
func (s Spec) runThrough(ctx context.Context, port *sandbox.Port, g *Gateway, c command, logPath string) proc.Result {
	srv := &http.Server{Handler: g, ReadHeaderTimeout: time.Minute}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(port.Listener())
	}()
	res := proc.Run(ctx, proc.Spec{
		Argv: c.Argv, Dir: s.Root, Timeout: s.Timeout, Stdout: logPath, Stderr: logPath, Env: proc.SetEnv(s.Env, c.Env...),
		MaxOutputBytes: proc.DefaultMaxOutputBytes, Sandbox: s.Sandbox, Port: port, OnStart: s.OnStart,
	})
	_ = srv.Close()
	_ = port.Close()
	<-served
	return res
}

func (s Spec) progress(format string, args ...any) {
	if s.Progress != nil {
		s.Progress(format, args...)
	}
}

// stampName is the file, inside an installed tree, that names what was installed there.
const stampName = ".factory-deps"

// stampKey hashes what decides an install: the ecosystem, its registry, the options that change
// what is installed, and each input's path and bytes.
func stampKey(root string, eco Ecosystem, o Options, inputs []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "factory deps v1\x00%s\x00%s\x00%t\x00", eco, o.Registry(eco), o.AllowSdist)
	for _, in := range inputs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(in)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("dependency step: read %s: %w", in, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", in, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stamped reports whether what key describes is installed: a stamp in the installed tree (which
// goes with it), or, for ecosystems that install into the cache only, in the cache (which only
// grows).
func stamped(root string, d *driver, cache, key string) bool {
	if d.installed != "" {
		b, err := os.ReadFile(filepath.Join(root, d.installed, stampName))
		return err == nil && strings.TrimSpace(string(b)) == key
	}
	return fileExists(filepath.Join(cache, "stamps", key))
}

func stamp(root string, d *driver, cache, key string) error {
	path := filepath.Join(cache, "stamps", key)
	if d.installed != "" {
		path = filepath.Join(root, d.installed, stampName)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("dependency stamp: %w", err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o644); err != nil {
		return fmt.Errorf("dependency stamp: %w", err)
	}
	return nil
}

// resolvedDir is the directory of the dependency cache's ecosystem directory that names, one
// empty file per key, the inputs successful steps left (stepEnv.Resolved). Unlike an installed
// tree's stamp, such a record outlives the tree: a rollback does not make the lockfile it restores
// any less resolved.
const resolvedDir = "resolved"

// resolved records that the inputs key describes are resolved, for drivers that install into the
// work tree (for the others the cache's stamp says more: installed).
func resolved(d *driver, cache, key string) error {
	if d.installed == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(cache, resolvedDir), 0o755); err != nil {
		return fmt.Errorf("dependency stamp: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cache, resolvedDir, key), nil, 0o644); err != nil {
		return fmt.Errorf("dependency stamp: %w", err)
	}
	return nil
}

// Forget removes the stamps of the trees installed in root, so that the next step installs again:
// for after a rollback, which may restore a stamp but not every file of the tree it describes.
func Forget(root string) error {
	var errs []error
	for _, d := range drivers {
		if d.installed == "" {
			continue
		}
		if err := os.Remove(filepath.Join(root, d.installed, stampName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// existing are those of names (slash-separated, relative to root) that are regular files.
func existing(root string, names ...string) []string {
	var out []string
	for _, n := range names {
		if fileExists(filepath.Join(root, filepath.FromSlash(n))) {
			out = append(out, n)
		}
	}
	return out
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StepRequest is the sandbox request for the step's package managers, from the run's: the same
// confinement, with the dependency cache as their writable HOME (each ecosystem's cache, which the
// step writes, is a directory of it), and the toolchain caches whose variables the drivers set
// themselves shown without them.
func StepRequest(run sandbox.Request, cache string) (sandbox.Request, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return run, fmt.Errorf("dependency cache: %w", err)
	}
	req := run
	req.Home = cache
	req.Caches = withoutVars(run.Caches, stepVars)
	return req, nil
}

// stepVars are the variables the drivers point at the dependency cache.
var stepVars = []string{"GOMODCACHE", "CARGO_HOME", "npm_config_cache", "NPM_CONFIG_CACHE", "PIP_CACHE_DIR", "YARN_CACHE_FOLDER"}

// RunCaches are the caches verification and acceptance commands see with the dependency step on:
// the run's, but for the variables the step's environment sets instead (GOMODCACHE, CARGO_HOME),
// plus the dependency cache itself (copy-on-write, or read-only with Landlock alone).
func RunCaches(caches []sandbox.Cache, cache string) []sandbox.Cache {
	return append(withoutVars(caches, []string{"GOMODCACHE", "CARGO_HOME"}), sandbox.Cache{Dir: cache, ReadOnlyFallback: true})
}

// withoutVars are caches, those whose variable is one of vars shown without it: the step's
// environment points that variable elsewhere, and the sandbox would set it back.
func withoutVars(caches []sandbox.Cache, vars []string) []sandbox.Cache {
	out := make([]sandbox.Cache, 0, len(caches)+1)
	for _, c := range caches {
		if slices.Contains(vars, c.Env) {
			c.Env = ""
		}
		out = append(out, c)
	}
	return out
}
