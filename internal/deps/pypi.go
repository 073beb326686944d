package deps

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// The PyPI step makes a fresh virtual environment, .venv in the work tree, with the machine's
// python3, and installs into it with pip what the root's requirements*.txt files (and the files
// they include) and pyproject.toml's [project] dependencies and test extras name: wheels only unless
// --deps-allow-sdist, so that no package's build code runs; hash-checked when every requirement
// carries a hash. The project itself is not installed (its build backend would run): its code is
// tested from the work tree. pip reads no configuration file and no PIP_* variable, and gets the
// requirements as the step rewrote them, inside .venv: index and find-links options are dropped and
// reported, a dependency URL on a host that is not the registry is refused.
func init() {
	drivers[PyPI] = &driver{
		eco:       PyPI,
		inputs:    pypiInputs,
		installed: ".venv",
		rewrite:   pypiRewrite,
		prepare:   pypiPrepare,
		finish:    pypiFinish,
		explain:   pypiExplain,
		verifyEnv: pypiVerifyEnv,
	}
}

// pypiWork is where, inside the virtual environment (not part of the tree's content, and readable
// by the confined pip), the step writes its copies of the requirements files; pip writes its report
// to pypiReport.
const (
	pypiWork   = ".venv/factory-pip"
	pypiReport = ".venv/factory-pip-report.json"
)

// pypiTestGroups are the extras and dependency groups installed with a pyproject.toml's
// dependencies: those that tests need.
var pypiTestGroups = []string{"test", "tests", "testing", "dev"}

func pypiInputs(root string) ([]string, error) {
	files, err := pipRequirementFiles(root)
	if err != nil {
		return nil, err
	}
	p, err := readPyproject(root)
	var se *StepError
	switch {
	case errors.As(err, &se):
		// Read by the step, which reports it.
		files = append(files, "pyproject.toml")
	case err != nil:
		return nil, err
	case p != nil && p.installs():
		files = append(files, "pyproject.toml")
	}
	return files, nil
}

// pipRootFiles are the root's requirements*.txt files, by name.
func pipRootFiles(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("dependency step: %w", err)
	}
	var out []string
	for _, de := range entries {
		if name := de.Name(); strings.HasPrefix(name, "requirements") && strings.HasSuffix(name, ".txt") &&
			fileExists(filepath.Join(root, name)) {
			out = append(out, name)
		}
	}
	return out, nil
}

