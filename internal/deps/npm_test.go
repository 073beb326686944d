package deps

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/deps/registrytest"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// npmEnv is the environment of the tests' npm commands, or a skip without npm: a HOME of the
// test's own.
func npmEnv(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: install Node.js with npm (https://nodejs.org) to test the npm driver")
	}
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
}

// npmRegistry serves a 1.0.0, which depends on b ^1.0.0 and exports "a+" and b's export; b 1.0.0
// and 1.1.0; @s/c 2.0.0; and hooked 1.0.0, whose install scripts would write the file returned.
func npmRegistry(t *testing.T) (*registrytest.NPMRegistry, string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "hooked-script-ran")
	write := "node -e \"require('fs').writeFileSync('" + marker + "', 'ran')\""
	return registrytest.NPM(t,
		registrytest.NPMPackage{Name: "a", Version: "1.0.0", Dependencies: map[string]string{"b": "^1.0.0"},
			Files: map[string]string{"index.js": "module.exports = 'a+' + require('b');\n"}},
		registrytest.NPMPackage{Name: "b", Version: "1.0.0"},
		registrytest.NPMPackage{Name: "b", Version: "1.1.0"},
		registrytest.NPMPackage{Name: "@s/c", Version: "2.0.0"},
		registrytest.NPMPackage{Name: "hooked", Version: "1.0.0",
			Scripts: map[string]string{"preinstall": write, "install": write, "postinstall": write}},
	), marker
}

// npmStep runs the step on root with the registry at reg, logging to a directory it returns.
func npmStep(t *testing.T, root, reg, cache string, sb *sandbox.Policy, env []string) (Report, string, error) {
	t.Helper()
	dir := t.TempDir()
	rep, err := Step(context.Background(), Spec{
		Root: root, Opts: Options{Registries: map[Ecosystem]string{NPM: reg}, Cache: cache},
		Sandbox: sb, Env: env, Dir: dir,
	})
	return rep, dir, err
}

func npmOutcome(t *testing.T, rep Report) Outcome {
	t.Helper()
	for _, o := range rep.Outcomes {
		if o.Ecosystem == NPM {
			return o
		}
	}
	t.Fatalf("no npm outcome in %+v", rep.Outcomes)
	return Outcome{}
}

var loopbackURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)

// checkNPMLock checks that the lockfiles npm wrote name the tarballs want (paths under reg's root)
// with integrities, and nothing on 127.0.0.1 but reg (no gateway).
func checkNPMLock(t *testing.T, root string, reg *registrytest.NPMRegistry, want ...string) {
	t.Helper()
	for _, name := range []string{"package-lock.json", npmHiddenLock} {
		lock, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(lock), `"resolved": "`+reg.URL+w+`",
      "integrity": "sha512-`) {
				t.Errorf("%s lacks %s with an integrity:\n%s", name, reg.URL+w, lock)
			}
		}
		for _, u := range loopbackURL.FindAllString(string(lock), -1) {
			if u != reg.URL {
				t.Errorf("%s names %s, not the registry %s", name, u, reg.URL)
			}
		}
	}
}

// checkNPMLog checks that deps.jsonl in dir has a complete line for each request the registry
// received from the request before on, at least min of them.
func checkNPMLog(t *testing.T, dir string, reg *registrytest.NPMRegistry, before, min int) {
	t.Helper()
	logged := readLog(t, dir)
	got := reg.Requests()[before:]
	if len(logged) != len(got) || len(got) < min {
		t.Errorf("deps.jsonl has %d lines, the registry received %d requests (want %d at least): %v", len(logged), len(got), min, got)
	}
	sha := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, r := range logged {
		if r.Method != "GET" || !strings.HasPrefix(r.URL, reg.URL) || r.Status != 200 || r.Bytes <= 0 || !sha.MatchString(r.SHA256) || r.Decision != Allowed {
			t.Errorf("deps.jsonl line %+v: want an allowed GET of the registry, with status, size and hash", r)
		}
	}
}

