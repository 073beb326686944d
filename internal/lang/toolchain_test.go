package lang

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

func TestFindToolchains(t *testing.T) {
	// The directories that need no asking, under HOME /h and with no variable set.
	defaults := []sandbox.Cache{
		{Dir: "/h/.rustup", Env: "RUSTUP_HOME", ReadOnlyFallback: true}, {Dir: "/h/.cargo", Env: "CARGO_HOME", ReadOnlyFallback: true},
		{Dir: "/h/.npm", Env: "npm_config_cache"}, {Dir: "/h/.cache/yarn", Env: "YARN_CACHE_FOLDER"},
		{Dir: "/h/.local/share/pnpm/store", Env: "npm_config_store_dir"}, {Dir: "/h/.cache/pip", Env: "PIP_CACHE_DIR"},
		{Dir: "/h/.m2"}, {Dir: "/h/.gradle", Env: "GRADLE_USER_HOME"},
	}
	npm := []string{"npm_config_update_notifier=false", "npm_config_audit=false"}
	goCaches := []sandbox.Cache{{Dir: "/c/go-build", Env: "GOCACHE"}, {Dir: "/g/pkg/mod", Env: "GOMODCACHE", ReadOnlyFallback: true}}
	cases := []struct {
		name    string
		goEnv   *goEnv // go's configuration; nil: go is not installed
		env     map[string]string
		npmrc   string
		want    []sandbox.Cache
		wantEnv []string
	}{
		{"nothing installed, no HOME", nil, nil, "", nil, npm},
		{"defaults under HOME", nil, map[string]string{"HOME": "/h"}, "", defaults, npm},
		{"go answers", &goEnv{GOCACHE: "/c/go-build", GOMODCACHE: "/g/pkg/mod", GOENV: "/h/.config/go/env"}, map[string]string{"HOME": "/h"}, "",
			append(slices.Clone(goCaches), defaults...), append([]string{"GOTOOLCHAIN=local", "GOENV=/h/.config/go/env"}, npm...)},
		{"go's caches and env file off", &goEnv{GOCACHE: "off"}, nil, "", nil, append([]string{"GOTOOLCHAIN=local"}, npm...)},
		{"variables and XDG directories", nil, map[string]string{"HOME": "/h", "RUSTUP_HOME": "/opt/rustup", "CARGO_HOME": "/opt/cargo",
			"npm_config_cache": "/n", "YARN_CACHE_FOLDER": "/y", "XDG_CACHE_HOME": "/xc", "XDG_DATA_HOME": "/xd", "GRADLE_USER_HOME": "relative"},
			"cache=/ignored\n", []sandbox.Cache{
				{Dir: "/opt/rustup", Env: "RUSTUP_HOME", ReadOnlyFallback: true}, {Dir: "/opt/cargo", Env: "CARGO_HOME", ReadOnlyFallback: true},
				{Dir: "/n", Env: "npm_config_cache"}, {Dir: "/y", Env: "YARN_CACHE_FOLDER"},
				{Dir: "/xd/pnpm/store", Env: "npm_config_store_dir"}, {Dir: "/xc/pip", Env: "PIP_CACHE_DIR"},
				{Dir: "/h/.m2"}, {Dir: "/h/.gradle", Env: "GRADLE_USER_HOME"},
			}, npm},
		{".npmrc sets the cache", nil, map[string]string{"HOME": "/h"}, "registry=https://r.example/\n cache = \"~/npm-cache/\"\n",
			append(append(slices.Clone(defaults[:2]), sandbox.Cache{Dir: "/h/npm-cache", Env: "npm_config_cache"}), defaults[3:]...), npm},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			goConf := func() (goEnv, bool) {
				if c.goEnv == nil {
					return goEnv{}, false
				}
				return *c.goEnv, true
			}
			readFile := func(path string) ([]byte, error) {
				if path == "/h/.npmrc" && c.npmrc != "" {
					return []byte(c.npmrc), nil
				}
				return nil, os.ErrNotExist
			}
			got := findToolchains(goConf, func(name string) string { return c.env[name] }, readFile)
			if !slices.Equal(got.Caches, c.want) || !slices.Equal(got.Env, c.wantEnv) {
				t.Errorf("findToolchains = %+v, %q\nwant %+v, %q", got.Caches, got.Env, c.want, c.wantEnv)
			}
		})
	}
}

// Asking the real go leaves nothing in the user's home (go writes telemetry
// counters under its configuration directory on every run), and still
// names the user's go env file.
func TestAskToolchainLeavesNoTrace(t *testing.T) {
	if !proc.Found("go") {
		t.Skip("go is not installed")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GOENV", "")
	tc := findToolchains(func() (goEnv, bool) { return askGoEnv(askToolchain) }, os.Getenv, os.ReadFile)
	if want := "GOENV=" + filepath.Join(home, ".config", "go", "env"); !slices.Contains(tc.Env, want) {
		t.Errorf("Env %v lacks %s", tc.Env, want)
	}
	var left []string
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if p != home {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("asking go left files in HOME: %v", left)
	}
}
