package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Which caches commands see, and how, per mechanism; the views' probe failing falls back to what
// Landlock alone shows.
func TestShowCaches(t *testing.T) {
	caches := []Cache{{Dir: "/c/go", Env: "GOCACHE"}, {Dir: "/c/go/mod", Env: "GOMODCACHE", ReadOnlyFallback: true}, {Dir: "/r", Env: "RUSTUP_HOME", ReadOnlyFallback: true}}
	for _, c := range []struct {
		name        string
		mech        Mechanism
		noViews     error
		summary     []string
		cows        []string
		warningPart string
	}{
		{"namespaces", MechanismNamespaces, nil,
			[]string{"/c/go (GOCACHE, copy-on-write)", "/c/go/mod (GOMODCACHE, copy-on-write)", "/r (RUSTUP_HOME, copy-on-write)"}, []string{"/c/go", "/r"}, ""},
		{"namespaces without views", MechanismNamespaces, errors.New("trial run: no overlay"),
			[]string{"/c/go/mod (GOMODCACHE, read-only)", "/r (RUSTUP_HOME, read-only)"}, nil, "toolchain caches are not shared (copy-on-write views do not work here (trial run: no overlay))"},
		{"Landlock alone", MechanismLandlock, nil,
			[]string{"/c/go/mod (GOMODCACHE, read-only)", "/r (RUSTUP_HOME, read-only)"}, nil, "toolchain caches are not shared (no copy-on-write without user namespaces)"},
		{"none", MechanismNone, nil, nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Policy{mode: ModeAuto, mech: c.mech, abi: 7, workTree: "/w"}
			p.showCaches(caches, c.noViews)
			if got := p.Summary().Caches; !slices.Equal(got, c.summary) {
				t.Errorf("Summary().Caches = %q, want %q", got, c.summary)
			}
			if !slices.Equal(p.cows, c.cows) {
				t.Errorf("views of %q, want %q", p.cows, c.cows)
			}
			if w := p.Warning(); c.warningPart != "" && !strings.Contains(w, c.warningPart) || c.warningPart == "" && strings.Contains(w, "caches") {
				t.Errorf("Warning() = %q, want it to hold %q", w, c.warningPart)
			}
		})
	}
}
