// Package lang knows the languages factory builds: how to recognise each in
// a repository, the global verification that runs when the repository has
// no scripts/verify.sh, and how the planner should write work orders and
// acceptance commands in it. Detection is pure: it reads only the files it
// is given; MachineToolchains asks the installed toolchains (through proc)
// where their caches are, for the sandbox.
package lang

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// ID names a language profile.
type ID string

// The profiles, in the order detection reports them (see Detect).
const (
	Go         ID = "go"
	Rust       ID = "rust"
	JavaScript ID = "javascript" // JavaScript and TypeScript: one package.json
	CFamily    ID = "c"          // C and C++, built with CMake or make
	Java       ID = "java"
	Python     ID = "python"
)

// order is the fixed order of Detection.Profiles: compiled languages with a
// standard test command first, Python (often a project's tooling) last.
var order = []ID{Go, Rust, JavaScript, CFamily, Java, Python}

// Profile is one language found in a repository, with the facts its
// default verification depends on.
type Profile struct {
	ID ID `json:"id"`
	// Markers are the root files that revealed the language, sorted.
	Markers []string `json:"markers"`

	// JavaScript/TypeScript.
	PackageManager string `json:"package_manager,omitempty"` // npm, pnpm or yarn, from the lockfile
	TestScript     bool   `json:"test_script,omitempty"`     // package.json has a real "test" script
	Runner         string `json:"runner,omitempty"`          // without one: jest, vitest or node (node --test)
	TypeScript     bool   `json:"typescript,omitempty"`      // tsconfig.json at the root

	// C/C++: CMake when CMakeLists.txt is at the root, else make.
	CMake bool `json:"cmake,omitempty"`

	// Java: Gradle when build.gradle(.kts) is at the root and no pom.xml;
	// GradleWrapper when gradlew is there too.
	Gradle        bool `json:"gradle,omitempty"`
	GradleWrapper bool `json:"gradle_wrapper,omitempty"`
}

// Name is the language's name for people.
func (p Profile) Name() string {
	switch p.ID {
	case Go:
		return "Go"
	case Rust:
		return "Rust"
	case JavaScript:
		if p.TypeScript {
			return "TypeScript"
		}
		return "JavaScript"
	case CFamily:
		return "C/C++"
	case Java:
		return "Java"
	case Python:
		return "Python"
	}
	return string(p.ID)
}

// Detection is what a repository holds: its profiles in a fixed order
// (Go, Rust, JavaScript/TypeScript, C/C++, Java, Python). It is never
// empty: a repository with no marker at all is a Python one with Fallback
// set, as the seeds' verification assumes.
type Detection struct {
	Profiles []Profile `json:"profiles"`
	// Fallback says no marker was found and Profiles is Python by default.
	Fallback bool `json:"fallback,omitempty"`
}

// Primary is the first profile: the one the planner's examples use.
func (d Detection) Primary() Profile { return d.Profiles[0] }

// Has reports whether the language was detected.
func (d Detection) Has(id ID) bool {
	return slices.ContainsFunc(d.Profiles, func(p Profile) bool { return p.ID == id })
}

// PythonOnly says the repository is a Python one (or has no marker): then
// every rule of the seeds applies unchanged.
func (d Detection) PythonOnly() bool {
	return len(d.Profiles) == 1 && d.Profiles[0].ID == Python
}

// Describe names the profiles and their markers, e.g.
// "Go (go.mod), Python (pyproject.toml)".
func (d Detection) Describe() string {
	parts := make([]string, len(d.Profiles))
	for i, p := range d.Profiles {
		if d.Fallback {
			parts[i] = p.Name() + " (no project file found: the default)"
			continue
		}
		parts[i] = p.Name() + " (" + strings.Join(p.Markers, ", ") + ")"
	}
	return strings.Join(parts, ", ")
}

// Markers per language, all at the repository root. A Makefile counts for
// C/C++ only when nothing else claims the repository and it holds no Python
// file: beside go.mod or pyproject.toml it is a task runner, not a build.
var (
	goMarkers     = []string{"go.mod", "go.work"}
	rustMarkers   = []string{"Cargo.toml"}
	jsMarkers     = []string{"package.json"}
	cmakeMarkers  = []string{"CMakeLists.txt"}
	makeMarkers   = []string{"GNUmakefile", "Makefile", "makefile"}
	mavenMarkers  = []string{"pom.xml"}
	gradleMarkers = []string{"build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"}
	pyMarkers     = []string{"pyproject.toml", "requirements.txt", "setup.cfg", "setup.py"}
	lockfiles     = []struct{ file, manager string }{
		// The first found wins, so a repository that has several picks
		// the same one every time.
		{"pnpm-lock.yaml", "pnpm"}, {"yarn.lock", "yarn"}, {"package-lock.json", "npm"}, {"npm-shrinkwrap.json", "npm"},
	}
)

