package lang

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// goEnv is what the sandbox takes from the go command's configuration, as `go env` reports it.
type goEnv struct{ GOCACHE, GOMODCACHE, GOENV string }

// goVerdict says what deriveGoEnv could tell.
type goVerdict int

const (
	goDerived goVerdict = iota // goEnv is what go would answer
	goAbsent                   // go is not on PATH, or would refuse to run: nothing of Go's
	goAsk                      // a case the derivation cannot settle: ask go
)

// deriveGoEnv is `go env GOCACHE GOMODCACHE GOENV` computed the way the go command computes it
// (Go 1.26: cmd/go/internal/cfg, cache.DefaultDir and main's GOPATH checks), from getenv and the
// files it names, without running go: running it costs ~10 ms of CPU in every factory process.
// It answers for the go on PATH, the one confined commands run (GOTOOLCHAIN=local there), even
// where the user's GOTOOLCHAIN would have `go env` switch to another. Relative file names are
// taken relative to /, where askToolchain runs go.
func deriveGoEnv(getenv func(string) string) (goEnv, goVerdict) {
	exe, v := lookGo(getenv("PATH"))
	if v != goDerived {
		return goEnv{}, v
	}
	var e goEnv
	// The user's env file: $GOENV ("off": none), else go/env in os.UserConfigDir.
	switch file := getenv("GOENV"); file {
	case "off":
	case "":
		if dir, ok := userDir(getenv, "XDG_CONFIG_HOME", ".config"); ok {
			e.GOENV = filepath.Join(dir, "go/env")
		}
	default:
		e.GOENV = file
	}
	conf := map[string]string{}
	readGoEnvFile(conf, e.GOENV, false)

	// GOROOT, whose go.env holds defaults: the env file's, the environment's, else the one the
	// binary sits in (cmd/go reads os.Executable, symlinks resolved). A binary outside any GOROOT
	// falls back to the GOROOT built into it, which only go knows.
	root := conf["GOROOT"]
	if root == "" {
		root = getenv("GOROOT")
	}
	if root != "" {
		root = filepath.Clean(root)
	} else if root = installedGOROOT(exe); root == "" {
		return goEnv{}, goAsk
	}
	readGoEnvFile(conf, filepath.Join(root, "go.env"), true)
	goroot := getenv("GOROOT")
	if goroot == "" {
		goroot = root
	}
	if info, err := os.Stat(goroot); err != nil || !info.IsDir() {
		return goEnv{}, goAbsent // go: cannot find GOROOT directory
	}
	// cfg.Getenv: the environment, then the env file, then go.env.
	get := func(key string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return conf[key]
	}

	gopath := get("GOPATH")
	explicit := gopath != ""
	if home := getenv("HOME"); !explicit && home != "" {
		// go/build's default, unless it is the GOROOT go runs with: $GOROOT, else the one built
		// into the binary, which only go knows; ask when $HOME/go could be it.
		gopath = filepath.Join(home, "go")
		switch builtIn := getenv("GOROOT"); {
		case builtIn != "" && filepath.Clean(gopath) == filepath.Clean(builtIn):
			gopath = ""
		case builtIn == "" && (isGOROOT(gopath) || sameDir(gopath, root)):
			return goEnv{}, goAsk
		}
	}
	// main refuses a GOPATH entry starting with ~ and a relative one that was set, unless
	// GOPATH is GOROOT; a relative inferred one it drops after GOMODCACHE was derived from it.
	if filepath.Clean(gopath) != filepath.Clean(goroot) {
		for _, p := range filepath.SplitList(gopath) {
			if strings.HasPrefix(p, "~") || p != "" && !filepath.IsAbs(p) && explicit {
				return goEnv{}, goAbsent
			}
		}
	}

	e.GOMODCACHE = get("GOMODCACHE")
	if list := filepath.SplitList(gopath); e.GOMODCACHE == "" && len(list) > 0 && list[0] != "" {
		e.GOMODCACHE = filepath.Join(list[0], "pkg/mod")
	}
	switch e.GOCACHE = get("GOCACHE"); {
	case e.GOCACHE == "":
		e.GOCACHE = "off"
		if dir, ok := userDir(getenv, "XDG_CACHE_HOME", ".cache"); ok {
			e.GOCACHE = filepath.Join(dir, "go-build")
		}
	case !filepath.IsAbs(e.GOCACHE):
		e.GOCACHE = "off" // a relative GOCACHE, or "off"
	}
	return e, goDerived
}

// lookGo is exec.LookPath("go") in path (execute permission judged by the mode bits). A go found
// through a relative entry of PATH is left to go.
func lookGo(path string) (string, goVerdict) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, "go")
		if info, err := os.Stat(p); err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		if !filepath.IsAbs(p) {
			return "", goAsk
		}
		return p, goDerived
	}
	return "", goAbsent
}

// installedGOROOT is the GOROOT holding the go binary exe, as cmd/go's findGOROOT finds it: exe
// with its symlinks resolved, in GOROOT/bin or GOROOT/bin/GOOS_GOARCH; "" if neither.
func installedGOROOT(exe string) string {
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return ""
	}
	for _, up := range []string{"../..", "../../.."} {
		if dir := filepath.Join(exe, up); isGOROOT(dir) {
			return dir
		}
	}
	return ""
}

// isGOROOT is cmd/go's test: path has a pkg/tool directory.
func isGOROOT(path string) bool {
	info, err := os.Stat(filepath.Join(path, "pkg", "tool"))
	return err == nil && info.IsDir()
}

// sameDir reports whether a and b name the same existing directory.
func sameDir(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

// userDir is os.UserConfigDir or os.UserCacheDir of getenv's environment: $xdg if absolute (a
// relative one is an error), else def under HOME.
func userDir(getenv func(string) string, xdg, def string) (string, bool) {
	if dir := getenv(xdg); dir != "" {
		return dir, filepath.IsAbs(dir)
	}
	home := getenv("HOME")
	return home + "/" + def, home != ""
}

// readGoEnvFile adds the KEY=VALUE lines of a go env file to conf, as cmd/go's readEnvFile does:
// a line whose first byte is not A-Z, or without =, is skipped; values are taken as they are. In
// the user's file the last line for a key wins; GOROOT's go.env (defaults) sets only keys
// nothing set before.
func readGoEnvFile(conf map[string]string, file string, defaults bool) {
	if file == "" {
		return
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join("/", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for line := range bytes.Lines(data) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		key, value, ok := bytes.Cut(line, []byte("="))
		if !ok || line[0] < 'A' || 'Z' < line[0] {
			continue
		}
		if _, set := conf[string(key)]; defaults && set {
			continue
		}
		conf[string(key)] = string(value)
	}
}

// askGoEnv asks go itself, for the cases deriveGoEnv leaves to it.
func askGoEnv(ask func(argv ...string) ([]byte, bool)) (goEnv, bool) {
	out, ok := ask("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOENV")
	if !ok {
		return goEnv{}, false
	}
	var e goEnv
	if json.Unmarshal(out, &e) != nil {
		return goEnv{}, false
	}
	return e, true
}
