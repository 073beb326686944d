package deps

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/factory-harness/factory/internal/lang"
)

// The Go step downloads every module of go.mod's build list into the dependency cache's module
// cache (which later commands see as GOMODCACHE, read-only, with GOPROXY=off and -mod=readonly)
// and records their checksums in go.sum (`go mod download all`), then resolves the imports of the
// module's packages and tests, adding requirements for imports no module provides yet (`go list
// -mod=mod -deps -test ./...`). Modules already in the user's own module cache are taken from it
// (a file:// proxy, read-only) before the gateway is asked; checksums are checked against go.sum
// and the checksum database, through the gateway, as the user's GOSUMDB, GONOSUMDB and GOPRIVATE
// say.
func init() {
	drivers[Go] = &driver{
		eco:       Go,
		inputs:    func(root string) ([]string, error) { return goInputs(root), nil },
		lockfiles: []string{"go.mod", "go.sum"},
		prepare:   goPrepare,
		explain:   goExplain,
		verifyEnv: func(_, cache string) []string {
			flags := os.Getenv("GOFLAGS")
			if !strings.Contains(flags, "-mod=") {
				flags = strings.TrimSpace(flags + " -mod=readonly")
			}
			return []string{"GOMODCACHE=" + filepath.Join(cache, "mod"), "GOPROXY=off", "GOFLAGS=" + flags}
		},
	}
}

// goInputs are go.mod and its companions, when go.mod requires a module: a module that requires
// none needs no step (and its go.mod no rewrite).
func goInputs(root string) []string {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !requires(mod) {
		return nil
	}
	return existing(root, "go.mod", "go.sum", "go.work", "go.work.sum")
}

// goPassed are the user's variables the go command keeps for the step: which modules are private
// (not checked against the checksum database) and which checksum database to use.
var goPassed = []string{"GOPRIVATE", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB", "GONOPROXY", "GOINSECURE"}

func goPrepare(e *stepEnv) ([]command, error) {
	proxy := e.Gateway.Base()
	if userCache := userModCache(); userCache != "" {
		proxy = "file://" + filepath.ToSlash(filepath.Join(userCache, "cache", "download")) + "," + proxy
	}
	env := []string{
		"GOMODCACHE=" + filepath.Join(e.Cache, "mod"),
		"GOPROXY=" + proxy,
		"GOFLAGS=-mod=mod",
		// The step's settings are the harness's and the user's variables, not a go.env or `go env
		// -w` file a command could have written.
		"GOENV=off",
		"GOTOOLCHAIN=local",
		"GOWORK=off",
		"GOTELEMETRY=off",
	}
	for _, name := range goPassed {
		if v := e.HostEnv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return []command{
		{Argv: []string{"go", "mod", "download", "all"}, Env: env},
		{Argv: []string{"go", "list", "-deps", "-test", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "./..."}, Env: env},
	}, nil
}

// userModCache is the user's own module cache, if it has a download cache: read through a file://
// proxy, it saves a download of what the machine already has.
func userModCache() string {
	for _, c := range lang.MachineToolchains().Caches {
		if c.Env != "GOMODCACHE" {
			continue
		}
		if info, err := os.Stat(filepath.Join(c.Dir, "cache", "download")); err == nil && info.IsDir() {
			return c.Dir
		}
	}
	return ""
}

// goExplain keeps the go command's error lines.
func goExplain(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "go: ") || strings.Contains(line, "verifying") || strings.Contains(line, "SECURITY ERROR") ||
			strings.Contains(line, "no required module") || strings.Contains(line, "cannot find module") {
			keep = append(keep, line)
		}
	}
	if len(keep) > 12 {
		keep = keep[len(keep)-12:]
	}
	return strings.Join(keep, "\n")
}

// requires reports whether a go.mod has a require directive (a line or a block).
func requires(mod []byte) bool {
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "require" {
			return true
		}
	}
	return false
}
