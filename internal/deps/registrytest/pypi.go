package registrytest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// PyPIPackage is one release of a Python package: a pure-Python wheel (py3-none-any), or with
// SetupPy a source distribution only.
type PyPIPackage struct {
	Name    string // as published ("Demo_Lib"); the index serves it under its normalized name
	Version string
	// Requires are its Requires-Dist entries ("helper>=1.0").
	Requires []string
	// Files are the wheel's files besides its .dist-info, by slash path. Without any, the wheel
	// holds <module>/__init__.py defining VERSION, module being the normalized name with "_" for "-".
	Files map[string]string
	// SetupPy, when set, publishes the release as a source distribution only (<dist>-<version>.tar.gz,
	// no wheel), whose setup.py is this code: what building it would run.
	SetupPy string
}

// PyPIOptions shape the index.
type PyPIOptions struct {
	// AbsoluteLinks links the files by absolute URLs, as pypi.org does (to files.pythonhosted.org);
	// otherwise the links are relative and climb above the index's root (../../packages/…), as
	// devpi's and Nexus's do. Either way the files are outside the index's root.
	AbsoluteLinks bool
	// HTMLOnly answers PEP 503 HTML even to a client asking for PEP 691 JSON, as a static index does.
	HTMLOnly bool
}

// PyPIRegistry is a static simple repository on 127.0.0.1: the project list at /simple/, a project's
// page at /simple/<normalized-name>/ (PEP 691 JSON when the Accept header asks for it, PEP 503 HTML
// otherwise) linking each file with a #sha256= fragment, and the files at /packages/<filename>. Only
// GET and HEAD are answered.
type PyPIRegistry struct {
	// URL is the index's root, "http://127.0.0.1:P/simple/", as Options.Registries takes it.
	URL string

	server
	o        PyPIOptions
	projects map[string][]pypiFile // by normalized name
	dists    map[string][]byte     // by filename
}

type pypiFile struct {
	name, version, sha256 string
}

// PyPI starts an index serving pkgs. The test's cleanup closes it.
func PyPI(t testing.TB, o PyPIOptions, pkgs ...PyPIPackage) *PyPIRegistry {
	t.Helper()
	r := &PyPIRegistry{o: o, projects: map[string][]pypiFile{}, dists: map[string][]byte{}}
	r.start(t, r.serve)
	r.URL = r.srv.URL + "/simple/"
	for _, p := range pkgs {
		name, data, err := pypiDist(p)
		if err != nil {
			t.Fatalf("registrytest: distribution of %s %s: %v", p.Name, p.Version, err)
		}
		sum := sha256.Sum256(data)
		r.dists[name] = data
		n := pypiNormalize(p.Name)
		r.projects[n] = append(r.projects[n], pypiFile{name: name, version: p.Version, sha256: hex.EncodeToString(sum[:])})
	}
	return r
}

// Dist is the filename and sha256 (hex) of the distribution of name's version, for a requirement's
// --hash; "" when the index has none.
func (r *PyPIRegistry) Dist(name, version string) (filename, sha256 string) {
	for _, f := range r.projects[pypiNormalize(name)] {
		if f.version == version {
			return f.name, f.sha256
		}
	}
	return "", ""
}

var pypiNonAlnum = regexp.MustCompile(`[-_.]+`)

// pypiNormalize is a project name as PEP 503 normalizes it: lower case, runs of "-", "_" and "." as
// one "-".
func pypiNormalize(name string) string {
	return pypiNonAlnum.ReplaceAllString(strings.ToLower(name), "-")
}

func (r *PyPIRegistry) serve(w http.ResponseWriter, req *http.Request) {
	if name, ok := strings.CutPrefix(req.URL.Path, "/packages/"); ok {
		data, found := r.dists[name]
		if !found {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		// As PyPI's files host: a file never changes.
		w.Header().Set("Cache-Control", "max-age=365000000, immutable, public")
		_, _ = w.Write(data)
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/simple/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	r.servePage(w, req, rest)
}

// servePage serves the project list (rest "") or a project's page (rest "<name>/").
func (r *PyPIRegistry) servePage(w http.ResponseWriter, req *http.Request, rest string) {
	asJSON := !r.o.HTMLOnly && strings.Contains(req.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json")
	if rest == "" {
		r.serveList(w, asJSON)
		return
	}
	name, ok := strings.CutSuffix(rest, "/")
	files := r.projects[name]
	if !ok || strings.Contains(name, "/") || files == nil {
		http.NotFound(w, req)
		return
	}
	link := func(f pypiFile) string {
		if r.o.AbsoluteLinks {
			return r.srv.URL + "/packages/" + f.name
		}
		return "../../packages/" + f.name
	}
	if asJSON {
		type file struct {
			Filename string            `json:"filename"`
			URL      string            `json:"url"`
			Hashes   map[string]string `json:"hashes"`
		}
		doc := struct {
			Meta  map[string]string `json:"meta"`
			Name  string            `json:"name"`
			Files []file            `json:"files"`
		}{Meta: map[string]string{"api-version": "1.0"}, Name: name}
		for _, f := range files {
			doc.Files = append(doc.Files, file{Filename: f.name, URL: link(f), Hashes: map[string]string{"sha256": f.sha256}})
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>Links for %s</title></head><body>\n", html.EscapeString(name))
	for _, f := range files {
		fmt.Fprintf(&b, "<a href=\"%s#sha256=%s\">%s</a><br/>\n", html.EscapeString(link(f)), f.sha256, html.EscapeString(f.name))
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

func (r *PyPIRegistry) serveList(w http.ResponseWriter, asJSON bool) {
	names := slices.Sorted(maps.Keys(r.projects))
	if asJSON {
		var projects []map[string]string
		for _, n := range names {
			projects = append(projects, map[string]string{"name": n})
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"meta": map[string]string{"api-version": "1.0"}, "projects": projects})
		return
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><body>\n")
	for _, n := range names {
		fmt.Fprintf(&b, "<a href=\"%s/\">%s</a><br/>\n", n, n)
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// pypiDist builds p's distribution: its filename and bytes.
func pypiDist(p PyPIPackage) (string, []byte, error) {
	// Distribution names in filenames: normalized, with "_" for "-" (the wheel spec, PEP 625).
	dist := strings.ReplaceAll(pypiNormalize(p.Name), "-", "_")
	metadata := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", p.Name, p.Version)
	for _, req := range p.Requires {
		metadata += "Requires-Dist: " + req + "\n"
	}
	if p.SetupPy != "" {
		base := dist + "-" + p.Version
		data, err := tarGz(map[string]string{base + "/PKG-INFO": metadata, base + "/setup.py": p.SetupPy})
		return base + ".tar.gz", data, err
	}
	files := maps.Clone(p.Files)
	if len(files) == 0 {
		files = map[string]string{dist + "/__init__.py": fmt.Sprintf("VERSION = %q\n", p.Version)}
	}
	info := dist + "-" + p.Version + ".dist-info/"
	files[info+"METADATA"] = metadata
	files[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: registrytest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	for _, name := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256([]byte(files[name]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	record.WriteString(info + "RECORD,,\n")
	files[info+"RECORD"] = record.String()
	data, err := zipOf(files)
	return dist + "-" + p.Version + "-py3-none-any.whl", data, err
}
