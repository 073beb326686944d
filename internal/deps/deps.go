// Package deps is the dependency step: in each attempt, after the model's writes and before
// verification, the harness (never the model) installs what the work tree's manifests and lockfiles
// name, with each language's own package manager, confined like every command, through a gateway
// that forwards only GET and HEAD to the configured registries and logs every request. It is the
// only code that opens a network path for a confined command; verification and acceptance commands
// keep none.
package deps

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Ecosystem names a package registry protocol, as --registry spells it.
type Ecosystem string

// The ecosystems the step knows, in the order it runs them.
const (
	Go    Ecosystem = "go"
	NPM   Ecosystem = "npm"
	Cargo Ecosystem = "cargo"
	PyPI  Ecosystem = "pypi"
)

// Ecosystems lists them in the order the step runs them.
var Ecosystems = []Ecosystem{Go, NPM, Cargo, PyPI}

// Defaults are the public registries, used where the user configured none.
var Defaults = map[Ecosystem]string{
	Go:    "https://proxy.golang.org/",
	NPM:   "https://registry.npmjs.org/",
	Cargo: "https://index.crates.io/",
	PyPI:  "https://pypi.org/simple/",
}

// Mode is --deps.
type Mode string

const (
	// ModeAuto runs the step when manifests or lockfiles differ from what is installed.
	ModeAuto Mode = "auto"
	// ModeOff never installs anything: commands see only what is already there.
	ModeOff Mode = "off"
)

// ParseMode checks a --deps value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown --deps mode %q: want %q (the harness installs what manifests and lockfiles name) or %q (install nothing)", s, ModeAuto, ModeOff)
}

// Options are the user's choices for the step (--deps, --registry, --deps-allow-sdist).
type Options struct {
	Mode Mode // "" means ModeAuto
	// Registries replace the defaults, by ecosystem (--registry ECOSYSTEM=URL); canonical URLs with
	// a trailing slash, as ParseRegistry returns them.
	Registries map[Ecosystem]string
	// AllowSdist lets pip build packages from source distributions (running their build code);
	// by default it installs wheels only.
	AllowSdist bool
	// Cache is the dependency cache the step writes (the package managers' own caches); "" means
	// DefaultCache().
	Cache string
}

// Enabled reports whether the step runs at all.
func (o Options) Enabled() bool { return o.Mode != ModeOff }

// Registry is the registry URL for eco: the user's or the default.
func (o Options) Registry(eco Ecosystem) string {
	if u, ok := o.Registries[eco]; ok {
		return u
	}
	return Defaults[eco]
}

// configured reports whether eco's registry is the user's choice rather than the default: only then
// may it live on a private or loopback address.
func (o Options) configured(eco Ecosystem) bool {
	_, ok := o.Registries[eco]
	return ok
}

// CacheDir is the dependency cache's root.
func (o Options) CacheDir() (string, error) {
	if o.Cache != "" {
		return filepath.Abs(o.Cache)
	}
	return DefaultCache()
}

// DefaultCache is $FACTORY_DEPS_CACHE, else factory/deps under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache).
func DefaultCache() (string, error) {
	if dir := os.Getenv("FACTORY_DEPS_CACHE"); dir != "" {
		return filepath.Abs(dir)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("dependency cache: %w (set FACTORY_DEPS_CACHE)", err)
	}
	return filepath.Join(base, "factory", "deps"), nil
}

// ParseRegistry checks one --registry ECOSYSTEM=URL value and returns the URL in canonical form:
// http or https, a host, no query, fragment or credentials, a path ending in "/". Cargo's sparse
// index may carry the "sparse+" prefix, which is dropped.
func ParseRegistry(s string) (Ecosystem, string, error) {
	name, raw, ok := strings.Cut(s, "=")
	eco := Ecosystem(name)
	if !ok || !slices.Contains(Ecosystems, eco) {
		return "", "", fmt.Errorf("--registry %q: want ECOSYSTEM=URL with ECOSYSTEM one of go, npm, cargo, pypi", s)
	}
	if eco == Cargo {
		raw = strings.TrimPrefix(raw, "sparse+")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("--registry %s: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", fmt.Errorf("--registry %s: want an http or https URL (cargo: its sparse index, with or without sparse+)", s)
	case u.Host == "":
		return "", "", fmt.Errorf("--registry %s: no host", s)
	case u.User != nil:
		return "", "", fmt.Errorf("--registry %s: credentials in the URL are not supported: they would reach every package manager's logs", s)
	case u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("--registry %s: a registry URL takes no query or fragment", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	return eco, u.String(), nil
}

// ParseRegistries parses repeated --registry values; a second value for one ecosystem is an error.
func ParseRegistries(values []string) (map[Ecosystem]string, error) {
	out := map[Ecosystem]string{}
	for _, v := range values {
		eco, u, err := ParseRegistry(v)
		if err != nil {
			return nil, err
		}
		if prev, ok := out[eco]; ok {
			return nil, fmt.Errorf("--registry %s: %s is already %s", v, eco, prev)
		}
		out[eco] = u
	}
	return out, nil
}

// ErrStep marks a failure the attempt is blamed for (an unknown package, a refused request, an
// integrity mismatch): the attempt fails with stage deps_failed and may be retried. Other errors
// are the harness's own.
var ErrStep = errors.New("dependency step failed")

// StepError is a failure of one ecosystem's step, for the failure brief: what failed, and the
// registry's or package manager's answer in a few lines, never the whole log.
type StepError struct {
	Ecosystem Ecosystem
	Command   string // the command that failed, "" for a check of the harness's own
	Message   string
}

func (e *StepError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("%s dependencies: %s: %s", e.Ecosystem, e.Command, e.Message)
	}
	return fmt.Sprintf("%s dependencies: %s", e.Ecosystem, e.Message)
}

func (e *StepError) Unwrap() error { return ErrStep }