// TestNPMStepInstallsThenRunsOffline installs a fresh project's dependency with its own, without
// running the project's install scripts; skips a second step; installs again from the lockfile
// and the cache once package.json names one more; and runs node and npm offline on the result.
func TestNPMStepInstallsThenRunsOffline(t *testing.T) {
	env := npmEnv(t)
	reg, _ := npmRegistry(t)
	marker := filepath.Join(t.TempDir(), "project-script-ran")
	write := strconv.Quote("node -e \"require('fs').writeFileSync('" + marker + "', 'ran')\"")
	manifest := func(deps string) map[string]string {
		return map[string]string{"package.json": `{"name": "app", "version": "1.0.0", "dependencies": {` + deps + `},
  "scripts": {"preinstall": ` + write + `, "postinstall": ` + write + `, "prepare": ` + write + `}}`}
	}
	root := workTree(t, manifest(`"a": "^1.0.0"`))
	cache := t.TempDir()
	rep, dir, err := npmStep(t, root, reg.URL, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	out := npmOutcome(t, rep)
	t.Logf("cold install: %d ms", out.DurationMS)
	if out.Skipped || out.Packages != 2 || out.Refused != 0 || !slices.Equal(out.Lockfiles, []string{"package-lock.json"}) || !slices.Equal(rep.Lockfiles, out.Lockfiles) {
		t.Errorf("outcome %+v, report lockfiles %v: want 2 packages installed, nothing refused, package-lock.json written", out, rep.Lockfiles)
	}
	checkNPMLock(t, root, reg, "a/-/a-1.0.0.tgz", "b/-/b-1.1.0.tgz")
	checkNPMLog(t, dir, reg, 0, 4)

	n := len(reg.Requests())
	rep, _, err = npmStep(t, root, reg.URL, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if out := npmOutcome(t, rep); !out.Skipped {
		t.Errorf("second step %+v: want it skipped", out)
	} else {
		t.Logf("skipped step: %d ms", out.DurationMS)
	}
	if got := reg.Requests(); len(got) != n {
		t.Errorf("the skipped step made requests: %v", got[n:])
	}

	// The lockfile the first step wrote stays, naming the registry: the step points it at the
	// gateway for npm, and back.
	if err := os.WriteFile(filepath.Join(root, "package.json"), []byte(manifest(`"a": "^1.0.0", "@s/c": "2.0.0"`)["package.json"]), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, dir, err = npmStep(t, root, reg.URL, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	out = npmOutcome(t, rep)
	t.Logf("install of one more package, the others from the cache: %d ms", out.DurationMS)
	if out.Skipped || out.Packages != 3 {
		t.Errorf("third step %+v: want 3 packages installed", out)
	}
	checkNPMLock(t, root, reg, "a/-/a-1.0.0.tgz", "b/-/b-1.1.0.tgz", "@s/c/-/c-2.0.0.tgz")
	checkNPMLog(t, dir, reg, n, 2)
	if got := reg.Requests()[n:]; slices.Contains(got, "GET /a/-/a-1.0.0.tgz") {
		t.Errorf("a's tarball was fetched again, not taken from the cache: %v", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the project's own install script ran")
	}

	reg.Close()
	for _, argv := range [][]string{
		{"node", "-e", "console.log(require('a') + ' ' + require('@s/c'))"},
		{"npm", "ls", "--all"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = root
		cmd.Env = append(slices.Clone(env), rep.Env...)
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("offline %v: %v\n%s", argv, err, got)
		}
		if argv[0] == "node" && strings.TrimSpace(string(got)) != "a+b@1.1.0 @s/c@2.0.0" {
			t.Errorf("offline %v printed %q", argv, got)
		}
	}
}

// npmLogs are the npm commands' logs of a step's directory, by name.
func npmLogs(t *testing.T, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "logs", "deps_npm_*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		logs[i] = filepath.Base(logs[i])
	}
	return logs
}

// TestNPMStepReinstallsResolvedLock reinstalls, after a rollback removed node_modules, with npm ci
// alone (the lock-only run would only cost an npm start: the lockfile is the one the step wrote
// from this package.json), from the cache with the registry gone; and runs the lock-only run
// again once package.json changed, or in another dependency cache.
func TestNPMStepReinstallsResolvedLock(t *testing.T) {
	env := npmEnv(t)
	reg, _ := npmRegistry(t)
	root, cache := workTree(t, map[string]string{"package.json": `{"name": "app", "version": "1.0.0", "dependencies": {"a": "^1.0.0"}}`}), t.TempDir()
	if _, dir, err := npmStep(t, root, reg.URL, cache, nil, env); err != nil {
		t.Fatal(err)
	} else if logs := npmLogs(t, dir); len(logs) != 2 {
		t.Fatalf("first step ran %v: want the lock-only run and npm ci", logs)
	}
	lock, err := os.ReadFile(filepath.Join(root, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	reg.Close()

	// What a rollback of an attempt that installed leaves: the lockfile, no node_modules.
	if err := os.RemoveAll(filepath.Join(root, "node_modules")); err != nil {
		t.Fatal(err)
	}
	rep, dir, err := npmStep(t, root, reg.URL, cache, nil, env)
	if err != nil {
		t.Fatalf("reinstall with the registry gone: %v", err)
	}
	if out := npmOutcome(t, rep); out.Skipped || out.Packages != 2 || out.Requests != 0 || len(rep.Lockfiles) != 0 {
		t.Errorf("reinstall %+v, lockfiles %v: want 2 packages installed, no request, no lockfile changed", out, rep.Lockfiles)
	}
	if logs := npmLogs(t, dir); !slices.Equal(logs, []string{"deps_npm_1.txt"}) {
		t.Errorf("reinstall ran %v: want npm ci alone", logs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "deps_npm_1.txt")); err != nil || !strings.Contains(string(b), "added 2 packages") {
		t.Errorf("npm ci's log (%v):\n%s", err, b)
	}
	if got, err := os.ReadFile(filepath.Join(root, "package-lock.json")); err != nil || string(got) != string(lock) {
		t.Errorf("package-lock.json changed (%v):\n%s", err, got)
	}
	cmd := exec.Command("node", "-e", "console.log(require('a'))")
	cmd.Dir, cmd.Env = root, append(slices.Clone(env), rep.Env...)
	if got, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "a+b@1.1.0" {
		t.Errorf("node after the reinstall: %v\n%s", err, got)
	}

	// Not what a step left: the lock is resolved again first. A new version in package.json, which
	// npm ci alone would not write into the lockfile; and another dependency cache, which has no
	// record (nor the tarballs: with the registry gone, npm ci then fails).
	writeFiles(t, root, map[string]string{"package.json": `{"name": "app", "version": "1.0.1", "dependencies": {"a": "^1.0.0"}}`})
	if err := os.RemoveAll(filepath.Join(root, "node_modules")); err != nil {
		t.Fatal(err)
	}
	rep, dir, err = npmStep(t, root, reg.URL, cache, nil, env)
	if err != nil {
		t.Fatalf("package.json changed: %v", err)
	}
	if logs := npmLogs(t, dir); len(logs) != 2 || !slices.Equal(rep.Lockfiles, []string{"package-lock.json"}) {
		t.Errorf("package.json changed: step ran %v, changed %v: want the lock-only run, then npm ci, and package-lock.json changed", logs, rep.Lockfiles)
	}
	if got, err := os.ReadFile(filepath.Join(root, "package-lock.json")); err != nil || !strings.Contains(string(got), `"version": "1.0.1"`) {
		t.Errorf("package-lock.json not brought into line with package.json (%v):\n%s", err, got)
	}
	if err := os.RemoveAll(filepath.Join(root, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if _, dir, err = npmStep(t, root, reg.URL, t.TempDir(), nil, env); err == nil {
		t.Error("another cache: a step without the registry nor the tarballs succeeded")
	}
	if logs := npmLogs(t, dir); len(logs) != 2 {
		t.Errorf("another cache: step ran %v: want the lock-only run, then npm ci", logs)
	}
}

// TestNPMStepTakesYarnLock installs the versions a yarn.lock names, through the gateway, and
// leaves it (and pnpm-lock.yaml) as it was, reporting both as not used by their package manager.
func TestNPMStepTakesYarnLock(t *testing.T) {
	env := npmEnv(t)
	reg, _ := npmRegistry(t)
	yarnLock := "# yarn lockfile v1\n\n\na@^1.0.0:\n  version \"1.0.0\"\n  resolved \"" + reg.URL + "a/-/a-1.0.0.tgz\"\n  dependencies:\n    b \"^1.0.0\"\n\n" +
		"b@^1.0.0:\n  version \"1.0.0\"\n  resolved \"" + reg.URL + "b/-/b-1.0.0.tgz#abc\"\n"
	root := workTree(t, map[string]string{
		"package.json":   `{"name": "app", "version": "1.0.0", "dependencies": {"a": "^1.0.0"}}`,
		"yarn.lock":      yarnLock,
		"pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
	})
	rep, dir, err := npmStep(t, root, reg.URL, t.TempDir(), nil, env)
	if err != nil {
		t.Fatal(err)
	}
	checkNPMLock(t, root, reg, "a/-/a-1.0.0.tgz", "b/-/b-1.0.0.tgz")
	checkNPMLog(t, dir, reg, 0, 2)
	if got, err := os.ReadFile(filepath.Join(root, "yarn.lock")); err != nil || string(got) != yarnLock {
		t.Errorf("yarn.lock after the step (%v):\n%s", err, got)
	}
	if out := npmOutcome(t, rep); len(out.Ignored) != 2 || !strings.HasPrefix(out.Ignored[0], "yarn.lock: ") || !strings.HasPrefix(out.Ignored[1], "pnpm-lock.yaml: ") {
		t.Errorf("ignored %q: want yarn.lock and pnpm-lock.yaml reported", out.Ignored)
	}
}

// TestNPMStepIgnoresProjectNpmrc installs through the configured registry whatever a project
// .npmrc says (each line it overrides reported), and runs no dependency's install script though
// the .npmrc asks for them.
func TestNPMStepIgnoresProjectNpmrc(t *testing.T) {
	env := npmEnv(t)
	reg, marker := npmRegistry(t)
	other := registrytest.NPM(t, registrytest.NPMPackage{Name: "a", Version: "1.0.0"}, registrytest.NPMPackage{Name: "@s/c", Version: "2.0.0"})
	root := workTree(t, map[string]string{
		"package.json": `{"name": "app", "version": "1.0.0", "dependencies": {"a": "^1.0.0", "@s/c": "2.0.0", "hooked": "1.0.0"}}`,
		".npmrc": "registry=" + other.URL + "\n@s:registry=" + other.URL + "\nproxy=" + other.URL + "\nhttps-proxy=" + other.URL +
			"\nreplace-registry-host=always\nignore-scripts=false\npackage-lock=false\nsave-exact=true\n",
	})
	rep, _, err := npmStep(t, root, reg.URL, t.TempDir(), nil, env)
	if err != nil {
		t.Fatal(err)
	}
	out := npmOutcome(t, rep)
	for i, key := range []string{"registry", "@s:registry", "proxy", "https-proxy", "replace-registry-host", "ignore-scripts", "package-lock"} {
		want := ".npmrc:" + strconv.Itoa(i+1) + ": " + key + "="
		if !slices.ContainsFunc(out.Ignored, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("ignored %q: want a line starting %q", out.Ignored, want)
		}
	}
	if len(out.Ignored) != 7 {
		t.Errorf("ignored %q: want 7 lines (save-exact is the project's to set)", out.Ignored)
	}
	if got := other.Requests(); len(got) != 0 {
		t.Errorf("the registry the .npmrc names received %v", got)
	}
	if got := reg.Requests(); !slices.Contains(got, "GET /@s%2fc") || !slices.Contains(got, "GET /hooked/-/hooked-1.0.0.tgz") {
		t.Errorf("the configured registry received %v: want @s/c's packument and hooked's tarball", got)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "hooked", "package.json")); err != nil {
		t.Errorf("hooked is not installed: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("hooked's install script ran")
	}
}

// TestNPMStepRefuses refuses, before any request, a dependency from elsewhere than the registry
// and a lockfile entry resolved elsewhere or without an integrity.
func TestNPMStepRefuses(t *testing.T) {
	env := npmEnv(t)
	reg, _ := npmRegistry(t)
	evil := registrytest.NPM(t, registrytest.NPMPackage{Name: "x", Version: "1.0.0"})
	evilTgz := evil.URL + "x/-/x-1.0.0.tgz"
	lock := func(entry string) string {
		return `{"name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": {
  "": {"name": "app", "version": "1.0.0", "dependencies": {"x": "^1.0.0"}},
  "node_modules/x": ` + entry + `}}`
	}
	const xDep = `{"name": "app", "version": "1.0.0", "dependencies": {"x": "^1.0.0"}}`
	for _, tc := range []struct {
		name    string
		files   map[string]string
		refused string // the URL deps.jsonl records as refused, "" for none
		want    string // in the StepError
	}{
		{"tarball URL", map[string]string{"package.json": `{"dependencies": {"x": "` + evilTgz + `"}}`}, evilTgz, "dependency x"},
		{"git", map[string]string{"package.json": `{"dependencies": {"x": "git+https://evil.example/x.git"}}`}, "git+https://evil.example/x.git", "dependency x"},
		{"hosted git shorthand", map[string]string{"package.json": `{"devDependencies": {"x": "someone/x#main"}}`}, "someone/x#main", "dependency x"},
		{"alias of a URL", map[string]string{"package.json": `{"dependencies": {"x": "npm:x@` + evilTgz + `"}}`}, "npm:x@" + evilTgz, "dependency x"},
		{"override", map[string]string{"package.json": `{"dependencies": {"a": "^1.0.0"}, "overrides": {"a": {"b": "` + evilTgz + `"}}}`}, evilTgz, "overrides a b"},
		{"workspace", map[string]string{
			"package.json":            `{"name": "app", "workspaces": ["packages/*"]}`,
			"packages/w/package.json": `{"name": "w", "dependencies": {"x": "` + evilTgz + `"}}`,
		}, evilTgz, "packages/w/package.json: dependency x"},
		{"local directory", map[string]string{
			"package.json":          `{"dependencies": {"v": "file:vendor/v"}}`,
			"vendor/v/package.json": `{"name": "v", "dependencies": {"x": "github:someone/x"}}`,
		}, "github:someone/x", "vendor/v/package.json: dependency x"},
		{"lockfile resolved elsewhere", map[string]string{
			"package.json":      xDep,
			"package-lock.json": lock(`{"version": "1.0.0", "resolved": "` + evilTgz + `", "integrity": "sha512-AAAA"}`),
		}, evilTgz, "node_modules/x is resolved at " + evilTgz},
		{"lockfile without integrity", map[string]string{
			"package.json":      xDep,
			"package-lock.json": lock(`{"version": "1.0.0", "resolved": "` + reg.URL + `x/-/x-1.0.0.tgz"}`),
		}, "", "node_modules/x has no integrity"},
		{"lockfile version 1 git", map[string]string{
			"package.json":      xDep,
			"package-lock.json": `{"lockfileVersion": 1, "dependencies": {"x": {"version": "git+ssh://git@evil.example/x.git#abc", "from": "x@git"}}}`,
		}, "git+ssh://git@evil.example/x.git#abc", "node_modules/x is resolved at git+ssh"},
		{"yarn.lock resolved elsewhere", map[string]string{
			"package.json": xDep,
			"yarn.lock":    "x@^1.0.0:\n  version \"1.0.0\"\n  resolved \"" + evilTgz + "#abc\"\n",
		}, evilTgz + "#abc", "yarn.lock:3: resolved at " + evilTgz},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := workTree(t, tc.files)
			_, dir, err := npmStep(t, root, reg.URL, t.TempDir(), nil, env)
			var se *StepError
			if !errors.As(err, &se) || !errors.Is(err, ErrStep) || se.Ecosystem != NPM || !strings.Contains(se.Message, tc.want) {
				t.Fatalf("step: %v: want a StepError with %q", err, tc.want)
			}
			if lines := strings.Count(se.Message, "\n"); lines > 6 {
				t.Errorf("message of %d lines: %s", lines+1, se.Message)
			}
			logged := readLog(t, dir)
			if tc.refused != "" && !slices.ContainsFunc(logged, func(r Request) bool { return r.Decision == Refused && r.URL == tc.refused }) {
				t.Errorf("deps.jsonl %+v: want %s refused", logged, tc.refused)
			}
			if len(evil.Requests()) != 0 || len(reg.Requests()) != 0 {
				t.Errorf("requests were made: %v %v", evil.Requests(), reg.Requests())
			}
			if _, err := os.Stat(filepath.Join(root, "node_modules")); err == nil {
				t.Error("node_modules was created")
			}
		})
	}
}

// TestNPMStepFailures fails, in a few lines naming the package, on an unknown package, a missing
// version and a tarball whose integrity is not the lockfile's, and leaves the lockfile naming
// the registry.
func TestNPMStepFailures(t *testing.T) {
	env := npmEnv(t)
	reg, _ := npmRegistry(t)
	wrong := `{"name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": {
  "": {"name": "app", "version": "1.0.0", "dependencies": {"b": "1.0.0"}},
  "node_modules/b": {"version": "1.0.0", "resolved": "` + reg.URL + `b/-/b-1.0.0.tgz",
    "integrity": "sha512-WLpYPautbwM0wuvVmoNR+wn10Db+AkBxqSfREkzRPG2DBTzB3Ocn0CZAU1aWzsbsjxk0rH38gJCtJoV244Sb1w=="}}}`
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unknown package", map[string]string{"package.json": `{"dependencies": {"nope": "^1.0.0"}}`}, []string{"404", "nope"}},
		{"missing version", map[string]string{"package.json": `{"dependencies": {"b": "^9.0.0"}}`}, []string{"No matching version", "b@^9.0.0"}},
		{"integrity mismatch", map[string]string{"package.json": `{"name": "app", "version": "1.0.0", "dependencies": {"b": "1.0.0"}}`, "package-lock.json": wrong}, []string{"EINTEGRITY", "b-1.0.0.tgz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := workTree(t, tc.files)
			_, _, err := npmStep(t, root, reg.URL, t.TempDir(), nil, env)
			var se *StepError
			if !errors.As(err, &se) || se.Command == "" {
				t.Fatalf("step: %v: want a StepError of an npm command", err)
			}
			t.Logf("message:\n%s", se.Message)
			for _, want := range tc.want {
				if !strings.Contains(se.Message, want) {
					t.Errorf("message lacks %q:\n%s", want, se.Message)
				}
			}
			if lines := strings.Count(se.Message, "\n"); lines > 12 {
				t.Errorf("message of %d lines:\n%s", lines+1, se.Message)
			}
			for _, u := range loopbackURL.FindAllString(se.Message, -1) {
				if u != reg.URL {
					t.Errorf("message names %s, not the registry:\n%s", u, se.Message)
				}
			}
			if lock, err := os.ReadFile(filepath.Join(root, "package-lock.json")); err == nil {
				for _, u := range loopbackURL.FindAllString(string(lock), -1) {
					if u != reg.URL {
						t.Errorf("package-lock.json names %s after the failure, not the registry:\n%s", u, lock)
					}
				}
			}
		})
	}
}

// TestNPMStepConfined runs the step confined: npm reaches the registry only through the gateway.
func TestNPMStepConfined(t *testing.T) {
	env := npmEnv(t)
	if !sandbox.Detect().UserNamespaces {
		t.Skip("no user namespaces here: the confined step is not tested")
	}
	reg, _ := npmRegistry(t)
	cache := t.TempDir()
	root := workTree(t, map[string]string{"package.json": `{"name": "app", "version": "1.0.0", "dependencies": {"a": "^1.0.0", "@s/c": "2.0.0"}}`})
	req, err := StepRequest(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root}, cache)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := sandbox.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	rep, dir, err := npmStep(t, root, reg.URL, cache, policy, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("confined cold install: %d ms", npmOutcome(t, rep).DurationMS)
	checkNPMLock(t, root, reg, "a/-/a-1.0.0.tgz", "b/-/b-1.1.0.tgz", "@s/c/-/c-2.0.0.tgz")
	checkNPMLog(t, dir, reg, 0, 6)
}

func TestNPMForeign(t *testing.T) {
	for spec, want := range map[string]bool{
		"^1.2.3": false, "1.x || >=2.5.0 <3": false, "latest": false, "": false, "*": false,
		"npm:b@^1.0.0": false, "npm:@s/c": false, "npm:@s/c@2": false,
		"file:../x": false, "./vendor/x": false, "/abs/x.tgz": false, "$a": false,
		"https://evil.example/x.tgz": true, "git+ssh://git@evil.example/x.git": true,
		"github:someone/x": true, "someone/x": true, "someone/x#v1": true, "npm:x@github:someone/x": true,
		"workspace:*": true,
	} {
		if got := npmForeign(spec); got != want {
			t.Errorf("npmForeign(%q) = %t, want %t", spec, got, want)
		}
	}
}

// TestNPMRewrite points a packument's tarball URLs at the gateway, those on another host through
// /_ext/, and maps a lockfile's back.
func TestNPMRewrite(t *testing.T) {
	g, err := NewGateway(NPM, "https://registry.example/npm/", "http://127.0.0.1:7390/", nil, GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"name":"a","dist-tags":{"latest":"1.1.0"},"versions":{` +
		`"1.0.0":{"dist":{"tarball":"https://registry.example/npm/a/-/a-1.0.0.tgz","integrity":"sha512-x"}},` +
		`"1.1.0":{"dist":{"tarball":"https://cdn.example/a-1.1.0.tgz"}}}}`
	got := string(npmRewrite(g, "a", "application/json", []byte(doc)))
	for _, want := range []string{`"tarball":"http://127.0.0.1:7390/a/-/a-1.0.0.tgz"`, `"tarball":"http://127.0.0.1:7390/_ext/https/cdn.example/a-1.1.0.tgz"`, `"integrity":"sha512-x"`, `"latest":"1.1.0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten packument lacks %s:\n%s", want, got)
		}
	}
	if other := `{"error":"not found"}`; string(npmRewrite(g, "x", "application/json", []byte(other))) != other {
		t.Error("a document without versions was rewritten")
	}

	// A lockfile's URLs on the registry's host, under its root or not (GitLab's tarballs), go
	// through the gateway, and come back as they were.
	lock := `{"packages": {"node_modules/a": {"resolved": "https://registry.example/npm/a/-/a-1.0.0.tgz"}, "node_modules/b": {"resolved": "https://registry.example/projects/1/b-1.0.0.tgz"}}}`
	gw := `{"packages": {"node_modules/a": {"resolved": "http://127.0.0.1:7390/a/-/a-1.0.0.tgz"}, "node_modules/b": {"resolved": "http://127.0.0.1:7390/_ext/https/registry.example/projects/1/b-1.0.0.tgz"}}}`
	if got := string(npmMapURLs([]byte(lock), npmOrigin(g.Upstream()), g.GatewayURL)); got != gw {
		t.Errorf("lockfile pointed at the gateway:\n%s\nwant\n%s", got, gw)
	}
	if got := string(npmMapURLs([]byte(gw), g.Base(), g.UpstreamURL)); got != lock {
		t.Errorf("lockfile mapped back:\n%s\nwant\n%s", got, lock)
	}
}
