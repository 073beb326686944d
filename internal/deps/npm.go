package deps

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The npm step resolves package.json into package-lock.json (`npm install --package-lock-only`),
// then installs exactly that lockfile into node_modules (`npm ci`), both with --ignore-scripts: no
// lifecycle script runs, the project's own included. The lock-only run comes first: it writes a
// lockfile where there is none, brings one that disagrees with package.json into line (npm's own
// check is the only exact one), and is a no-op costing one npm start (about as much CPU as the
// install itself, from a warm cache) where they agree. It is left out only where package.json,
// the lockfile and .npmrc are byte for byte what an earlier successful step left (a record in the
// dependency cache): a reinstall after a rollback removed node_modules, or in a fresh clone.
// Tarballs the lockfile names with an integrity come from the npm cache, which persists between
// steps; packuments are revalidated as their Cache-Control says.
//
// Everything npm could be redirected by is set on its command line, which beats any .npmrc:
// registry and every @scope:registry a project .npmrc names point at the gateway (the lines are
// reported as ignored), proxies are off (HTTP(S)_PROXY included), the user's and global npmrc are
// empty files of the step's, and git and URL dependencies are refused by npm itself (npm 11's
// allow-git and allow-remote; older versions warn of an unknown option). Before npm runs, the step
// refuses what would fetch from elsewhere: a dependency of package.json, of a workspace's or of a
// local directory's that is a URL, git repository or hosted-git shorthand, and a lockfile entry
// resolved off the registry's host or without an integrity.
//
// npm fetches what a lockfile names at its `resolved` URL, so the lockfiles' URLs on the
// registry's host are pointed at the gateway before npm runs and back after it ended, also when it
// failed; packuments are rewritten so that their tarball URLs lead to the gateway. URLs under the
// public registry stay as they are: npm itself sends them to the configured registry
// (replace-registry-host=npmjs), so a lockfile written against it installs from a mirror. A
// tarball the registry serves from another host is fetched through the gateway, but the lockfile
// that names it is refused by the next step.
//
// Yarn and pnpm are not run. npm takes versions from a yarn.lock where there is no package-lock.json
// (and would rewrite it in yarn 1's format): the step checks its URLs like a lockfile's and
// leaves it as it was. npm does not read pnpm-lock.yaml. Both are reported as ignored.
//
// The npm cache is one per registry: packuments are cached under the gateway's URL, which may be
// the same for every registry.
func init() {
	drivers[NPM] = &driver{
		eco:       NPM,
		inputs:    npmInputs,
		installed: "node_modules",
		lockfiles: []string{"npm-shrinkwrap.json", "package-lock.json"},
		rewrite:   npmRewrite,
		prepare:   npmPrepare,
		finish:    npmFinish,
		explain:   npmExplain,
		verifyEnv: func(_, _ string) []string {
			// Later commands (npm test, npx) never wait on a network they do not have.
			return []string{"npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false"}
		},
	}
}

// npmLocks are the lockfiles npm reads and writes, the first present winning.
var npmLocks = []string{"npm-shrinkwrap.json", "package-lock.json"}

// npmHiddenLock is the copy of the lockfile npm keeps in node_modules.
const npmHiddenLock = "node_modules/.package-lock.json"

// npmPublic is the public registry, whose URLs npm sends to the configured registry; yarnPublic is
// yarn's name for it, which npm reads in yarn.lock as npmPublic.
const (
	npmPublic  = "https://registry.npmjs.org/"
	yarnPublic = "https://registry.yarnpkg.com/"
)

func npmInputs(root string) ([]string, error) {
	if !fileExists(filepath.Join(root, "package.json")) {
		return nil, nil
	}
	// A manifest npm cannot read is prepare's to report; the ones read so far still count.
	manifests, deps, err := npmManifests(root)
	locks := existing(root, "npm-shrinkwrap.json", "package-lock.json", "yarn.lock")
	if err == nil && len(deps) == 0 && len(locks) == 0 {
		return nil, nil // nothing to install, and no lockfile to write
	}
	return append(append(manifests, locks...), existing(root, ".npmrc")...), nil
}

