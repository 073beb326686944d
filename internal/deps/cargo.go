package deps

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// The cargo step fetches every crate the workspace's lockfile names, for every target platform,
// into the dependency cache's CARGO_HOME (its registry cache, unpacked), writing or updating
// Cargo.lock as the manifests require (`cargo fetch`). No build script or procedural macro runs:
// they run later, when verification builds offline from that cache. crates.io is replaced, on the
// command line, by a sparse registry at a fixed name that only the gateway answers (cargo reaches
// it as its HTTP proxy): cargo keys its caches by the registry's URL, so the name must not change
// with the gateway's port, and Cargo.lock keeps naming crates.io, as a fresh clone needs. Cargo
// runs from "/", so that no file of the work tree (.cargo/config.toml, rust-toolchain.toml) can
// redirect it or make it run a program; it checks the crates' checksums against the index and
// Cargo.lock itself.
func init() {
	drivers[Cargo] = &driver{
		eco:       Cargo,
		inputs:    cargoInputs,
		lockfiles: []string{"Cargo.lock"},
		rewrite:   cargoRewrite,
		prepare:   cargoPrepare,
		finish:    cargoFinish,
		explain:   cargoExplain,
		verifyEnv: func(_, cache string) []string {
			return []string{"CARGO_HOME=" + cargoHome(cache), "CARGO_NET_OFFLINE=true"}
		},
	}
}

// The registry crates.io is replaced by, during the step and after: only the gateway, as cargo's
// proxy, answers for its host.
const (
	cargoSourceName = "factory-gateway"
	cargoSourceURL  = "sparse+http://factory-gateway.invalid/"
)

// cratesIO are the spellings of crates.io's source in Cargo.lock.
var cratesIO = []string{"registry+https://github.com/rust-lang/crates.io-index", "sparse+https://index.crates.io/"}

// cargoHomeConfig is CARGO_HOME/config.toml: later commands, offline, find the crates the step
// fetched under the same source.
var cargoHomeConfig = fmt.Sprintf(`# Written by factory's dependency step: commands find the crates it fetched, offline.
[source.crates-io]
replace-with = %q

[source.%s]
registry = %q
`, cargoSourceName, cargoSourceName, cargoSourceURL)

func cargoHome(cache string) string { return filepath.Join(cache, "home") }

func cargoInputs(root string) ([]string, error) {
	if !fileExists(filepath.Join(root, "Cargo.toml")) {
		return nil, nil
	}
	var out []string
	// A manifest that does not parse is the step's to report: here it counts by its bytes.
	ms, _ := readCargoManifests(root)
	none := true
	for _, m := range ms {
		out = append(out, m.path)
		none = none && m.doc != nil && !cargoHasDeps(m.doc)
	}
	lock := existing(root, "Cargo.lock")
	if none && len(lock) == 0 {
		return nil, nil // nothing to fetch, and no lockfile to write
	}
	slices.Sort(out)
	return append(out, lock...), nil
}

// cargoHasDeps reports whether a manifest names any dependency, however spelled.
func cargoHasDeps(doc map[string]any) bool {
	nonEmpty := func(v any) bool { m, _ := v.(map[string]any); return len(m) > 0 }
	targets, _ := doc["target"].(map[string]any)
	ws, _ := doc["workspace"].(map[string]any)
	for _, t := range cargoDepTables {
		if nonEmpty(doc[t]) {
			return true
		}
		for _, tt := range targets {
			if m, _ := tt.(map[string]any); nonEmpty(m[t]) {
				return true
			}
		}
	}
	return nonEmpty(ws["dependencies"]) || nonEmpty(doc["patch"]) || nonEmpty(doc["replace"])
}

// cargoManifest is what the step reads of a Cargo.toml.
type cargoManifest struct {
	path string         // slash-separated, relative to the work tree
	doc  map[string]any // nil when it does not parse
}

// readCargoManifests reads the workspace's manifests inside root: the root one, its members and the
// path dependencies of each, transitively. Cargo reads them all: a dependency any of them adds
// changes what the step fetches. The error names those that do not parse.
func readCargoManifests(root string) ([]cargoManifest, error) {
	var (
		out  []cargoManifest
		errs []error
		seen = map[string]bool{}
	)
	var visit func(dir string)
	visit = func(dir string) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return // outside the work tree: not the model's to write
		}
		path := filepath.ToSlash(filepath.Join(rel, "Cargo.toml"))
		if seen[path] {
			return
		}
		seen[path] = true
		b, err := os.ReadFile(filepath.Join(dir, "Cargo.toml"))
		if err != nil {
			return
		}
		var doc map[string]any
		if _, err := toml.Decode(string(b), &doc); err != nil {
			out = append(out, cargoManifest{path: path})
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			return
		}
		out = append(out, cargoManifest{path: path, doc: doc})
		for _, member := range cargoMembers(dir, doc) {
			visit(member)
		}
		cargoDeps(doc, func(_, _ string, dep map[string]any) {
			if p, ok := dep["path"].(string); ok {
				visit(filepath.Join(dir, filepath.FromSlash(p)))
			}
		})
	}
	visit(root)
	return out, errors.Join(errs...)
}

