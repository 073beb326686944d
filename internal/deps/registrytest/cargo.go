package registrytest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
)

// Crate is one version of a crate.
type Crate struct {
	Name    string
	Version string
	Deps    []CrateDep
	// Files are more files of the package, by path inside it ("build.rs", which cargo then runs
	// as a build script). Without a "src/lib.rs" the crate gets one with a function
	// `pub fn name() -> &'static str` returning "<name>@<version>".
	Files map[string]string
	// Tampered serves a .crate whose bytes are not those whose sha256 the index names.
	Tampered bool
}

// CrateDep is a dependency of a crate, as its index entry and Cargo.toml name it.
type CrateDep struct {
	Name string
	Req  string // a version requirement, "0.1"
	Kind string // "normal" (""), "dev" or "build"
}

// CargoRegistry is a static sparse cargo registry on 127.0.0.1: the index at URL (config.json, and
// a file per crate at the path cargo derives from its name, one JSON line per version) and the
// .crate files at /crates/<name>/<version>/download, outside the index's root, which config.json's
// "dl" names as a template. Only GET and HEAD are answered.
type CargoRegistry struct {
	// URL is the index's root, "http://127.0.0.1:P/index/", as Options.Registries takes it
	// (cargo's spelling adds "sparse+").
	URL string

	server
	index  map[string][]byte // by path under URL
	crates map[string][]byte // by URL path, without the leading "/"
}

// Cargo starts a registry serving crates; several versions of one name share its index file, in
// the order given. The test's cleanup closes it.
func Cargo(t testing.TB, crates ...Crate) *CargoRegistry {
	t.Helper()
	r := &CargoRegistry{index: map[string][]byte{}, crates: map[string][]byte{}}
	r.start(t, r.serve)
	r.URL = r.srv.URL + "/index/"

	config, err := json.Marshal(map[string]any{
		"dl":  r.srv.URL + "/crates/{crate}/{version}/download",
		"api": r.srv.URL + "/",
	})
	if err != nil {
		t.Fatalf("registrytest: config.json: %v", err)
	}
	r.index["config.json"] = config
	for _, c := range crates {
		file, err := crateFile(c)
		if err != nil {
			t.Fatalf("registrytest: .crate of %s %s: %v", c.Name, c.Version, err)
		}
		sum := sha256.Sum256(file)
		if c.Tampered {
			// A well-formed crate with other code in it: only the checksum tells.
			evil := c
			evil.Files = maps.Clone(c.Files)
			if evil.Files == nil {
				evil.Files = map[string]string{}
			}
			evil.Files["src/evil.rs"] = "// not what the index's checksum is of\n"
			if file, err = crateFile(evil); err != nil {
				t.Fatalf("registrytest: .crate of %s %s: %v", c.Name, c.Version, err)
			}
		}
		r.crates["crates/"+c.Name+"/"+c.Version+"/download"] = file
		line, err := json.Marshal(crateIndexEntry(c, hex.EncodeToString(sum[:])))
		if err != nil {
			t.Fatalf("registrytest: index entry of %s %s: %v", c.Name, c.Version, err)
		}
		p := crateIndexPath(c.Name)
		r.index[p] = append(append(r.index[p], line...), '\n')
	}
	return r
}

// crateIndexPath is where a sparse index keeps a crate's file: 1/<name>, 2/<name>, 3/<c>/<name>, else
// <ab>/<cd>/<name>, lowercase.
func crateIndexPath(name string) string {
	n := strings.ToLower(name)
	switch len(n) {
	case 1, 2:
		return fmt.Sprintf("%d/%s", len(n), n)
	case 3:
		return "3/" + n[:1] + "/" + n
	}
	return n[:2] + "/" + n[2:4] + "/" + n
}

func (r *CargoRegistry) serve(w http.ResponseWriter, req *http.Request) {
	p := strings.TrimPrefix(req.URL.Path, "/")
	if file, ok := r.crates[p]; ok {
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Content-Length", fmt.Sprint(len(file)))
		_, _ = w.Write(file)
		return
	}
	doc, ok := r.index[strings.TrimPrefix(p, "index/")]
	if !ok || !strings.HasPrefix(p, "index/") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if p == "index/config.json" {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	_, _ = w.Write(doc)
}

// crateIndexDep and crateIndexLine are the fields of a sparse index line cargo reads.
type crateIndexDep struct {
	Name            string   `json:"name"`
	Req             string   `json:"req"`
	Features        []string `json:"features"`
	Optional        bool     `json:"optional"`
	DefaultFeatures bool     `json:"default_features"`
	Target          *string  `json:"target"`
	Kind            string   `json:"kind"`
}

type crateIndexLine struct {
	Name     string              `json:"name"`
	Vers     string              `json:"vers"`
	Deps     []crateIndexDep     `json:"deps"`
	Cksum    string              `json:"cksum"`
	Features map[string][]string `json:"features"`
	Yanked   bool                `json:"yanked"`
}

func crateIndexEntry(c Crate, cksum string) crateIndexLine {
	e := crateIndexLine{Name: c.Name, Vers: c.Version, Deps: []crateIndexDep{}, Cksum: cksum, Features: map[string][]string{}}
	for _, d := range c.Deps {
		kind := d.Kind
		if kind == "" {
			kind = "normal"
		}
		e.Deps = append(e.Deps, crateIndexDep{Name: d.Name, Req: d.Req, Features: []string{}, DefaultFeatures: true, Kind: kind})
	}
	return e
}

// crateFile is c packed as `cargo package` packs: a gzipped tar of <name>-<version>/ with its
// Cargo.toml and sources.
func crateFile(c Crate) ([]byte, error) {
	var manifest strings.Builder
	fmt.Fprintf(&manifest, "[package]\nname = %q\nversion = %q\nedition = \"2021\"\n", c.Name, c.Version)
	tables := map[string]string{"normal": "dependencies", "": "dependencies", "dev": "dev-dependencies", "build": "build-dependencies"}
	for _, d := range c.Deps {
		fmt.Fprintf(&manifest, "\n[%s.%s]\nversion = %q\n", tables[d.Kind], d.Name, d.Req)
	}
	files := map[string]string{
		"Cargo.toml": manifest.String(),
		"src/lib.rs": fmt.Sprintf("pub fn name() -> &'static str {\n    %q\n}\n", c.Name+"@"+c.Version),
	}
	maps.Copy(files, c.Files)
	return tarGz(prefixed(c.Name+"-"+c.Version, files))
}