// npmDep is one dependency a manifest names.
type npmDep struct{ manifest, name, spec string }

// npmManifest is what the step reads of a package.json.
type npmManifest struct {
	Dependencies         map[string]string `json:"dependencies"`
	DevDependencies      map[string]string `json:"devDependencies"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	PeerDependencies     map[string]string `json:"peerDependencies"`
	Overrides            any               `json:"overrides"`
	Workspaces           json.RawMessage   `json:"workspaces"`
}

// npmManifests reads package.json, its workspaces' and those of the local directories their
// dependencies name inside root (npm installs their dependencies too), and returns their paths
// (slash-separated, relative) and dependencies.
func npmManifests(root string) ([]string, []npmDep, error) {
	var paths []string
	var deps []npmDep
	seen := map[string]bool{}
	queue := []string{"package.json"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) && p != "package.json" {
			continue // npm reports a missing workspace or directory itself
		}
		if err != nil {
			return paths, deps, err
		}
		paths = append(paths, p)
		var m npmManifest
		if err := json.Unmarshal(b, &m); err != nil {
			return paths, deps, fmt.Errorf("%s: %w", p, err)
		}
		dir := path.Dir(p)
		for _, field := range []map[string]string{m.Dependencies, m.DevDependencies, m.OptionalDependencies, m.PeerDependencies} {
			for _, name := range slices.Sorted(maps.Keys(field)) {
				deps = append(deps, npmDep{p, name, field[name]})
				if local := npmLocalDir(dir, field[name]); local != "" {
					queue = append(queue, path.Join(local, "package.json"))
				}
			}
		}
		deps = npmOverrides(deps, p, "", m.Overrides)
		if p == "package.json" {
			for _, ws := range npmWorkspaces(root, m.Workspaces) {
				queue = append(queue, path.Join(ws, "package.json"))
			}
		}
	}
	return paths, deps, nil
}

// npmOverrides adds the specs of an overrides object: a name's value is a spec or an object of
// nested overrides, whose "." is the name's own spec.
func npmOverrides(deps []npmDep, manifest, name string, v any) []npmDep {
	switch v := v.(type) {
	case string:
		deps = append(deps, npmDep{manifest, "overrides " + name, v})
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			key := strings.TrimSpace(name + " " + k)
			if k == "." {
				key = name
			}
			deps = npmOverrides(deps, manifest, key, v[k])
		}
	}
	return deps
}

// npmWorkspaces are the workspace directories package.json's "workspaces" (a list of globs, or
// {"packages": [...]}) names, relative to root.
func npmWorkspaces(root string, raw json.RawMessage) []string {
	var globs []string
	if json.Unmarshal(raw, &globs) != nil {
		var obj struct {
			Packages []string `json:"packages"`
		}
		_ = json.Unmarshal(raw, &obj)
		globs = obj.Packages
	}
	var dirs []string
	for _, g := range globs {
		if strings.HasPrefix(g, "!") {
			continue
		}
		// filepath.Glob reads "**" as "*": one level, the usual "packages/*" layout.
		matches, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(path.Clean(g))))
		for _, m := range matches {
			if rel, err := filepath.Rel(root, m); err == nil && filepath.IsLocal(rel) {
				dirs = append(dirs, filepath.ToSlash(rel))
			}
		}
	}
	return dirs
}

// npmLocalDir is the directory inside the tree a file: or path spec of a manifest in dir names,
// "" for anything else (a tarball, a path outside the tree, a registry spec).
func npmLocalDir(dir, spec string) string {
	target, ok := strings.CutPrefix(spec, "file:")
	if !ok && !strings.HasPrefix(spec, ".") {
		return ""
	}
	if strings.HasSuffix(target, ".tgz") || strings.HasSuffix(target, ".tar.gz") || strings.HasSuffix(target, ".tar") || path.IsAbs(target) {
		return ""
	}
	p := path.Join(dir, target)
	if !filepath.IsLocal(p) {
		return ""
	}
	return p
}

// npmForeign reports whether a manifest spec fetches from somewhere other than the registry: a
// URL, a git repository or hosted-git shorthand (user/repo, github:…), any protocol but npm: and
// file:. A version, range or dist-tag, an npm: alias of one, a local path and an override's
// $reference are not.
func npmForeign(spec string) bool {
	s := strings.TrimSpace(spec)
	if alias, ok := strings.CutPrefix(s, "npm:"); ok {
		i := strings.LastIndex(alias, "@")
		if i <= 0 {
			return false // npm:name, npm:@scope/name: the latest version
		}
		s = alias[i+1:]
	}
	for _, local := range []string{"file:", ".", "/", "~/", "$"} {
		if strings.HasPrefix(s, local) {
			return false
		}
	}
	return strings.ContainsAny(s, ":/")
}

// npmLock is what the step reads of a lockfile: "packages" (lockfileVersion 2 and 3) or the
// nested "dependencies" of version 1.
type npmLock struct {
	Packages     map[string]npmLockEntry `json:"packages"`
	Dependencies map[string]npmLockV1    `json:"dependencies"`
}

type npmLockEntry struct {
	Version   string `json:"version"`
	Resolved  string `json:"resolved"`
	Integrity string `json:"integrity"`
	Link      bool   `json:"link"`
	InBundle  bool   `json:"inBundle"`
}

type npmLockV1 struct {
	Version      string               `json:"version"`
	Resolved     string               `json:"resolved"`
	Integrity    string               `json:"integrity"`
	Bundled      bool                 `json:"bundled"`
	Dependencies map[string]npmLockV1 `json:"dependencies"`
}

// npmCheckLock checks the entries of the lockfile doc (named name): each package npm fetches must
// be resolved under one of allowed (the first the registry's host) or to a local file, and carry
// an integrity. It returns one
// line per problem, calls refuse for each URL off the registry, and counts the packages.
func npmCheckLock(name string, doc []byte, allowed []string, refuse func(url, reason string)) ([]string, int, error) {
	var lock npmLock
	if err := json.Unmarshal(doc, &lock); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	entries := map[string]npmLockEntry{}
	for key, e := range lock.Packages {
		// "" is the project; keys outside node_modules are workspaces and linked directories.
		if strings.HasPrefix(key, "node_modules/") || strings.Contains(key, "/node_modules/") {
			entries[key] = e
		}
	}
	if lock.Packages == nil {
		npmFlattenV1(entries, "", lock.Dependencies)
	}
	var problems []string
	count := 0
	for _, key := range slices.Sorted(maps.Keys(entries)) {
		e := entries[key]
		if e.Link || e.InBundle {
			continue // a link to a directory of the tree; a package inside its parent's tarball
		}
		count++
		resolved := e.Resolved
		if resolved == "" && strings.Contains(e.Version, ":") && !strings.HasPrefix(e.Version, "file:") {
			resolved = e.Version // lockfileVersion 1 names git and URL dependencies so
		}
		switch {
		case resolved == "", strings.HasPrefix(resolved, "file:"):
		case !slices.ContainsFunc(allowed, func(root string) bool { return strings.HasPrefix(resolved, root) }):
			reason := fmt.Sprintf("%s: %s is resolved off the registry's host %s", name, key, allowed[0])
			if refuse != nil {
				refuse(resolved, reason)
			}
			problems = append(problems, fmt.Sprintf("%s: %s is resolved at %s, not on the registry's host %s", name, key, resolved, allowed[0]))
			continue
		}
		if e.Integrity == "" {
			problems = append(problems, fmt.Sprintf("%s: %s has no integrity: the step installs only packages whose lockfile entry carries one (delete the entry, or the lockfile, and npm records it again)", name, key))
		}
	}
	return problems, count, nil
}

// npmFlattenV1 adds lockfileVersion 1's nested dependencies to entries, under keys like version
// 2's.
func npmFlattenV1(entries map[string]npmLockEntry, prefix string, deps map[string]npmLockV1) {
	for name, d := range deps {
		key := prefix + "node_modules/" + name
		entries[key] = npmLockEntry{Version: d.Version, Resolved: d.Resolved, Integrity: d.Integrity, InBundle: d.Bundled}
		npmFlattenV1(entries, key+"/", d.Dependencies)
	}
}

// npmCheckYarnLock checks the resolved URLs of a yarn.lock (yarn 1's format; yarn 2's has none
// npm uses): npm fetches them as a lockfile's. Integrity is not required: npm takes a missing one
// from the registry, and the lockfile it writes is checked.
func npmCheckYarnLock(doc []byte, allowed []string, refuse func(url, reason string)) []string {
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "resolved ")
		if !ok {
			continue
		}
		resolved := strings.Trim(strings.TrimSpace(rest), `"`)
		if strings.HasPrefix(resolved, "file:") || slices.ContainsFunc(allowed, func(root string) bool { return strings.HasPrefix(resolved, root) }) {
			continue
		}
		refuse(resolved, fmt.Sprintf("yarn.lock:%d: resolved off the registry's host %s", n, allowed[0]))
		problems = append(problems, fmt.Sprintf("yarn.lock:%d: resolved at %s, not on the registry's host %s", n, resolved, allowed[0]))
	}
	return problems
}