// cargoMembers are the directories [workspace] members name (globs), but for those it excludes.
func cargoMembers(dir string, doc map[string]any) []string {
	ws, _ := doc["workspace"].(map[string]any)
	excluded := map[string]bool{}
	for _, x := range stringsOf(ws["exclude"]) {
		excluded[filepath.Join(dir, filepath.FromSlash(x))] = true
	}
	var out []string
	for _, pattern := range stringsOf(ws["members"]) {
		matches, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pattern)))
		for _, m := range matches {
			if !excluded[m] {
				out = append(out, m)
			}
		}
	}
	return out
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// cargoDepTables are the tables of a manifest (or of one of its [target.*] tables) that name
// dependencies.
var cargoDepTables = []string{"dependencies", "dev-dependencies", "dev_dependencies", "build-dependencies", "build_dependencies"}

// cargoDeps calls f with each dependency a manifest spells as a table (one spelled as a version
// requirement is crates.io's), with the table that names it: its dependency tables, those of its
// [target.*] tables, [workspace.dependencies], [patch.*] and [replace].
func cargoDeps(doc map[string]any, f func(table, name string, dep map[string]any)) {
	each := func(table string, deps any) {
		m, _ := deps.(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if dep, ok := m[name].(map[string]any); ok {
				f(table, name, dep)
			}
		}
	}
	for _, t := range cargoDepTables {
		each(t, doc[t])
	}
	targets, _ := doc["target"].(map[string]any)
	for _, spec := range slices.Sorted(maps.Keys(targets)) {
		tt, _ := targets[spec].(map[string]any)
		for _, t := range cargoDepTables {
			each("target."+spec+"."+t, tt[t])
		}
	}
	ws, _ := doc["workspace"].(map[string]any)
	each("workspace.dependencies", ws["dependencies"])
	patches, _ := doc["patch"].(map[string]any)
	for _, src := range slices.Sorted(maps.Keys(patches)) {
		each("patch."+src, patches[src])
	}
	each("replace", doc["replace"])
}

// cargoLock is what the step reads of Cargo.lock.
type cargoLock struct {
	Package []struct {
		Name    string `toml:"name"`
		Version string `toml:"version"`
		Source  string `toml:"source"`
	} `toml:"package"`
}

func readCargoLock(root string) (cargoLock, error) {
	var lock cargoLock
	b, err := os.ReadFile(filepath.Join(root, "Cargo.lock"))
	if err != nil {
		return lock, err
	}
	_, err = toml.Decode(string(b), &lock)
	return lock, err
}

func cargoPrepare(e *stepEnv) ([]command, error) {
	manifests, err := readCargoManifests(e.Root)
	if err != nil {
		return nil, &StepError{Ecosystem: Cargo, Message: fmt.Sprintf("cannot read the manifests: %v", err)}
	}
	var refused []string
	refuse := func(what, url, why string) {
		e.Refuse("GET", url, what+": "+why)
		refused = append(refused, what+": "+why)
	}
	for _, m := range manifests {
		cargoDeps(m.doc, func(table, name string, dep map[string]any) {
			what := fmt.Sprintf("%s [%s] %s", m.path, table, name)
			only := "only crates.io, through the configured registry " + e.Opts.Registry(Cargo) + ", is reachable"
			if git, ok := dep["git"].(string); ok {
				refuse(what, git, "a git dependency ("+git+"): "+only)
			}
			if reg, ok := dep["registry"].(string); ok {
				refuse(what, "registry:"+reg, "a dependency on registry "+reg+": "+only)
			}
			if index, ok := dep["registry-index"].(string); ok {
				refuse(what, index, "a dependency on the registry at "+index+": "+only)
			}
		})
	}
	lock, err := readCargoLock(e.Root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, &StepError{Ecosystem: Cargo, Message: fmt.Sprintf("cannot read Cargo.lock: %v (fix it, or delete it for the step to write it again)", err)}
	default:
		for _, p := range lock.Package {
			if p.Source != "" && !slices.Contains(cratesIO, p.Source) {
				_, url, _ := strings.Cut(p.Source, "+")
				refuse(fmt.Sprintf("Cargo.lock package %s %s", p.Name, p.Version), url,
					"from "+p.Source+", not crates.io (delete its entry, or Cargo.lock, for the step to resolve it again)")
			}
		}
	}
	if len(refused) > 0 {
		return nil, &StepError{Ecosystem: Cargo, Message: "refused before any request:\n" + strings.Join(refused, "\n")}
	}
	for _, name := range []string{".cargo/config.toml", ".cargo/config"} {
		ignoreCargoConfig(e, name)
	}
	home := cargoHome(e.Cache)
	if err := writeIfChanged(filepath.Join(home, "config.toml"), []byte(cargoHomeConfig)); err != nil {
		return nil, fmt.Errorf("cargo home: %w", err)
	}
	proxy := strings.TrimSuffix(strings.TrimPrefix(e.Gateway.Base(), "http://"), "/")
	return []command{{
		// From "/", cargo reads no configuration of the work tree's, and rustup no toolchain file.
		Argv: []string{"sh", "-c", `cd / && exec cargo "$@"`, "cargo", "fetch",
			"--manifest-path", filepath.Join(e.Root, "Cargo.toml"),
			"--config", fmt.Sprintf("source.crates-io.replace-with=%q", cargoSourceName),
			"--config", fmt.Sprintf("source.%s.registry=%q", cargoSourceName, cargoSourceURL),
			"--config", fmt.Sprintf("http.proxy=%q", proxy),
			"--config", "net.offline=false",
			"--config", "net.git-fetch-with-cli=false",
		},
		Env: []string{
			"CARGO_HOME=" + home,
			// curl bypasses the proxy for hosts these name: none may.
			"NO_PROXY=", "no_proxy=",
			"CARGO_TERM_COLOR=never",
		},
	}}, nil
}

