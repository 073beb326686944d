package registrytest

import (
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"testing"
)

// NPMPackage is one version of an npm package.
type NPMPackage struct {
	Name    string // "a" or "@scope/a"
	Version string
	// Dependencies are its package.json dependencies, name to range.
	Dependencies map[string]string
	// Scripts are its package.json scripts, such as a "postinstall" that must not run.
	Scripts map[string]string
	// Files are more files of the tarball, by path inside the package. Without an "index.js" the
	// package gets one exporting "<name>@<version>".
	Files map[string]string
}

// NPMRegistry is a static npm registry on 127.0.0.1: a package's document (packument) at
// /<name> (a scoped one at /@scope%2fname, as npm asks, or /@scope/name) naming every version with
// its dependencies, scripts and dist (tarball URL, sha512 integrity, sha1 shasum), and its
// tarballs at /<name>/-/<basename>-<version>.tgz. Only GET and HEAD are answered.
type NPMRegistry struct {
	// URL is the registry's root, "http://127.0.0.1:P/", as Options.Registries takes it.
	URL string

	server
	docs     map[string][]byte // packument by package name
	tarballs map[string][]byte // by URL path, without the leading "/"
}

// NPM starts a registry serving pkgs; several versions of one name make one packument, whose
// "latest" dist-tag is the last of them given. The test's cleanup closes it.
func NPM(t testing.TB, pkgs ...NPMPackage) *NPMRegistry {
	t.Helper()
	r := &NPMRegistry{docs: map[string][]byte{}, tarballs: map[string][]byte{}}
	r.start(t, r.serve)
	r.URL = r.srv.URL + "/"

	type version struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies,omitempty"`
		Scripts      map[string]string `json:"scripts,omitempty"`
		// HasInstallScript is what npm's abbreviated documents say of install scripts.
		HasInstallScript bool              `json:"hasInstallScript,omitempty"`
		Dist             map[string]string `json:"dist"`
	}
	type packument struct {
		Name     string              `json:"name"`
		DistTags map[string]string   `json:"dist-tags"`
		Versions map[string]*version `json:"versions"`
	}
	docs := map[string]*packument{}
	for _, p := range pkgs {
		tgz, err := npmTarball(p)
		if err != nil {
			t.Fatalf("registrytest: tarball of %s@%s: %v", p.Name, p.Version, err)
		}
		tarPath := p.Name + "/-/" + path.Base(p.Name) + "-" + p.Version + ".tgz"
		r.tarballs[tarPath] = tgz
		sum512, sum1 := sha512.Sum512(tgz), sha1.Sum(tgz)
		doc := docs[p.Name]
		if doc == nil {
			doc = &packument{Name: p.Name, DistTags: map[string]string{}, Versions: map[string]*version{}}
			docs[p.Name] = doc
		}
		doc.DistTags["latest"] = p.Version
		_, pre := p.Scripts["preinstall"]
		_, install := p.Scripts["install"]
		_, post := p.Scripts["postinstall"]
		doc.Versions[p.Version] = &version{
			Name: p.Name, Version: p.Version, Dependencies: p.Dependencies, Scripts: p.Scripts,
			HasInstallScript: pre || install || post,
			Dist: map[string]string{
				"tarball":   r.URL + tarPath,
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
				"shasum":    hex.EncodeToString(sum1[:]),
			},
		}
	}
	for name, doc := range docs {
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("registrytest: packument of %s: %v", name, err)
		}
		r.docs[name] = b
	}
	return r
}

func (r *NPMRegistry) serve(w http.ResponseWriter, req *http.Request) {
	// The decoded path: npm escapes the "/" of a scoped name.
	p := strings.TrimPrefix(req.URL.Path, "/")
	if tgz, ok := r.tarballs[p]; ok {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(tgz)))
		_, _ = w.Write(tgz)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	doc, ok := r.docs[p]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"Not found"}`))
		return
	}
	_, _ = w.Write(doc)
}

// npmTarball is p packed as npm packs: a gzipped tar of package/package.json and the files.
func npmTarball(p NPMPackage) ([]byte, error) {
	manifest, err := json.MarshalIndent(map[string]any{
		"name": p.Name, "version": p.Version, "main": "index.js",
		"dependencies": p.Dependencies, "scripts": p.Scripts,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	files := map[string]string{"package.json": string(manifest)}
	if _, ok := p.Files["index.js"]; !ok {
		files["index.js"] = fmt.Sprintf("module.exports = %q;\n", p.Name+"@"+p.Version)
	}
	for name, body := range p.Files {
		files[name] = body
	}
	return tarGz(prefixed("package", files))
}
