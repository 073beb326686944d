package lang

import (
	"context"
	"encoding/json"
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
	// to reach the network), and GOENV, the user's `go env -w` settings, which the private HOME
	// would hide (GOFLAGS among them: the same flags make the same cache keys).
	Env []string
}

// MachineToolchains asks the installed toolchains where their caches are, once per process: `go
// env`, `npm config get cache`, `pip cache dir`, `yarn cache dir`, `pnpm store path`, at once and
// each within a few seconds; rustup's and cargo's homes, Maven's ~/.m2 and Gradle's home come from
// the environment or their defaults. A toolchain that is missing or does not answer is left out;
// so is a directory that does not exist (the sandbox skips it).
var MachineToolchains = sync.OnceValue(func() Toolchains {
	return findToolchains(askToolchain, os.Getenv)
})

// askTimeout bounds each question to a toolchain (a cold npm or a pyenv shim takes a second).
const askTimeout = 5 * time.Second

// askToolchain runs argv if its program is installed and returns its output, trimmed.
func askToolchain(argv ...string) (string, bool) {
	if !proc.Found(argv[0]) {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	out, err := proc.Output(ctx, "", argv, nil)
	return strings.TrimSpace(string(out)), err == nil
}

// A question finds the caches of one toolchain by asking it, and the defaults of its settings.
type question func(ask func(argv ...string) (string, bool)) ([]sandbox.Cache, []string)

var questions = []question{
	func(ask func(...string) (string, bool)) ([]sandbox.Cache, []string) {
		out, ok := ask("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOENV")
		var env struct{ GOCACHE, GOMODCACHE, GOENV string }
		if !ok || json.Unmarshal([]byte(out), &env) != nil {
			return nil, nil
		}
		var caches []sandbox.Cache
		if filepath.IsAbs(env.GOCACHE) { // not "off"
			caches = append(caches, sandbox.Cache{Dir: env.GOCACHE, Env: "GOCACHE"})
		}
		if filepath.IsAbs(env.GOMODCACHE) {
			caches = append(caches, sandbox.Cache{Dir: env.GOMODCACHE, Env: "GOMODCACHE", ReadOnlyFallback: true})
		}
		settings := []string{"GOTOOLCHAIN=local"}
		if filepath.IsAbs(env.GOENV) { // not "off"
			settings = append(settings, "GOENV="+env.GOENV)
		}
		return caches, settings
	},
	answer("npm_config_cache", "npm", "config", "get", "cache"),
	answer("PIP_CACHE_DIR", "pip3", "cache", "dir"),
	answer("YARN_CACHE_FOLDER", "yarn", "cache", "dir"),
	answer("npm_config_store_dir", "pnpm", "store", "path"),
}

// answer is the question whose answer, an absolute path, is the cache that variable names.
func answer(variable string, argv ...string) question {
	return func(ask func(...string) (string, bool)) ([]sandbox.Cache, []string) {
		out, ok := ask(argv...)
		if !ok || !filepath.IsAbs(out) || strings.Contains(out, "\n") {
			return nil, nil
		}
		return []sandbox.Cache{{Dir: out, Env: variable}}, nil
	}
}

// findToolchains asks the questions at once, then adds the homes that need no asking, in a fixed
// order.
func findToolchains(ask func(argv ...string) (string, bool), getenv func(string) string) Toolchains {
	caches, settings := make([][]sandbox.Cache, len(questions)), make([][]string, len(questions))
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Go(func() { caches[i], settings[i] = q(ask) })
	}
	wg.Wait()
	var t Toolchains
	for i := range questions {
		t.Caches, t.Env = append(t.Caches, caches[i]...), append(t.Env, settings[i]...)
	}
	home := getenv("HOME")
	dir := func(variable, def string) string {
		if v := getenv(variable); filepath.IsAbs(v) {
			return v
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, def)
	}
	for _, c := range []sandbox.Cache{
		// rustup's proxies (~/.cargo/bin/cargo) find their toolchains through these; the
		// private HOME would hide the defaults.
		{Dir: dir("RUSTUP_HOME", ".rustup"), Env: "RUSTUP_HOME", ReadOnlyFallback: true},
		{Dir: dir("CARGO_HOME", ".cargo"), Env: "CARGO_HOME", ReadOnlyFallback: true},
		// Java takes its user.home from the password database, not HOME: Maven finds ~/.m2 at
		// its own path.
		{Dir: dir("", ".m2")},
		{Dir: dir("GRADLE_USER_HOME", ".gradle"), Env: "GRADLE_USER_HOME"},
	} {
		if c.Dir != "" {
			t.Caches = append(t.Caches, c)
		}
	}
	return t
}