// pipRequirementFiles are the root's requirements*.txt files and the files inside root they include
// (-r, -c), in a stable order.
func pipRequirementFiles(root string) ([]string, error) {
	roots, err := pipRootFiles(root)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	var walk func(rel string) error
	walk = func(rel string) error {
		abs := filepath.Join(root, filepath.FromSlash(rel))
		if seen[rel] || !fileExists(abs) { // the step reports an included file that is missing
			return nil
		}
		seen[rel] = true
		b, err := os.ReadFile(abs)
		if err != nil {
			return fmt.Errorf("dependency step: read %s: %w", rel, err)
		}
		out = append(out, rel)
		for _, l := range pipLines(string(b)) {
			if ref, _, ok := l.nested(); ok && !pipIsURL(ref) {
				if inc, ok := pipIncluded(rel, ref); ok {
					if err := walk(inc); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	for _, name := range roots {
		if err := walk(name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pipIncluded is the slash path, relative to the root, of a file that rel includes as ref (relative
// to rel's directory, as pip takes it); false when it is outside the root.
func pipIncluded(rel, ref string) (string, bool) {
	if filepath.IsAbs(ref) {
		return "", false
	}
	p := filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(rel)), ref))
	return p, p != ".." && !strings.HasPrefix(p, "../")
}

// pipLine is one logical line of a requirements file: continuations joined, comment removed.
type pipLine struct {
	n    int // its first line's number
	text string
}

var (
	pipComment     = regexp.MustCompile(`(^|\s+)#.*$`)
	pipCommentLine = regexp.MustCompile(`^\s*#`)
)

// pySplitLines splits s into lines as Python's str.splitlines does, which pip uses, without the
// line breaks; a final line break starts no line.
func pySplitLines(s string) []string {
	s = strings.TrimPrefix(s, "\ufeff") // pip decodes a file's BOM away
	var out []string
	for len(s) > 0 {
		i := strings.IndexFunc(s, func(r rune) bool { return strings.ContainsRune("\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029", r) })
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		if strings.HasPrefix(s[i:], "\r\n") {
			s = s[i+2:]
		} else {
			_, size := utf8.DecodeRuneInString(s[i:])
			s = s[i+size:]
		}
	}
	return out
}

// pipLines splits a requirements file as pip does: a line ending with a backslash continues on the
// next unless it is a comment; "#" at the start or after white space starts a comment.
func pipLines(data string) []pipLine {
	var out []pipLine
	var cont []string
	start := 0
	add := func(n int, line string) {
		if text := strings.TrimSpace(pipComment.ReplaceAllString(line, "")); text != "" {
			out = append(out, pipLine{n: n, text: text})
		}
	}
	for i, line := range pySplitLines(data) {
		if strings.HasSuffix(line, `\`) && !pipCommentLine.MatchString(line) {
			if cont == nil {
				start = i + 1
			}
			cont = append(cont, strings.Trim(line, `\`))
			continue
		}
		if cont != nil {
			add(start, strings.Join(append(cont, line), ""))
			cont = nil
			continue
		}
		add(i+1, line)
	}
	if cont != nil {
		add(start, strings.Join(cont, ""))
	}
	return out
}

// pipOption is one option of a requirements file line.
type pipOption struct {
	name  string // its long name, or the token as written when pip knows no such option
	value string
	known bool
}

// pipOptions are the options pip accepts in a requirements file, by long name, with whether each
// takes a value.
var pipOptions = map[string]bool{
	"--index-url": true, "--extra-index-url": true, "--no-index": false, "--find-links": true, "--trusted-host": true,
	"--constraint": true, "--requirement": true, "--editable": true,
	"--no-binary": true, "--only-binary": true, "--prefer-binary": false, "--require-hashes": false, "--pre": false,
	"--use-feature": true, "--global-option": true, "--config-settings": true, "--hash": true,
}

var pipShort = map[string]string{"-i": "--index-url", "-f": "--find-links", "-c": "--constraint", "-r": "--requirement", "-e": "--editable"}

// split is the line as pip reads it: the requirement (the words before the first one starting
// with "-"), and the options after.
func (l pipLine) split() (string, []pipOption) {
	words := strings.Split(l.text, " ")
	i := slices.IndexFunc(words, func(w string) bool { return strings.HasPrefix(w, "-") })
	if i < 0 {
		return strings.TrimSpace(l.text), nil
	}
	return strings.TrimSpace(strings.Join(words[:i], " ")), pipParseOptions(shellWords(strings.Join(words[i:], " ")))
}

// pipParseOptions reads options as pip's optparse does, with unambiguous prefixes of long names.
// Words that are not options are dropped, as pip drops them.
func pipParseOptions(words []string) []pipOption {
	var out []pipOption
	for i := 0; i < len(words); i++ {
		w := words[i]
		var name, value string
		hasValue := false
		switch {
		case strings.HasPrefix(w, "--"):
			name, value, hasValue = strings.Cut(w, "=")
			name = pipLongName(name)
		case strings.HasPrefix(w, "-") && len(w) >= 2:
			name = pipShort[w[:2]]
			if len(w) > 2 {
				value, hasValue = w[2:], true
			}
		default:
			continue
		}
		takes, known := pipOptions[name]
		if !known {
			out = append(out, pipOption{name: w})
			continue
		}
		if takes && !hasValue {
			if i+1 == len(words) {
				out = append(out, pipOption{name: w})
				continue
			}
			i++
			value = words[i]
		}
		out = append(out, pipOption{name: name, value: value, known: true})
	}
	return out
}

// pipLongName resolves an abbreviated long option, as optparse does.
func pipLongName(name string) string {
	if _, ok := pipOptions[name]; ok {
		return name
	}
	var match string
	for full := range pipOptions {
		if strings.HasPrefix(full, name) {
			if match != "" {
				return name // ambiguous
			}
			match = full
		}
	}
	if match == "" {
		return name
	}
	return match
}

// nested is the file a line includes (-r, or with constraint -c) when it is no requirement line
// (none, nor -e): pip follows the first such option of a line and ignores the rest of it.
func (l pipLine) nested() (ref string, constraint, ok bool) {
	req, opts := l.split()
	if req != "" || slices.ContainsFunc(opts, func(o pipOption) bool { return o.name == "--editable" }) {
		return "", false, false
	}
	for _, o := range opts {
		switch o.name {
		case "--requirement":
			return o.value, false, true
		case "--constraint":
			return o.value, true, true
		}
	}
	return "", false, false
}

// shellWords splits s as Python's shlex.split does, for what a requirements line holds.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false // inside a word
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			if r == '"' {
				quote = 0
			} else if r == '\\' {
				escaped = true
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, in = true, true
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// pipReqs are the requirements files the step gives pip: a copy of each, inside the virtual
// environment, that it rewrote line for line, so that pip's messages name the user's lines.
type pipReqs struct {
	e       *stepEnv
	copies  map[string][]string // by the source's slash path: its lines as rewritten, "" where dropped
	reqs    int                 // requirement lines of files read as requirements (not constraints)
	hashed  int                 // of those, the ones carrying a --hash
	extras  []string            // the project's own extras that requirement lines name (-e .[test])
	refused []string            // the refused requirements, a line each
}

// pipCopy is where the step writes its copy of the requirements file rel.
func pipCopy(root, rel string) string {
	return filepath.Join(root, filepath.FromSlash(pypiWork), filepath.FromSlash(rel))
}

// file reads one requirements (or constraints) file, slash path rel, included from where.
func (p *pipReqs) file(rel string, constraint bool, where string) error {
	if _, done := p.copies[rel]; done {
		return nil
	}
	abs, err := pipInside(p.e.Root, rel)
	if err != nil {
		p.refused = append(p.refused, fmt.Sprintf("%s: %s: %s", where, rel, err))
		return nil
	}
	if !fileExists(abs) {
		p.refused = append(p.refused, fmt.Sprintf("%s: %s: no such file in the work tree", where, rel))
		return nil
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return fmt.Errorf("dependency step: read %s: %w", rel, err)
	}
	out := make([]string, len(pySplitLines(string(b))))
	p.copies[rel] = out
	for _, l := range pipLines(string(b)) {
		at := fmt.Sprintf("%s:%d", rel, l.n)
		if ref, cons, ok := l.nested(); ok {
			if pipIsURL(ref) {
				p.refuse(at, "-r/-c "+ref, ref, "a requirements file on the network")
				continue
			}
			inc, inside := pipIncluded(rel, ref)
			if !inside {
				p.refused = append(p.refused, fmt.Sprintf("%s: %s: outside the work tree", at, ref))
				continue
			}
			if err := p.file(inc, cons, at); err != nil {
				return err
			}
			flag := "-r "
			if cons {
				flag = "-c "
			}
			out[l.n-1] = flag + pipQuote(pipCopy(p.e.Root, inc))
			continue
		}
		out[l.n-1] = p.line(at, l, constraint)
	}
	return nil
}

// line rewrites one line that includes no file: a requirement, or global options.
func (p *pipReqs) line(at string, l pipLine, constraint bool) string {
	req, opts := l.split()
	editable := false
	if req == "" {
		for _, o := range opts {
			if o.name == "--editable" {
				req, editable = o.value, true
				break
			}
		}
	}
	if req == "" {
		var kept []string
		for _, o := range opts {
			kept = append(kept, p.option(at, o)...)
		}
		return strings.Join(kept, " ")
	}
	var hashes []string
	for _, o := range opts {
		switch o.name {
		case "--hash":
			hashes = append(hashes, "--hash="+pipQuote(o.value))
		case "--global-option", "--config-settings":
			p.e.Ignore(fmt.Sprintf("%s: %s %s: ignored: build options are not passed", at, o.name, o.value))
		}
		// pip ignores the global options of a requirement line.
	}
	out, ok := p.requirement(at, req, editable)
	if !ok {
		return ""
	}
	if !constraint {
		p.reqs++
		if len(hashes) > 0 {
			p.hashed++
		}
	}
	return strings.Join(append([]string{out}, hashes...), " ")
}

// option rewrites a global option of a requirements file: the harness's settings of where packages
// come from and of which files are installed win.
func (p *pipReqs) option(at string, o pipOption) []string {
	shown := strings.TrimSpace(o.name + " " + pipRedact(o.value))
	switch {
	case !o.known:
		p.e.Ignore(fmt.Sprintf("%s: %s: ignored: not an option pip takes in a requirements file", at, shown))
	case slices.Contains([]string{"--index-url", "--extra-index-url", "--no-index", "--find-links", "--trusted-host"}, o.name):
		p.e.Ignore(fmt.Sprintf("%s: %s: ignored: packages come from the configured registry %s", at, shown, p.e.Opts.Registry(PyPI)))
	case o.name == "--no-binary" || o.name == "--only-binary":
		if p.e.Opts.AllowSdist {
			return []string{o.name, pipQuote(o.value)}
		}
		p.e.Ignore(fmt.Sprintf("%s: %s: ignored: the step installs wheels only (--deps-allow-sdist lets pip build source distributions)", at, shown))
	case o.name == "--pre" || o.name == "--prefer-binary" || o.name == "--require-hashes":
		return []string{o.name}
	default:
		p.e.Ignore(fmt.Sprintf("%s: %s: ignored: pip's settings are the harness's", at, shown))
	}
	return nil
}

var (
	// pipDirect is a PEP 508 direct reference: name [extras] @ url.
	pipDirect = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*@\s*(\S+)(.*)$`)
	pipName   = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?`)
	pipExtras = regexp.MustCompile(`^(.+?)(\[[^\]]+\])$`)
	pipVCS    = regexp.MustCompile(`^(git|hg|svn|bzr)(\+|$)`)
	// pipEnvVar is what pip replaces by an environment variable's value in a requirements file.
	pipEnvVar = regexp.MustCompile(`\$\{[A-Z0-9_]+\}`)
)

// pipArchives are the file names pip installs from a path.
var pipArchives = []string{".whl", ".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma"}

// requirement checks one requirement and returns it as pip gets it: one on the registry as is, a
// URL on the registry's host through the gateway, a wheel in the tree by its absolute path. It
// refuses URLs elsewhere and VCS requirements, and drops what would build a local project.
func (p *pipReqs) requirement(at, req string, editable bool) (string, bool) {
	if v := pipEnvVar.FindString(req); v != "" {
		// pip would expand it in the step's copy, after the checks here.
		p.refused = append(p.refused, fmt.Sprintf("%s: %s: %s: the step does not take environment variables in requirements", at, req, v))
		return "", false
	}
	if m := pipDirect.FindStringSubmatch(req); m != nil && !editable {
		u, ok := p.url(at, m[1], m[3])
		return m[1] + m[2] + " @ " + u + m[4], ok
	}
	if pipIsURL(req) {
		name := req
		if u, err := url.Parse(req); err == nil {
			if egg := strings.TrimPrefix(u.Fragment, "egg="); egg != u.Fragment {
				name = egg
			} else {
				name = pipRedact(req)
			}
		}
		if editable {
			p.refuse(at, name, req, "an editable requirement from a URL: pip would build it")
			return "", false
		}
		return p.url(at, name, req)
	}
	if editable || strings.Contains(req, "/") || strings.HasPrefix(req, ".") ||
		slices.ContainsFunc(pipArchives, func(ext string) bool { return strings.HasSuffix(strings.ToLower(req), ext) }) {
		return p.local(at, req, editable)
	}
	return req, true
}

// url takes a URL requirement of package name: allowed on the registry's host, through the gateway.
func (p *pipReqs) url(at, name, raw string) (string, bool) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.refuse(at, name, raw, "not a URL: "+err.Error())
		return "", false
	case pipVCS.MatchString(strings.ToLower(u.Scheme)):
		p.refuse(at, name, raw, "a VCS requirement: pip would clone and build it")
		return "", false
	case u.Scheme == "file":
		if _, ok := p.local(at, u.Path, false); !ok {
			return "", false
		}
		return raw, true
	}
	reg, err := url.Parse(p.e.Opts.Registry(PyPI))
	switch {
	case u.User != nil:
		p.refuse(at, name, raw, "a URL with credentials")
		return "", false
	case err != nil || u.Scheme != reg.Scheme || !strings.EqualFold(u.Host, reg.Host):
		p.refuse(at, name, raw, "not on the configured registry "+p.e.Opts.Registry(PyPI))
		return "", false
	}
	return pipGatewayURL(p.e.Gateway, u), true
}

// local takes a local path requirement: the project itself is not installed (its dependencies and
// extras are), a wheel in the tree is, a directory or source archive only when sdists are allowed.
func (p *pipReqs) local(at, req string, editable bool) (string, bool) {
	path, extras := req, ""
	if m := pipExtras.FindStringSubmatch(req); m != nil {
		path, extras = m[1], m[2]
	}
	rel := filepath.ToSlash(filepath.Clean(path))
	if filepath.IsAbs(path) {
		if r, err := filepath.Rel(p.e.Root, path); err == nil {
			rel = filepath.ToSlash(r)
		}
	}
	abs, err := pipInside(p.e.Root, rel)
	if err != nil {
		p.refused = append(p.refused, fmt.Sprintf("%s: %s: %s", at, req, err))
		return "", false
	}
	info, err := os.Stat(abs)
	if err != nil {
		p.refused = append(p.refused, fmt.Sprintf("%s: %s: no such file or directory in the work tree", at, req))
		return "", false
	}
	switch {
	case rel == ".":
		if extras != "" {
			for _, x := range strings.Split(strings.Trim(extras, "[]"), ",") {
				p.extras = append(p.extras, strings.TrimSpace(x))
			}
		}
		p.e.Ignore(fmt.Sprintf("%s: %s: the project itself is not installed (its build backend would run): it is tested from the work tree, its pyproject.toml dependencies are installed", at, req))
		return "", false
	// pip reads paths relative to its current directory, the work tree's root, wherever the file is.
	case info.Mode().IsRegular() && strings.HasSuffix(abs, ".whl") && !editable:
		return req, true
	case p.e.Opts.AllowSdist:
		if editable {
			return "-e " + pipQuote(req), true
		}
		return req, true
	}
	p.e.Ignore(fmt.Sprintf("%s: %s: not installed: building a local project runs its build code (--deps-allow-sdist allows it)", at, req))
	return "", false
}

// refuse records a refused requirement: in deps.jsonl, and for the step's error.
func (p *pipReqs) refuse(at, name, raw, why string) {
	shown := pipRedact(raw)
	p.e.Refuse("GET", shown, at+": "+why)
	p.refused = append(p.refused, fmt.Sprintf("%s: %s: %s: %s", at, name, shown, why))
}

// pipIsURL reports whether pip reads s as a URL rather than a name or a path.
func pipIsURL(s string) bool {
	scheme, _, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	scheme = strings.ToLower(scheme)
	return slices.Contains([]string{"http", "https", "file", "ftp"}, scheme) || pipVCS.MatchString(scheme)
}

// pipInside is the absolute path of rel (slash-separated, relative to root), or an error when it,
// or where its symbolic links lead, is outside root.
func pipInside(root, rel string) (string, error) {
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(filepath.FromSlash(rel)) {
		return "", errors.New("outside the work tree")
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	if err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(realRoot, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", errors.New("leads outside the work tree")
	}
	return abs, nil
}

// pipQuote quotes s for a line that pip splits as a shell would.
func pipQuote(s string) string {
	if !strings.ContainsAny(s, " \t'\"\\") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// pipRedact hides credentials in a URL, for messages.
func pipRedact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// pipGatewayURL is u through the gateway, its fragment (#sha256=, #egg=) kept.
func pipGatewayURL(g *Gateway, u *url.URL) string {
	v := *u
	v.Fragment, v.RawFragment = "", ""
	out := g.GatewayURL(v.String())
	if u.Fragment != "" {
		out += "#" + u.EscapedFragment()
	}
	return out
}

// pyProject is what the step reads of a pyproject.toml.
type pyProject struct {
	name     string              // [project] name, normalized
	deps     []string            // [project] dependencies
	optional map[string][]string // [project.optional-dependencies], by normalized extra
	groups   map[string][]any    // [dependency-groups] (PEP 735), by normalized name
	dynamic  bool                // dependencies are computed by the build backend
}

// installs reports whether the project names anything for the step to install.
func (p *pyProject) installs() bool {
	return len(p.deps) > 0 || len(p.optional) > 0 ||
		slices.ContainsFunc(pypiTestGroups, func(g string) bool { return len(p.groups[g]) > 0 })
}

// readPyproject reads root's pyproject.toml: nil when there is none; a *StepError when it is not
// what the step can read.
func readPyproject(root string) (*pyProject, error) {
	b, err := os.ReadFile(filepath.Join(root, "pyproject.toml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dependency step: read pyproject.toml: %w", err)
	}
	bad := func(format string, args ...any) error {
		return &StepError{Ecosystem: PyPI, Message: "pyproject.toml: " + fmt.Sprintf(format, args...)}
	}
	// Keys are matched exactly, as Python's tomllib does: the decoder matches struct fields
	// case-insensitively.
	var doc map[string]any
	if _, err := toml.Decode(string(b), &doc); err != nil {
		return nil, bad("%v", err)
	}
	p := &pyProject{optional: map[string][]string{}, groups: map[string][]any{}}
	if groups, ok := doc["dependency-groups"].(map[string]any); ok {
		for name, v := range groups {
			list, ok := v.([]any)
			if !ok {
				return nil, bad("[dependency-groups] %s: want an array", name)
			}
			p.groups[pypiNormalize(name)] = list
		}
	}
	project, ok := doc["project"].(map[string]any)
	if !ok {
		return p, nil
	}
	p.name, _ = project["name"].(string)
	p.name = pypiNormalize(p.name)
	if dyn, ok := project["dynamic"].([]any); ok {
		p.dynamic = slices.Contains(dyn, any("dependencies"))
	}
	strs := func(v any, what string) ([]string, error) {
		if v == nil {
			return nil, nil
		}
		list, ok := v.([]any)
		var out []string
		for _, x := range list {
			s, isStr := x.(string)
			ok = ok && isStr
			out = append(out, s)
		}
		if !ok {
			return nil, bad("%s: want an array of strings", what)
		}
		return out, nil
	}
	if p.deps, err = strs(project["dependencies"], "[project] dependencies"); err != nil {
		return nil, err
	}
	if opt, ok := project["optional-dependencies"].(map[string]any); ok {
		for name, v := range opt {
			if p.optional[pypiNormalize(name)], err = strs(v, "[project.optional-dependencies] "+name); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

var pypiNonAlnum = regexp.MustCompile(`[-_.]+`)

// pypiNormalize is a project or extra name as PEP 503 and PEP 685 compare them.
func pypiNormalize(name string) string {
	return pypiNonAlnum.ReplaceAllString(strings.ToLower(name), "-")
}

// pyReq is one requirement a pyproject.toml names, with where.
type pyReq struct{ at, req string }

// requirements are the project's dependencies, those of its test extras and dependency groups and
// of extras, a reference to the project itself (myproject[test]) read as its extras.
func (p *pyProject) requirements(extras []string) ([]pyReq, error) {
	var out []pyReq
	done := map[string]bool{}
	var extra func(name string) error
	var group func(name, at string) error
	add := func(at string, reqs []string) error {
		for _, r := range reqs {
			if m := pipName.FindStringSubmatch(r); m != nil && p.name != "" && pypiNormalize(m[1]) == p.name && !strings.Contains(r, "@") {
				for _, x := range strings.Split(m[2], ",") {
					if x = strings.TrimSpace(x); x != "" {
						if err := extra(x); err != nil {
							return err
						}
					}
				}
				continue
			}
			out = append(out, pyReq{at: at, req: r})
		}
		return nil
	}
	extra = func(name string) error {
		name = pypiNormalize(name)
		if done["extra "+name] {
			return nil
		}
		done["extra "+name] = true
		return add("pyproject.toml [project.optional-dependencies] "+name, p.optional[name])
	}
	group = func(name, at string) error {
		name = pypiNormalize(name)
		if done["group "+name] {
			return nil
		}
		done["group "+name] = true
		list, ok := p.groups[name]
		if !ok {
			return &StepError{Ecosystem: PyPI, Message: fmt.Sprintf("%s: no dependency group %q", at, name)}
		}
		here := "pyproject.toml [dependency-groups] " + name
		for _, item := range list {
			switch v := item.(type) {
			case string:
				if err := add(here, []string{v}); err != nil {
					return err
				}
			case map[string]any:
				inc, _ := v["include-group"].(string)
				if inc == "" {
					return &StepError{Ecosystem: PyPI, Message: here + ": want a requirement or {include-group = \"…\"}"}
				}
				if err := group(inc, here); err != nil {
					return err
				}
			default:
				return &StepError{Ecosystem: PyPI, Message: here + ": want a requirement or {include-group = \"…\"}"}
			}
		}
		return nil
	}
	if err := add("pyproject.toml [project] dependencies", p.deps); err != nil {
		return nil, err
	}
	for _, name := range pypiTestGroups {
		if _, ok := p.optional[name]; ok {
			if err := extra(name); err != nil {
				return nil, err
			}
		}
		if _, ok := p.groups[name]; ok {
			if err := group(name, "pyproject.toml"); err != nil {
				return nil, err
			}
		}
	}
	for _, x := range extras {
		if _, ok := p.optional[pypiNormalize(x)]; ok {
			if err := extra(x); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// pypiScript makes the virtual environment named by its first argument, as `python3 -m venv`
// does, then, given more arguments, runs `pip install` with them in it. One command, so that pip
// reaches the gateway at the address prepare gave it (each command has a port of its own); and no
// " -m pip " on its command line, which pyenv's python3 shim would take for a pip install to
// follow with a rehash of its shims (which fails where they are read-only, as in the sandbox).
const pypiScript = "import os, subprocess, sys, venv; env = sys.argv[1]; venv.EnvBuilder(symlinks=True, with_pip=True).create(env); " +
	"sys.exit(subprocess.call([os.path.join(env, 'bin', 'python'), '-I', '-m', 'pip', 'install', *sys.argv[2:]]) if sys.argv[2:] else 0)"

// pypiProjectCopy is the step's requirements file of the pyproject.toml's requirements.
const pypiProjectCopy = "pyproject-dependencies.txt"

func pypiPrepare(e *stepEnv) ([]command, error) {
	p := &pipReqs{e: e, copies: map[string][]string{}}
	files, err := pipRootFiles(e.Root)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := p.file(f, false, f); err != nil {
			return nil, err
		}
	}
	hashed := p.reqs > 0 && p.hashed == p.reqs
	var fromProject []string
	project, err := readPyproject(e.Root)
	if err != nil {
		return nil, err
	}
	if project != nil {
		reqs, err := project.requirements(p.extras)
		if err != nil {
			return nil, err
		}
		if hashed && len(reqs) > 0 {
			e.Ignore("pyproject.toml: its dependencies are not installed: the requirements files pin every package with hashes, and pip checks all or none")
			reqs = nil
		}
		for _, r := range reqs {
			if out, ok := p.requirement(r.at, r.req, false); ok {
				fromProject = append(fromProject, out)
			}
		}
		if project.dynamic {
			e.Ignore("pyproject.toml: [project] dependencies are dynamic: only the build backend, which the step does not run, knows them")
		}
	}
	if len(p.refused) > 0 {
		return nil, &StepError{Ecosystem: PyPI, Message: "refused:\n" + strings.Join(p.refused, "\n")}
	}

	venv := filepath.Join(e.Root, ".venv")
	// A fresh environment: one that dropped a requirement must not keep its package.
	if err := os.RemoveAll(venv); err != nil {
		return nil, fmt.Errorf("dependency step: remove the old .venv: %w", err)
	}
	write := func(rel string, lines []string) error {
		path := pipCopy(e.Root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("dependency step: %w", err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("dependency step: %w", err)
		}
		return nil
	}
	for rel, lines := range p.copies {
		if err := write(rel, lines); err != nil {
			return nil, err
		}
	}
	if len(fromProject) > 0 {
		if err := write(pypiProjectCopy, fromProject); err != nil {
			return nil, err
		}
	}
	env := []string{
		"PIP_CONFIG_FILE=" + os.DevNull,
		// The gateway is on loopback: a proxy of the user's environment must not be asked for it.
		"no_proxy=127.0.0.1", "NO_PROXY=127.0.0.1",
	}
	// -I: neither PYTHON* variables nor the work tree (the current directory) change what runs.
	argv := []string{"python3", "-I", "-c", pypiScript, venv}
	if p.reqs == 0 && len(fromProject) == 0 {
		return []command{{Argv: argv, Env: env}}, nil
	}
	argv = append(argv,
		"--isolated", "--no-input", "--disable-pip-version-check", "--no-color", "--progress-bar", "off",
		"--index-url", e.Gateway.Base(), "--cache-dir", filepath.Join(e.Cache, "pip"),
		// pip caches over plain http only for a trusted host: the gateway, which is on loopback.
		"--trusted-host", pypiGatewayHost(e.Gateway),
		"--report", filepath.Join(e.Root, filepath.FromSlash(pypiReport)),
	)
	if !e.Opts.AllowSdist {
		argv = append(argv, "--only-binary", ":all:")
	}
	if hashed {
		argv = append(argv, "--require-hashes")
	}
	for _, f := range files {
		argv = append(argv, "-r", pipCopy(e.Root, f))
	}
	if len(fromProject) > 0 {
		argv = append(argv, "-r", pipCopy(e.Root, pypiProjectCopy))
	}
	return []command{{Argv: argv, Env: env}}, nil
}

// pypiGatewayHost is the gateway's host:port.
func pypiGatewayHost(g *Gateway) string {
	u, err := url.Parse(g.Base())
	if err != nil {
		return g.Base()
	}
	return u.Host
}

// pypiFinish counts the packages pip installed, from its report.
func pypiFinish(e *stepEnv) (int, error) {
	b, err := os.ReadFile(filepath.Join(e.Root, filepath.FromSlash(pypiReport)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // nothing to install
	}
	if err != nil {
		return -1, fmt.Errorf("dependency step: pip's report: %w", err)
	}
	var report struct {
		Install []json.RawMessage `json:"install"`
	}
	if err := json.Unmarshal(b, &report); err != nil {
		return -1, fmt.Errorf("dependency step: pip's report: %w", err)
	}
	return len(report.Install), nil
}

var (
	// pypiExtURL is a download URL through the gateway, which the message shows as the upstream's.
	pypiExtURL = regexp.MustCompile(`\S*/` + extPrefix + `(https?)/([^/\s]+)`)
	// pypiCopyPath is the directory of the step's copies of the requirements files, which the
	// message leaves out: the copies keep the user's file names and line numbers.
	pypiCopyPath = regexp.MustCompile(`\S*/` + regexp.QuoteMeta(pypiWork) + `/`)
)

// pypiExplain keeps pip's error lines, from the first: the package and the index's answer.
func pypiExplain(out string) string {
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "ERROR:") })
	if i < 0 {
		return ""
	}
	var keep []string
	for _, l := range lines[i:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		l = pypiExtURL.ReplaceAllStringFunc(l, func(m string) string {
			sub := pypiExtURL.FindStringSubmatch(m)
			host, err := url.PathUnescape(sub[2])
			if err != nil {
				host = sub[2]
			}
			return sub[1] + "://" + host
		})
		keep = append(keep, pypiCopyPath.ReplaceAllString(l, ""))
	}
	if len(keep) > 15 {
		keep = keep[:15]
	}
	if strings.Contains(out, "(from versions: none)") {
		keep = append(keep, "(a package with source distributions only has no version to install without --deps-allow-sdist)")
	}
	return strings.Join(keep, "\n")
}

func pypiVerifyEnv(root, _ string) []string {
	venv := filepath.Join(root, ".venv")
	if !fileExists(filepath.Join(venv, "bin", "python")) {
		return nil
	}
	return []string{"VIRTUAL_ENV=" + venv, "PATH=" + filepath.Join(venv, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// pypiRewrite points the links of a simple-repository page (PEP 503 HTML, PEP 691 JSON) at the
// gateway. Each is resolved against the page's own URL first, as pip would: links to a files host
// (pypi.org's files.pythonhosted.org) and relative links that climb above the registry's root
// (devpi's, Nexus's) both come back through the gateway. Fragments (#sha256=) are kept.
func pypiRewrite(g *Gateway, path, contentType string, body []byte) []byte {
	page, err := url.Parse(g.UpstreamURL(g.Base() + path))
	if err != nil {
		return body
	}
	ct := strings.ToLower(contentType)
	switch {
	case strings.Contains(ct, "json"):
		return pypiRewriteJSON(g, page, body)
	case strings.Contains(ct, "html"):
		return pypiRewriteHTML(g, page, body)
	}
	return body
}

// pypiLink is href, on page, through the gateway; href itself when it is no http(s) URL.
func pypiLink(g *Gateway, page *url.URL, href string) string {
	ref, err := url.Parse(strings.TrimSpace(href))
	if err != nil {
		return href
	}
	abs := page.ResolveReference(ref)
	if abs.Scheme != "http" && abs.Scheme != "https" {
		return href
	}
	return pipGatewayURL(g, abs)
}

var (
	pypiHref = regexp.MustCompile(`(?i)(\shref\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)`)
	pypiBase = regexp.MustCompile(`(?i)<base\s[^>]*?href\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)`)
)

func pypiRewriteHTML(g *Gateway, page *url.URL, body []byte) []byte {
	unquote := func(v string) string { return html.UnescapeString(strings.Trim(v, `"'`)) }
	// A <base> changes what relative links resolve against, for pip as here.
	if m := pypiBase.FindSubmatch(body); m != nil {
		if b, err := url.Parse(unquote(string(m[1]))); err == nil {
			page = page.ResolveReference(b)
		}
	}
	return pypiHref.ReplaceAllFunc(body, func(attr []byte) []byte {
		m := pypiHref.FindSubmatch(attr)
		return []byte(string(m[1]) + `"` + html.EscapeString(pypiLink(g, page, unquote(string(m[2])))) + `"`)
	})
}

func pypiRewriteJSON(g *Gateway, page *url.URL, body []byte) []byte {
	var doc map[string]json.RawMessage
	var files []map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || doc["files"] == nil || json.Unmarshal(doc["files"], &files) != nil {
		return body
	}
	for _, f := range files {
		var u string
		if json.Unmarshal(f["url"], &u) != nil {
			continue
		}
		f["url"], _ = json.Marshal(pypiLink(g, page, u))
	}
	var err error
	if doc["files"], err = json.Marshal(files); err != nil {
		return body
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}