// npmOverridden are the .npmrc settings the step's command line sets; a line of a project .npmrc
// setting one (or a scope's registry) is reported as ignored.
var npmOverridden = []string{
	"registry", "replace-registry-host", "proxy", "https-proxy", "noproxy", "userconfig", "globalconfig",
	"cache", "ignore-scripts", "package-lock", "include", "allow-git", "allow-remote", "audit", "fund",
	"update-notifier", "progress",
}

// npmrc reads the project's .npmrc: the lines the step overrides, and the scopes whose registry it
// names (each must be pointed at the gateway too).
func npmrc(root string) (ignored, scopes []string) {
	b, err := os.ReadFile(filepath.Join(root, ".npmrc"))
	if err != nil {
		return nil, nil
	}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		key, value = strings.Trim(strings.TrimSpace(key), `"'`), strings.TrimSpace(value)
		scope, isScope := strings.CutSuffix(key, ":registry")
		isScope = isScope && strings.HasPrefix(scope, "@")
		if !isScope && !slices.Contains(npmOverridden, key) {
			continue
		}
		if isScope && !slices.Contains(scopes, scope) {
			scopes = append(scopes, scope)
		}
		if u, err := url.Parse(value); err == nil && u.User != nil {
			value = u.Redacted()
		}
		ignored = append(ignored, fmt.Sprintf(".npmrc:%d: %s=%s (the step sets it on npm's command line)", n+1, key, value))
	}
	return ignored, scopes
}

