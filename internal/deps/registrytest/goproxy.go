// Package registrytest serves package registries on 127.0.0.1 for tests: a Go module proxy, an npm
// registry, a sparse cargo index and a PEP 503 index, each built in memory from packages the test
// describes, so that real package managers install from them offline.
package registrytest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
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
	*httptest.Server
	mu       sync.Mutex
	requests []string
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
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		names := []string{"go.mod"}
		for name := range m.Files {
			names = append(names, name)
		}
		sort.Strings(names[1:])
		for _, name := range names {
			content := gomod
			if name != "go.mod" {
				content = m.Files[name]
			}
			w, err := zw.Create(m.Path + "@" + m.Version + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		files[base+".zip"] = buf.Bytes()
		versions[escapePath(m.Path)] = append(versions[escapePath(m.Path)], m.Version)
	}
	for mod, vs := range versions {
		files[mod+"/@v/list"] = []byte(strings.Join(vs, "\n") + "\n")
		latest := vs[len(vs)-1]
		files[mod+"/@latest"] = files[mod+"/@v/"+latest+".info"]
	}
	p := &GoProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(p.Close)
	return p
}

// Requests are the requests served so far, as "METHOD /path".
func (p *GoProxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
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