// cargoFetchKeys are the configuration tables that decide where cargo fetches from.
var cargoFetchKeys = []string{"source", "registries", "registry", "http", "net", "patch", "paths"}

// ignoreCargoConfig records each line of a project cargo configuration that would have changed
// where the step fetches from, had cargo read it: the step reads none (verification does). A line
// is named by its key, never its value, which may be a token.
func ignoreCargoConfig(e *stepEnv, name string) {
	b, err := os.ReadFile(filepath.Join(e.Root, filepath.FromSlash(name)))
	if err != nil {
		return
	}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			table = cargoKey(strings.Trim(line, "[] \t"))
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		full := cargoKey(key)
		if table != "" {
			full = table + "." + full
		}
		first, _, _ := strings.Cut(full, ".")
		if slices.Contains(cargoFetchKeys, first) {
			e.Ignore(fmt.Sprintf("%s:%d: %s: not read by the dependency step, which fetches crates.io's crates from %s", name, n, full, e.Opts.Registry(Cargo)))
		}
	}
}

// cargoKey is a TOML key without quotes and blanks: source."crates-io" is source.crates-io.
func cargoKey(key string) string {
	return strings.NewReplacer(`"`, "", "'", "", " ", "", "\t", "").Replace(key)
}

// writeIfChanged writes a file through a rename, so that a command reading it concurrently sees
// the old or the new bytes, and not at all when it holds them already.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// cargoFinish counts the registry's packages in Cargo.lock.
func cargoFinish(e *stepEnv) (int, error) {
	lock, err := readCargoLock(e.Root)
	if err != nil {
		return -1, nil // the count is for the summary only; cargo wrote the lockfile it needs
	}
	n := 0
	for _, p := range lock.Package {
		if p.Source != "" {
			n++
		}
	}
	return n, nil
}

// cargoMarkers are the words of a sparse index's "dl" template that cargo replaces.
var cargoMarkers = []string{"{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}"}

// cargoRewrite points config.json's download location at the gateway, and drops its API (nothing
// is published or searched through the gateway) and any auth-required (cargo would then run a
// credential provider, a program the project's configuration could name).
func cargoRewrite(g *Gateway, path, _ string, body []byte) []byte {
	if path != "config.json" {
		return body
	}
	var config map[string]any
	if err := json.Unmarshal(body, &config); err != nil {
		return body // cargo reports it
	}
	if dl, ok := config["dl"].(string); ok {
		// GatewayURL escapes the braces of a path: the markers go through it as plain words.
		for i, m := range cargoMarkers {
			dl = strings.ReplaceAll(dl, m, fmt.Sprintf("factory-marker-%d", i))
		}
		dl = g.GatewayURL(dl)
		for i, m := range cargoMarkers {
			dl = strings.ReplaceAll(dl, fmt.Sprintf("factory-marker-%d", i), m)
		}
		config["dl"] = dl
	}
	delete(config, "api")
	delete(config, "auth-required")
	out, err := json.Marshal(config)
	if err != nil {
		return body
	}
	return out
}

// cargoExplain keeps cargo's error, from its first line, without blank lines and warnings.
func cargoExplain(out string) string {
	lines := strings.Split(out, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "error") })
	if start < 0 {
		return ""
	}
	var keep []string
	for _, l := range lines[start:] {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "warning:") || strings.TrimSpace(l) == "Caused by:" {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 12 {
		keep = keep[:12]
	}
	return strings.Join(keep, "\n")
}