// DetectFiles detects the languages of a repository from its file list
// (slash-separated, root-relative paths, such as `git ls-files` prints).
// It cannot read package.json, so a JavaScript profile assumes the package
// has a test script.
func DetectFiles(files []string) Detection {
	root := map[string]bool{}
	py := false
	for _, f := range files {
		if !strings.Contains(f, "/") {
			root[f] = true
		}
		py = py || path.Ext(f) == ".py"
	}
	d := detect(root, func() bool { return py })
	for i, p := range d.Profiles {
		if p.ID == JavaScript {
			d.Profiles[i].TestScript = true
		}
	}
	return d
}

// Detect detects the languages of the repository whose root is fsys. It
// reads the root directory, package.json when there is one, and walks the
// tree for Python files only when a lone Makefile leaves it open.
func Detect(fsys fs.FS) (Detection, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return Detection{}, err
	}
	root := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			root[e.Name()] = true
		}
	}
	var walkErr error
	d := detect(root, func() bool {
		found, err := hasPython(fsys)
		walkErr = err
		return found
	})
	if walkErr != nil {
		return Detection{}, walkErr
	}
	for i, p := range d.Profiles {
		if p.ID != JavaScript {
			continue
		}
		data, err := fs.ReadFile(fsys, "package.json")
		if err != nil {
			return Detection{}, err
		}
		d.Profiles[i].TestScript, d.Profiles[i].Runner = readPackage(data)
	}
	return d, nil
}

func detect(root map[string]bool, hasPy func() bool) Detection {
	found := func(names []string) []string {
		var out []string
		for _, n := range names {
			if root[n] {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	var d Detection
	add := func(p Profile) { d.Profiles = append(d.Profiles, p) }
	if m := found(goMarkers); m != nil {
		add(Profile{ID: Go, Markers: m})
	}
	if m := found(rustMarkers); m != nil {
		add(Profile{ID: Rust, Markers: m})
	}
	if m := found(jsMarkers); m != nil {
		p := Profile{ID: JavaScript, Markers: m, PackageManager: "npm", Runner: "node", TypeScript: root["tsconfig.json"]}
		if p.TypeScript {
			p.Markers = append(p.Markers, "tsconfig.json")
		}
		for _, l := range lockfiles {
			if root[l.file] {
				p.PackageManager = l.manager
				break
			}
		}
		add(p)
	}
	if m := found(cmakeMarkers); m != nil {
		add(Profile{ID: CFamily, Markers: m, CMake: true})
	}
	if m := found(mavenMarkers); m != nil {
		add(Profile{ID: Java, Markers: m})
	} else if m := found(gradleMarkers); m != nil {
		add(Profile{ID: Java, Markers: m, Gradle: true, GradleWrapper: root["gradlew"]})
	}
	pyFound := found(pyMarkers)
	if pyFound != nil {
		add(Profile{ID: Python, Markers: pyFound})
	}
	if m := found(makeMarkers); d.Profiles == nil && m != nil && !hasPy() {
		add(Profile{ID: CFamily, Markers: m})
	}
	if d.Profiles == nil {
		return Detection{Profiles: []Profile{{ID: Python}}, Fallback: true}
	}
	slices.SortStableFunc(d.Profiles, func(a, b Profile) int {
		return slices.Index(order, a.ID) - slices.Index(order, b.ID)
	})
	return d
}

// skipDirs are not searched for Python files: dependencies and build output.
var skipDirs = map[string]bool{"node_modules": true, "target": true, "build": true, "vendor": true, "venv": true}

// maxWalk bounds the entries hasPython looks at.
const maxWalk = 20000

var errStop = errors.New("stop")

// hasPython reports whether the tree holds a .py file outside hidden and
// dependency directories, looking at no more than maxWalk entries.
func hasPython(fsys fs.FS) (bool, error) {
	found, seen := false, 0
	err := fs.WalkDir(fsys, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // unreadable: nothing to find there
		}
		if seen++; seen > maxWalk {
			return errStop
		}
		if e.IsDir() {
			if p != "." && (strings.HasPrefix(e.Name(), ".") || skipDirs[e.Name()]) {
				return fs.SkipDir
			}
			return nil
		}
		if path.Ext(p) == ".py" {
			found = true
			return errStop
		}
		return nil
	})
	if err != nil && err != errStop {
		return false, err
	}
	return found, nil
}

// npmDefaultTest is the test script `npm init` writes, which always fails.
const npmDefaultTest = `echo "Error: no test specified" && exit 1`

// readPackage reads package.json for a test script and, without one, the
// test runner among its dependencies. A package.json that does not parse
// has no script: the node --test fallback then runs, and the package
// manager would fail on it anyway.
func readPackage(data []byte) (testScript bool, runner string) {
	var pkg struct {
		Scripts         map[string]any `json:"scripts"`
		Dependencies    map[string]any `json:"dependencies"`
		DevDependencies map[string]any `json:"devDependencies"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return false, "node"
	}
	if s, ok := pkg.Scripts["test"].(string); ok && strings.TrimSpace(s) != "" && strings.TrimSpace(s) != npmDefaultTest {
		testScript = true
	}
	has := func(name string) bool {
		_, dev := pkg.DevDependencies[name]
		_, dep := pkg.Dependencies[name]
		return dev || dep
	}
	switch {
	case has("vitest"):
		runner = "vitest"
	case has("jest"):
		runner = "jest"
	default:
		runner = "node"
	}
	return testScript, runner
}
