// Package registrytest serves package registries on 127.0.0.1 for tests: a Go module proxy, an npm
// registry, a sparse cargo index and a PEP 503 index, each built in memory from packages the test
// describes, so that real package managers install from them offline.
package registrytest

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
)

// GoModule is one version of a Go module: its go.mod and its files by path.
type GoModule struct {
	Path, Version string
	GoMod         string            // "" means "module <Path>\n\ngo 1.21\n"
	Files         map[string]string // path in the module → content
}

// GoProxy is a module proxy (GOPROXY protocol: list, .info, .mod, .zip) serving mods.
type GoProxy struct {
	// URL is the proxy's root, "http://127.0.0.1:P", as GOPROXY takes it.
	URL string
	server
}

// NewGoProxy starts a proxy for mods, closed when the test ends.
func NewGoProxy(t testing.TB, mods ...GoModule) *GoProxy {
	t.Helper()
	files := map[string][]byte{}
	versions := map[string][]string{}
	for _, m := range mods {
		gomod := m.GoMod
		if gomod == "" {
			gomod = "module " + m.Path + "\n\ngo 1.21\n"
		}
		base := escapePath(m.Path) + "/@v/" + m.Version
		files[base+".info"] = fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, m.Version)
		files[base+".mod"] = []byte(gomod)
		content := map[string]string{"go.mod": gomod}
		maps.Copy(content, m.Files)
		zipped, err := zipOf(prefixed(m.Path+"@"+m.Version, content))
		if err != nil {
			t.Fatal(err)
		}
		files[base+".zip"] = zipped
		versions[escapePath(m.Path)] = append(versions[escapePath(m.Path)], m.Version)
	}
	for mod, vs := range versions {
		files[mod+"/@v/list"] = []byte(strings.Join(vs, "\n") + "\n")
		latest := vs[len(vs)-1]
		files[mod+"/@latest"] = files[mod+"/@v/"+latest+".info"]
	}
	p := &GoProxy{}
	p.start(t, func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	p.URL = p.srv.URL
	return p
}

// escapePath is the proxy protocol's case encoding: an upper-case letter becomes "!" and its
// lower case.
func escapePath(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
