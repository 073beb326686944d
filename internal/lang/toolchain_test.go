package lang

import (
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc/sandbox"
)

func TestFindToolchains(t *testing.T) {
	goAnswer := `{"GOCACHE": "/c/go-build", "GOMODCACHE": "/g/pkg/mod", "GOENV": "/h/.config/go/env"}`
	cases := []struct {
		name    string
		answers map[string]string // the first word of the question → the answer; missing: fails
		env     map[string]string
		want    []sandbox.Cache
		wantEnv []string
	}{
		{"nothing installed, no HOME", nil, nil, nil, nil},
		{"defaults under HOME", nil, map[string]string{"HOME": "/h"}, []sandbox.Cache{
			{Dir: "/h/.rustup", Env: "RUSTUP_HOME", ReadOnlyFallback: true}, {Dir: "/h/.cargo", Env: "CARGO_HOME", ReadOnlyFallback: true},
			{Dir: "/h/.m2"}, {Dir: "/h/.gradle", Env: "GRADLE_USER_HOME"},
		}, nil},
		{"every toolchain answers", map[string]string{"go": goAnswer, "npm": "/h/.npm\n", "pip3": "/h/.cache/pip", "yarn": "/h/.cache/yarn", "pnpm": "/h/.pnpm-store"},
			map[string]string{"HOME": "/h", "RUSTUP_HOME": "/opt/rustup", "CARGO_HOME": "/opt/cargo", "GRADLE_USER_HOME": "relative"}, []sandbox.Cache{
				{Dir: "/c/go-build", Env: "GOCACHE"}, {Dir: "/g/pkg/mod", Env: "GOMODCACHE", ReadOnlyFallback: true},
				{Dir: "/h/.npm", Env: "npm_config_cache"}, {Dir: "/h/.cache/pip", Env: "PIP_CACHE_DIR"},
				{Dir: "/h/.cache/yarn", Env: "YARN_CACHE_FOLDER"}, {Dir: "/h/.pnpm-store", Env: "npm_config_store_dir"},
				{Dir: "/opt/rustup", Env: "RUSTUP_HOME", ReadOnlyFallback: true}, {Dir: "/opt/cargo", Env: "CARGO_HOME", ReadOnlyFallback: true},
				{Dir: "/h/.m2"}, {Dir: "/h/.gradle", Env: "GRADLE_USER_HOME"},
			}, []string{"GOTOOLCHAIN=local", "GOENV=/h/.config/go/env"}},
		{"odd answers are left out", map[string]string{"go": `{"GOCACHE": "off", "GOMODCACHE": "", "GOENV": "off"}`, "npm": "undefined", "pip3": "ERROR: pip cache commands can not function since cache is disabled.", "yarn": "/a\n/b"},
			nil, nil, []string{"GOTOOLCHAIN=local"}},
		{"go that does not speak JSON", map[string]string{"go": "GOCACHE=/x"}, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ask := func(argv ...string) (string, bool) {
				out, ok := c.answers[argv[0]]
				return strings.TrimSpace(out), ok
			}
			got := findToolchains(ask, func(name string) string { return c.env[name] })
			if !slices.Equal(got.Caches, c.want) || !slices.Equal(got.Env, c.wantEnv) {
				t.Errorf("findToolchains = %+v, %q\nwant %+v, %q", got.Caches, got.Env, c.want, c.wantEnv)
			}
		})
	}
}
