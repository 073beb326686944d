package lang

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// Toolchains is what confined commands need from the machine's toolchains: their caches and homes,
// which the sandbox shows copy-on-write, and the settings they run with there.
type Toolchains struct {
	Caches []sandbox.Cache
	// Env holds defaults for the commands' environment: GOTOOLCHAIN=local, since no toolchain can
	// be downloaded in the sandbox (a Go that go.mod finds too old then says so instead of failing
	// to reach the network); GOENV, the user's `go env -w` settings, which the private HOME would
	// hide (GOFLAGS among them: the same flags make the same cache keys); and npm's settings that
	// reach for the network on every run (the update check costs npx half a second there).
	Env []string
}

// MachineToolchains finds the toolchains' caches and homes, once per process, asking none of
// them: Go's configuration is derived as go derives it (deriveGoEnv; `go env` itself, ~10 ms,
// only where that cannot be settled), the others are found as they find themselves, from their
// variables, their configuration and their defaults: asking npm or pip costs 0.3 to 0.8 s, more
// than a whole attempt. A directory that does not exist is left to the sandbox, which skips it.
var MachineToolchains = sync.OnceValue(func() Toolchains {
	return findToolchains(machineGoEnv, os.Getenv, os.ReadFile)
})

// machineGoEnv is this machine's go configuration, and whether go is installed and runs.
func machineGoEnv() (goEnv, bool) {
	switch e, v := deriveGoEnv(os.Getenv); v {
	case goDerived:
		return e, true
	case goAbsent:
		return goEnv{}, false
	}
	return askGoEnv(askToolchain)
}

// askTimeout bounds the question to a toolchain.
const askTimeout = 5 * time.Second

// askToolchain runs argv if its program is installed and returns its output. It runs in /, outside
// any module or package: a go.mod asking for a newer Go would make go switch toolchains. It leaves
// no trace in the user's home: go writes telemetry counters under the user's configuration
// directory on every run, so that directory is a temporary one, removed after, and GOENV names the
// user's go env file where go would have found it.
func askToolchain(argv ...string) ([]byte, bool) {
	if !proc.Found(argv[0]) {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "factory-ask-")
	if err != nil {
		return nil, false
	}
	defer os.RemoveAll(tmp)
	env := []string{"XDG_CONFIG_HOME=" + tmp}
	if os.Getenv("GOENV") == "" {
		file := "off" // no configuration directory: go reads no env file
		if dir, err := os.UserConfigDir(); err == nil {
			file = filepath.Join(dir, "go", "env")
		}
		env = append(env, "GOENV="+file)
	}
	out, err := proc.Output(ctx, "/", argv, proc.SetEnv(os.Environ(), env...))
	return out, err == nil
}

// findToolchains takes go's configuration (goConf: false if go is not installed), then adds the
// other toolchains' directories, in a fixed order.
func findToolchains(goConf func() (goEnv, bool), getenv func(string) string, readFile func(string) ([]byte, error)) Toolchains {
	var t Toolchains
	if env, ok := goConf(); ok {
		if filepath.IsAbs(env.GOCACHE) { // not "off"
			t.Caches = append(t.Caches, sandbox.Cache{Dir: env.GOCACHE, Env: "GOCACHE"})
		}
		if filepath.IsAbs(env.GOMODCACHE) {
			t.Caches = append(t.Caches, sandbox.Cache{Dir: env.GOMODCACHE, Env: "GOMODCACHE", ReadOnlyFallback: true})
		}
		t.Env = append(t.Env, "GOTOOLCHAIN=local")
		if filepath.IsAbs(env.GOENV) { // not "off"
			t.Env = append(t.Env, "GOENV="+env.GOENV)
		}
	}
	t.Env = append(t.Env, "npm_config_update_notifier=false", "npm_config_audit=false")
	home := getenv("HOME")
	// dir is the variable's value if absolute, else def under HOME ("" without HOME).
	dir := func(variable, def string) string {
		if p := getenv(variable); filepath.IsAbs(p) {
			return p
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, def)
	}
	// xdg is sub in an XDG base directory: the variable's, else def under HOME.
	xdg := func(variable, def, sub string) string { return filepath.Join(dir(variable, def), sub) }
	npm := dir("npm_config_cache", ".npm")
	if getenv("npm_config_cache") == "" && home != "" {
		if b, err := readFile(filepath.Join(home, ".npmrc")); err == nil {
			if c := npmrcCache(b, home); c != "" {
				npm = c
			}
		}
	}
	yarn := getenv("YARN_CACHE_FOLDER")
	if !filepath.IsAbs(yarn) {
		yarn = xdg("XDG_CACHE_HOME", ".cache", "yarn")
	}
	pip := getenv("PIP_CACHE_DIR")
	if !filepath.IsAbs(pip) {
		pip = xdg("XDG_CACHE_HOME", ".cache", "pip")
	}
	for _, c := range []sandbox.Cache{
		// rustup's proxies (~/.cargo/bin/cargo) find their toolchains through these; the
		// private HOME would hide the defaults.
		{Dir: dir("RUSTUP_HOME", ".rustup"), Env: "RUSTUP_HOME", ReadOnlyFallback: true},
		{Dir: dir("CARGO_HOME", ".cargo"), Env: "CARGO_HOME", ReadOnlyFallback: true},
		{Dir: npm, Env: "npm_config_cache"},
		{Dir: yarn, Env: "YARN_CACHE_FOLDER"},
		{Dir: xdg("XDG_DATA_HOME", ".local/share", "pnpm/store"), Env: "npm_config_store_dir"},
		{Dir: pip, Env: "PIP_CACHE_DIR"},
		// Java takes its user.home from the password database, not HOME: Maven finds ~/.m2 at
		// its own path.
		{Dir: dir("", ".m2")},
		{Dir: dir("GRADLE_USER_HOME", ".gradle"), Env: "GRADLE_USER_HOME"},
	} {
		if filepath.IsAbs(c.Dir) {
			t.Caches = append(t.Caches, c)
		}
	}
	return t
}

// npmrcCache is the cache an .npmrc sets ("cache = ~/x" or an absolute path), or "".
func npmrcCache(npmrc []byte, home string) string {
	sc := bufio.NewScanner(bytes.NewReader(npmrc))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.TrimSpace(key) != "cache" {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		if rest, ok := strings.CutPrefix(value, "~/"); ok {
			value = filepath.Join(home, rest)
		}
		if filepath.IsAbs(value) {
			return filepath.Clean(value)
		}
	}
	return ""
}