func npmPrepare(e *stepEnv) ([]command, error) {
	g := e.Gateway
	registry := g.Upstream()
	_, deps, err := npmManifests(e.Root)
	if err != nil {
		return nil, &StepError{Ecosystem: NPM, Message: "cannot read " + err.Error()}
	}
	refuse := func(u, reason string) { e.Refuse("GET", u, reason) }
	var problems []string
	for _, d := range deps {
		if npmForeign(d.spec) {
			refuse(d.spec, fmt.Sprintf("%s: dependency %s is not from the npm registry", d.manifest, d.name))
			problems = append(problems, fmt.Sprintf("%s: dependency %s: %q is not a version, range or tag of the registry %s, an npm: alias of one, or a file: path", d.manifest, d.name, d.spec, registry))
		}
	}
	// A lockfile URL anywhere on the registry's host is its own (GitLab's tarballs are outside its
	// registry's root); one under the public registry goes to the configured one
	// (replace-registry-host).
	origin := npmOrigin(registry)
	allowed := []string{origin, npmPublic}
	locks := map[string][]byte{}
	for _, name := range npmLocks {
		doc, err := os.ReadFile(filepath.Join(e.Root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("npm dependencies: %w", err)
		}
		p, _, err := npmCheckLock(name, doc, allowed, refuse)
		if err != nil {
			return nil, &StepError{Ecosystem: NPM, Message: "cannot read " + err.Error()}
		}
		problems = append(problems, p...)
		locks[name] = doc
	}
	npmLocked := len(locks) > 0
	yarnLock, err := os.ReadFile(filepath.Join(e.Root, "yarn.lock"))
	if err == nil {
		e.Ignore("yarn.lock: the step installs with npm, not yarn: npm takes versions from it where there is no package-lock.json, leaves it as it was, and writes package-lock.json")
		problems = append(problems, npmCheckYarnLock(yarnLock, append(allowed, yarnPublic), refuse)...)
	}
	if fileExists(filepath.Join(e.Root, "pnpm-lock.yaml")) {
		e.Ignore("pnpm-lock.yaml: the step installs with npm, not pnpm: npm does not read it, and writes package-lock.json")
	}
	ignored, scopes := npmrc(e.Root)
	for _, line := range ignored {
		e.Ignore(line)
	}
	if len(problems) > 0 {
		return nil, &StepError{Ecosystem: NPM, Message: npmFew(problems) + "\nThe step installs only from the configured registry, and only lockfile entries with an integrity."}
	}

	// An empty user and global npmrc: theirs may name other registries, scopes or proxies.
	userrc, globalrc := filepath.Join(e.Cache, "user.npmrc"), filepath.Join(e.Cache, "global.npmrc")
	for _, rc := range []string{userrc, globalrc} {
		if err := os.WriteFile(rc, nil, 0o644); err != nil {
			return nil, fmt.Errorf("npm dependencies: %w", err)
		}
	}
	base := g.Base()
	gw, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(registry))
	// npm takes the URLs of a yarn.lock it reads (where there is no lockfile of its own) that are
	// not on the public registry for remote tarballs: checked above, they must be allowed.
	remote := "none"
	if yarnLock != nil && !npmLocked {
		remote = "all"
	}
	flags := []string{
		"--registry=" + base,
		"--replace-registry-host=npmjs",
		"--proxy=null", "--https-proxy=null", "--noproxy=" + gw.Hostname(), // and HTTP(S)_PROXY
		"--userconfig=" + userrc, "--globalconfig=" + globalrc,
		"--cache=" + filepath.Join(e.Cache, "registry-"+hex.EncodeToString(sum[:6])),
		"--ignore-scripts",
		"--package-lock",
		"--include=dev", // whatever NODE_ENV says: verification runs the tests
		"--allow-git=none", "--allow-remote=" + remote,
		"--no-audit", "--no-fund", "--no-update-notifier", "--progress=false",
		// npm's backoff (10 s to a minute) makes a tarball that fails its integrity fail after
		// minutes; seconds are enough to ride out a registry's hiccup.
		"--fetch-retry-mintimeout=1000", "--fetch-retry-maxtimeout=5000",
	}
	for _, scope := range scopes {
		flags = append(flags, "--"+scope+":registry="+base)
	}

	// From here on, the files the user keeps get their registry URLs back whatever happens.
	e.Undo(func() error {
		var errs []error
		for _, name := range append(slices.Clone(npmLocks), npmHiddenLock) {
			file := filepath.Join(e.Root, filepath.FromSlash(name))
			doc, err := os.ReadFile(file)
			if err != nil {
				continue
			}
			if back := npmMapURLs(doc, g.Base(), g.UpstreamURL); !bytes.Equal(back, doc) {
				errs = append(errs, os.WriteFile(file, back, 0o644))
			}
		}
		return errors.Join(errs...)
	})
	if yarnLock != nil {
		e.Undo(func() error { return os.WriteFile(filepath.Join(e.Root, "yarn.lock"), yarnLock, 0o644) })
		locks["yarn.lock"] = yarnLock
	}
	for name, doc := range locks {
		if err := os.WriteFile(filepath.Join(e.Root, name), npmMapURLs(doc, origin, g.GatewayURL), 0o644); err != nil {
			return nil, fmt.Errorf("npm dependencies: %w", err)
		}
	}
	ci := command{Argv: append([]string{"npm", "ci"}, flags...)}
	if e.Resolved && npmLocked {
		return []command{ci}, nil
	}
	return []command{{Argv: append([]string{"npm", "install", "--package-lock-only"}, flags...)}, ci}, nil
}

// npmFinish checks the lockfile npm wrote (every entry with an integrity: npm ci does not insist)
// and counts its packages.
func npmFinish(e *stepEnv) (int, error) {
	for _, name := range npmLocks {
		doc, err := os.ReadFile(filepath.Join(e.Root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("npm dependencies: %w", err)
		}
		problems, n, err := npmCheckLock(name, doc, []string{e.Gateway.Base(), npmOrigin(e.Gateway.Upstream()), npmPublic}, nil)
		if err != nil {
			return -1, &StepError{Ecosystem: NPM, Message: "cannot read " + err.Error()}
		}
		if len(problems) > 0 {
			return -1, &StepError{Ecosystem: NPM, Message: strings.ReplaceAll(npmFew(problems), e.Gateway.Base(), e.Gateway.Upstream())}
		}
		return n, nil
	}
	return -1, &StepError{Ecosystem: NPM, Message: "npm wrote no package-lock.json"}
}

// npmOrigin is the scheme://host/ of a URL.
func npmOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Scheme + "://" + u.Host + "/"
}

// npmMapURLs maps every URL starting with prefix in a lockfile (a JSON string, or a quoted yarn.lock
// value: it ends at the quote) with f.
func npmMapURLs(doc []byte, prefix string, f func(string) string) []byte {
	quoted := []byte(`"` + prefix)
	if !bytes.Contains(doc, quoted) {
		return doc
	}
	var out bytes.Buffer
	for {
		i := bytes.Index(doc, quoted)
		if i < 0 {
			break
		}
		end := bytes.IndexByte(doc[i+1:], '"')
		if end < 0 {
			break
		}
		out.Write(doc[:i+1])
		out.WriteString(f(string(doc[i+1 : i+1+end])))
		doc = doc[i+1+end:]
	}
	out.Write(doc)
	return out.Bytes()
}

// npmRewrite points the tarball URLs of a packument's versions at the gateway; any other document
// is passed as it is.
func npmRewrite(g *Gateway, _, _ string, body []byte) []byte {
	var doc map[string]json.RawMessage
	var versions map[string]map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || doc["versions"] == nil || json.Unmarshal(doc["versions"], &versions) != nil {
		return body
	}
	for _, v := range versions {
		var dist map[string]json.RawMessage
		var tarball string
		if json.Unmarshal(v["dist"], &dist) != nil || json.Unmarshal(dist["tarball"], &tarball) != nil || tarball == "" {
			continue
		}
		dist["tarball"], _ = json.Marshal(g.GatewayURL(tarball))
		v["dist"], _ = json.Marshal(dist)
	}
	var err error
	if doc["versions"], err = json.Marshal(versions); err != nil {
		return body
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// npmBoilerplate are parts of npm's error lines that say nothing of this failure, or suggest what
// the step refuses (installing from a URL).
var npmBoilerplate = []string{"A complete log of this run", "behind a proxy", "Note that you can also install from a", "tarball, folder, http url, or git url"}

// npmExplain keeps npm's error lines, without its boilerplate, and its warnings of a tarball
// that failed its integrity check (which name the package).
func npmExplain(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if old, ok := strings.CutPrefix(line, "npm ERR!"); ok { // npm 9 and earlier
			line = "npm error" + old
		}
		// A line of npm's code alone ("npm error 404") separates paragraphs.
		if !strings.HasPrefix(line, "npm error ") && !strings.HasPrefix(line, "npm warn tarball ") ||
			strings.Trim(strings.TrimPrefix(line, "npm error"), " 0123456789") == "" ||
			slices.ContainsFunc(npmBoilerplate, func(b string) bool { return strings.Contains(line, b) }) || slices.Contains(keep, line) {
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) > 12 {
		keep = keep[len(keep)-12:]
	}
	return strings.Join(keep, "\n")
}

// npmFew keeps the first lines of a list of problems.
func npmFew(problems []string) string {
	if len(problems) > 6 {
		problems = append(problems[:5:5], fmt.Sprintf("and %d more", len(problems)-5))
	}
	return strings.Join(problems, "\n")
}
