package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/deps/registrytest"
	"github.com/factory-harness/factory/internal/llmtest"
)

// The end-to-end tests of the dependency step (docs/dependencies.md): the real factory binary
// builds plans whose work orders declare dependencies in their manifests, against the test
// registries of internal/deps/registrytest, each passed with --registry, in the default sandbox.

// depsEnv is the environment of factory in these tests: the user's HOME (the sandbox finds the
// toolchains' homes from it, rustup's among them), rustup's cargo on PATH, a dependency cache of
// the test's own, and the test Go proxy's modules kept off the checksum database, as a user of a
// private proxy would.
func depsEnv(t *testing.T) []string {
	t.Helper()
	home, _ := os.UserHomeDir()
	return append(gitEnv(t.TempDir()), "HOME="+home, "PATH="+depsPath(), "OPENAI_API_KEY=test-key",
		"FACTORY_DEPS_CACHE="+removableTempDir(t), "GONOSUMDB=example.com", "GOPRIVATE=", "GOFLAGS=")
}

// depsPath is PATH with rustup's default directory first.
func depsPath() string {
	path := os.Getenv("PATH")
	if home, _ := os.UserHomeDir(); home != "" {
		path = filepath.Join(home, ".cargo", "bin") + string(os.PathListSeparator) + path
	}
	return path
}

// removableTempDir is a t.TempDir whose read-only directories (Go's module cache makes its
// directories 0555) are made writable before it is removed.
func removableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { // runs before TempDir's own cleanup
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	return dir
}

// skipWithout skips the test when one of tools is not on PATH, or, for "python3", when it cannot
// make a virtual environment with pip (the Python step's `python3 -m venv` with ensurepip).
func skipWithout(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := lookPathIn(tool, depsPath()); err != nil {
			t.Skipf("%s is not installed (%v): this ecosystem's dependency step cannot run here", tool, err)
		}
		if tool == "python3" {
			if out, err := exec.Command("python3", "-c", "import venv, ensurepip; ensurepip.version()").CombinedOutput(); err != nil {
				t.Skipf("python3 cannot make a virtual environment with pip (%v: %s): the Python dependency step cannot run here", err, out)
			}
		}
	}
}

// depsOrder is one work order of a plan: the files it writes (its allowed files) and its
// acceptance command.
type depsOrder struct {
	writes     map[string]string
	acceptance string
}

// depsPlan writes a plan of orders for a repository holding files, and returns its directory and
// the model's replies by work order: each writes its files over what the orders before wrote.
func depsPlan(t *testing.T, files map[string]string, orders []depsOrder) (string, map[string][]llmtest.Reply) {
	t.Helper()
	content := maps.Clone(files)
	var wos []map[string]any
	replies := map[string][]llmtest.Reply{}
	for i, o := range orders {
		id := fmt.Sprintf("WO-%02d", i+1)
		allowed := slices.Sorted(maps.Keys(o.writes))
		var writes []llmtest.Write
		var post []any
		for _, p := range allowed {
			writes = append(writes, llmtest.Write{Path: p, BaseSHA256: sha(content[p]), Content: o.writes[p]})
			post = append(post, cond("file_exists", p))
			content[p] = o.writes[p]
		}
		wos = append(wos, map[string]any{
			"id": id, "title": "step " + id, "intent": "Write " + strings.Join(allowed, ", ") + ".",
			"preconditions": []any{}, "postconditions": post, "allowed_files": allowed,
			"forbidden": []string{}, "acceptance_commands": []string{o.acceptance}, "context_files": allowed,
		})
		replies[id] = []llmtest.Reply{{Content: llmtest.Proposal(id, writes...)}}
	}
	plan := filepath.Join(t.TempDir(), "plan")
	out := map[string]string{}
	for _, wo := range wos {
		data, _ := json.MarshalIndent(wo, "", "  ")
		out[wo["id"].(string)+".json"] = string(data)
	}
	manifest, _ := json.MarshalIndent(map[string]any{"work_orders": wos}, "", "  ")
	out["WORK_ORDERS_MANIFEST.json"] = string(manifest)
	writeFiles(t, plan, out)
	return plan, replies
}

// depsLang is one ecosystem's build: a registry, a repository, two orders (the first declares a
// dependency and uses it, the second uses it again) and what the step leaves.
type depsLang struct {
	name  string
	tools []string
	eco   deps.Ecosystem
	// registry starts the test registry and returns its URL, as --registry takes it.
	registry func(t *testing.T) string
	repo     map[string]string
	orders   []depsOrder
	// lockfiles are what the step's report names; committed are the files that pin the
	// dependencies in WO-01's commit (the lockfiles, or the requirements as the model wrote them).
	lockfiles, committed []string
	// installed is the tree the step or verification makes in the work tree, never committed;
	// "" for none.
	installed string
	// packages is how many packages the step's report counts (-1: the tool does not say).
	packages int
}

// The test packages: a library "greet" depending on "words", in each registry.
func goModules() []registrytest.GoModule {
	return []registrytest.GoModule{
		{Path: "example.com/greet", Version: "v1.0.0", GoMod: "module example.com/greet\n\ngo 1.21\n\nrequire example.com/words v1.2.0\n",
			Files: map[string]string{"greet.go": "package greet\n\nimport \"example.com/words\"\n\n// Hello greets the world.\nfunc Hello() string { return words.Hello + \", world\" }\n"}},
		{Path: "example.com/words", Version: "v1.2.0",
			Files: map[string]string{"words.go": "package words\n\n// Hello is a word.\nconst Hello = \"hello\"\n"}},
	}
}

func npmPackages(more ...registrytest.NPMPackage) []registrytest.NPMPackage {
	return append([]registrytest.NPMPackage{
		{Name: "tiny-words", Version: "1.2.0", Files: map[string]string{"index.js": "exports.hello = 'hello';\n"}},
		{Name: "tiny-greet", Version: "1.0.0", Dependencies: map[string]string{"tiny-words": "^1.0.0"},
			Files: map[string]string{"index.js": "const { hello } = require('tiny-words');\nexports.greet = () => hello + ', world';\n"}},
	}, more...)
}

const (
	goAppMod   = "module example.com/app\n\ngo 1.21\n"
	goHello    = "package hello\n\nimport \"example.com/greet\"\n\n// Greeting is greet's greeting, exclaimed.\nfunc Greeting() string { return greet.Hello() + \"!\" }\n"
	goHelloTst = "package hello\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif got := Greeting(); got != \"hello, world!\" {\n\t\tt.Fatalf(\"Greeting() = %q\", got)\n\t}\n}\n"
	goShout    = "package shout\n\nimport (\n\t\"strings\"\n\n\t\"example.com/greet\"\n)\n\n// Shout is greet's greeting, loud.\nfunc Shout() string { return strings.ToUpper(greet.Hello()) }\n"
	goShoutTst = "package shout\n\nimport \"testing\"\n\nfunc TestShout(t *testing.T) {\n\tif got := Shout(); got != \"HELLO, WORLD\" {\n\t\tt.Fatalf(\"Shout() = %q\", got)\n\t}\n}\n"

	npmApp      = `{"name": "app", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}}` + "\n"
	npmAppDeps  = `{"name": "app", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}, "dependencies": {"tiny-greet": "^1.0.0"}}` + "\n"
	jsGreeting  = "const { greet } = require('tiny-greet');\n\nexports.greeting = () => greet() + '!';\n"
	jsGreetTst  = "const test = require('node:test');\nconst assert = require('node:assert/strict');\nconst { greeting } = require('../src/greeting.js');\n\ntest('greeting', () => assert.equal(greeting(), 'hello, world!'));\n"
	jsShout     = "const { greet } = require('tiny-greet');\n\nexports.shout = () => greet().toUpperCase();\n"
	jsShoutTest = "const test = require('node:test');\nconst assert = require('node:assert/strict');\nconst { shout } = require('../src/shout.js');\n\ntest('shout', () => assert.equal(shout(), 'HELLO, WORLD'));\n"
)

// depsLangs are the builds of TestDepsBuildPerLanguage, the slowest first (a virtual environment
// with pip takes seconds to make), for the others to run meanwhile.
func depsLangs() []depsLang {
	cargoToml := "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
	rsGreeting := "/// greet's greeting, exclaimed.\npub fn greeting() -> String {\n    tinygreet::greet() + \"!\"\n}\n"
	rsTests := "\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn greeting_works() {\n        assert_eq!(super::greeting(), \"hello, world!\");\n    }\n}\n"
	rsShout := "\n/// greet's greeting, loud.\npub fn shout() -> String {\n    tinygreet::greet().to_uppercase()\n}\n"
	const verifySh = "set -e\npython3 -m unittest discover -s tests -q\n"
	return []depsLang{
		{name: "python pip", tools: []string{"python3"}, eco: deps.PyPI,
			registry: func(t *testing.T) string {
				return registrytest.PyPI(t, registrytest.PyPIOptions{},
					registrytest.PyPIPackage{Name: "tiny-words", Version: "1.2.0", Files: map[string]string{"tiny_words/__init__.py": "HELLO = 'hello'\n"}},
					registrytest.PyPIPackage{Name: "tiny-greet", Version: "1.0.0", Requires: []string{"tiny-words>=1.0"},
						Files: map[string]string{"tiny_greet/__init__.py": "from tiny_words import HELLO\n\n\ndef greet():\n    return HELLO + ', world'\n"}},
				).URL
			},
			repo: map[string]string{"scripts/verify.sh": verifySh, "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"requirements.txt": "tiny-greet==1.0.0\n", ".gitignore": ".venv/\n__pycache__/\n",
					"greeting.py": "import tiny_greet\n\n\ndef greeting():\n    return tiny_greet.greet() + '!'\n", "tests/__init__.py": "",
					"tests/test_greeting.py": "import unittest\n\nimport greeting\n\n\nclass T(unittest.TestCase):\n    def test_greeting(self):\n        self.assertEqual(greeting.greeting(), 'hello, world!')\n"},
					"python3 -m unittest tests.test_greeting -q"},
				{map[string]string{"shout.py": "import tiny_greet\n\n\ndef shout():\n    return tiny_greet.greet().upper()\n",
					"tests/test_shout.py": "import unittest\n\nimport shout\n\n\nclass T(unittest.TestCase):\n    def test_shout(self):\n        self.assertEqual(shout.shout(), 'HELLO, WORLD')\n"},
					"python3 -m unittest tests.test_shout -q"},
			},
			// No Python lockfile: the requirements are committed as the model wrote them.
			committed: []string{"requirements.txt"}, installed: ".venv", packages: 2},
		{name: "go", tools: []string{"go"}, eco: deps.Go,
			registry: func(t *testing.T) string { return registrytest.NewGoProxy(t, goModules()...).URL + "/" },
			repo:     map[string]string{"go.mod": goAppMod, "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"go.mod": goAppMod + "\nrequire example.com/greet v1.0.0\n", "hello/hello.go": goHello, "hello/hello_test.go": goHelloTst},
					`go test ./hello -run "^TestGreeting$" -v`},
				{map[string]string{"shout/shout.go": goShout, "shout/shout_test.go": goShoutTst}, `go test ./shout -run "^TestShout$" -v`},
			},
			// go.mod gains the indirect requirement of example.com/words.
			lockfiles: []string{"go.mod", "go.sum"}, committed: []string{"go.mod", "go.sum"}, packages: -1},
		{name: "javascript npm", tools: []string{"node", "npm"}, eco: deps.NPM,
			registry: func(t *testing.T) string { return registrytest.NPM(t, npmPackages()...).URL },
			repo:     map[string]string{"package.json": npmApp, "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"package.json": npmAppDeps, ".gitignore": "node_modules/\n", "src/greeting.js": jsGreeting, "test/greeting.test.js": jsGreetTst},
					"node --test test/greeting.test.js"},
				{map[string]string{"src/shout.js": jsShout, "test/shout.test.js": jsShoutTest}, "node --test test/shout.test.js"},
			},
			lockfiles: []string{"package-lock.json"}, committed: []string{"package-lock.json"}, installed: "node_modules", packages: 2},
		{name: "rust cargo", tools: []string{"cargo"}, eco: deps.Cargo,
			registry: func(t *testing.T) string {
				return registrytest.Cargo(t,
					registrytest.Crate{Name: "tinywords", Version: "1.2.0", Files: map[string]string{"src/lib.rs": "pub const HELLO: &str = \"hello\";\n"}},
					registrytest.Crate{Name: "tinygreet", Version: "1.0.0", Deps: []registrytest.CrateDep{{Name: "tinywords", Req: "1"}},
						Files: map[string]string{"src/lib.rs": "pub fn greet() -> String {\n    format!(\"{}, world\", tinywords::HELLO)\n}\n"}},
				).URL
			},
			repo: map[string]string{"Cargo.toml": cargoToml, "src/lib.rs": "", "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"Cargo.toml": cargoToml + "tinygreet = \"1\"\n", ".gitignore": "/target\n", "src/lib.rs": rsGreeting + rsTests},
					"cargo test --lib greeting_works"},
				{map[string]string{"src/lib.rs": rsGreeting + rsShout + rsTests,
					"tests/shout.rs": "#[test]\nfn shout_works() {\n    assert_eq!(app::shout(), tinygreet::greet().to_uppercase());\n}\n"},
					"cargo test --test shout"},
			},
			lockfiles: []string{"Cargo.lock"}, committed: []string{"Cargo.lock"}, installed: "target", packages: 2},
	}
}

// depsAttempt is what these tests read of an attempt in run_summary.json.
type depsAttempt struct {
	Stage string       `json:"stage"`
	Deps  *deps.Report `json:"deps"`
}

func readAttempts(t *testing.T, runDir string) []depsAttempt {
	t.Helper()
	var s struct {
		Attempts []depsAttempt `json:"attempts"`
	}
	readJSON(t, filepath.Join(runDir, "run_summary.json"), &s)
	return s.Attempts
}

// readDepsLog reads an attempt's deps.jsonl.
func readDepsLog(t *testing.T, path string) []deps.Request {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("deps.jsonl: %v", err)
	}
	var out []deps.Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r deps.Request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("deps.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

var loopbackPort = regexp.MustCompile(`(?:127\.0\.0\.1|localhost):\d+`)

// checkNamesNoGateway checks that a committed file names no address on loopback but the
// registry's (the gateway's, 127.0.0.1:7390 or a port of the run's, would not answer a fresh
// clone), and nothing of the step's own (cargo's replacement source).
func checkNamesNoGateway(t *testing.T, name, content, registry string) {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(registry, "http://"), "https://")
	host, _, _ = strings.Cut(host, "/")
	for _, addr := range loopbackPort.FindAllString(content, -1) {
		if addr != host {
			t.Errorf("%s names %s, not the registry %s:\n%s", name, addr, registry, content)
			break
		}
	}
	if strings.Contains(content, "factory-gateway") || strings.Contains(content, "/_ext/") {
		t.Errorf("%s names the gateway:\n%s", name, content)
	}
}

// TestDepsBuildPerLanguage builds a two-order plan in each ecosystem against its test registry:
// WO-01 declares a dependency (with a dependency of its own) in the manifest and uses it, WO-02
// uses it again. The step installs it through the gateway in WO-01 and is skipped in WO-02 (what
// WO-01 installed is kept: ignored, or in the dependency cache); the lockfile it wrote is in
// WO-01's commit and names the registry, never the gateway; installed trees are never committed.
func TestDepsBuildPerLanguage(t *testing.T) {
	for _, lang := range depsLangs() {
		t.Run(lang.name, func(t *testing.T) {
			t.Parallel()
			skipWithout(t, lang.tools...)
			registry := lang.registry(t)
			repo := newRepo(t, lang.repo)
			base := git(t, repo, "rev-parse", "HEAD")
			orders := lang.orders
			plan, replies := depsPlan(t, lang.repo, orders)
			srv := llmtest.StartRouted(t, newRoutes(replies).route)
			start := time.Now()
			res := runFactory(t, depsEnv(t), "build", "--plan", plan, "--repo", repo, "--out", filepath.Join(t.TempDir(), "out"),
				"--llm-model", "m", "--llm-base-url", srv.URL, "--timeout-seconds", "300", "--max-attempts", "1",
				"--registry", string(lang.eco)+"="+registry, "--json")
			t.Logf("build %s: %.1f s", lang.name, time.Since(start).Seconds())
			if strings.Contains(res.stderr, "unconfined") {
				t.Logf("this machine cannot confine commands; ran unconfined")
			}
			sum := checkBuildPassed(t, res, len(orders))

			commits := strings.Fields(git(t, repo, "log", "--reverse", "--format=%H", base+"..HEAD"))
			if len(commits) != 2 || commits[0] != sum.WorkOrders[0].Commit || commits[1] != sum.WorkOrders[1].Commit {
				t.Fatalf("commits since the base: %v, want WO-01's and WO-02's (%s, %s)", commits, sum.WorkOrders[0].Commit, sum.WorkOrders[1].Commit)
			}
			inFirst := strings.Fields(git(t, repo, "show", "--name-only", "--format=", commits[0]))
			for _, f := range lang.committed {
				if !slices.Contains(inFirst, f) {
					t.Errorf("WO-01's commit does not hold %s: %v", f, inFirst)
					continue
				}
				checkNamesNoGateway(t, f, git(t, repo, "show", "HEAD:"+f), registry)
			}
			switch lang.eco {
			case deps.NPM:
				if lock := git(t, repo, "show", "HEAD:package-lock.json"); !strings.Contains(lock, `"resolved": "`+registry+"tiny-greet/-/tiny-greet-1.0.0.tgz") ||
					!strings.Contains(lock, `"integrity": "sha512-`) {
					t.Errorf("package-lock.json does not resolve tiny-greet at the registry %s with an integrity:\n%s", registry, lock)
				}
			case deps.Go:
				if sums := git(t, repo, "show", "HEAD:go.sum"); !strings.Contains(sums, "example.com/greet v1.0.0 h1:") || !strings.Contains(sums, "example.com/words v1.2.0 h1:") {
					t.Errorf("go.sum lacks the modules' hashes:\n%s", sums)
				}
			case deps.Cargo:
				if lock := git(t, repo, "show", "HEAD:Cargo.lock"); !strings.Contains(lock, "name = \"tinygreet\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = ") {
					t.Errorf("Cargo.lock does not name tinygreet from crates.io (the registry it replaces) with a checksum:\n%s", lock)
				}
			case deps.PyPI:
				if got := git(t, repo, "show", "HEAD:requirements.txt"); got+"\n" != orders[0].writes["requirements.txt"] {
					t.Errorf("requirements.txt at HEAD = %q, want it as the model wrote it", got)
				}
			}
			tracked := strings.Fields(git(t, repo, "ls-tree", "-r", "--name-only", "HEAD"))
			for _, p := range tracked {
				for _, tree := range []string{"node_modules/", ".venv/", "target/"} {
					if strings.HasPrefix(p, tree) {
						t.Errorf("%s is committed", p)
					}
				}
			}
			if lang.installed != "" && !exists(filepath.Join(repo, lang.installed)) {
				t.Errorf("%s is not in the work tree after the build", lang.installed)
			}
			if st := git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Errorf("work tree not clean after the build:\n%s", st)
			}

			// WO-01: the step installed, through the gateway, GETs and HEADs only, all allowed.
			first := readAttempts(t, sum.WorkOrders[0].RunDir)
			log := readDepsLog(t, filepath.Join(sum.WorkOrders[0].RunDir, "attempt_1", "deps.jsonl"))
			if len(log) == 0 {
				t.Fatalf("WO-01's deps.jsonl is empty")
			}
			for _, r := range log {
				if r.Method != http.MethodGet && r.Method != http.MethodHead || r.Decision != deps.Allowed || r.URL == "" {
					t.Errorf("deps.jsonl line %+v: want an allowed GET or HEAD", r)
				}
			}
			if len(first) != 1 || first[0].Deps == nil || len(first[0].Deps.Outcomes) != 1 {
				t.Fatalf("WO-01's attempts: %+v, want one whose deps report has one ecosystem", first)
			}
			out := first[0].Deps.Outcomes[0]
			if out.Ecosystem != lang.eco || out.Skipped || out.Error != "" || out.Requests != len(log) || out.Refused != 0 || out.Bytes <= 0 ||
				out.Packages != lang.packages || !slices.Equal(out.Lockfiles, lang.lockfiles) {
				t.Errorf("WO-01's deps report %+v: want %s installed (%d packages, lockfiles %v) with %d requests, none refused",
					out, lang.eco, lang.packages, lang.lockfiles, len(log))
			}

			// WO-02: nothing changed the manifests: skipped, no request, what WO-01 installed (in the
			// dependency cache, or in the work tree, ignored) kept.
			second := readAttempts(t, sum.WorkOrders[1].RunDir)
			if len(second) != 1 || second[0].Deps == nil || len(second[0].Deps.Outcomes) != 1 {
				t.Fatalf("WO-02's attempts: %+v, want one with a deps report", second)
			}
			if again := second[0].Deps.Outcomes[0]; !again.Skipped {
				t.Errorf("WO-02's deps report %+v, want the step skipped (what WO-01 installed kept)", again)
			} else if exists(filepath.Join(sum.WorkOrders[1].RunDir, "attempt_1", "deps.jsonl")) {
				t.Errorf("WO-02's skipped step wrote deps.jsonl")
			}
		})
	}
}

// checkBuildPassed decodes a build's --json summary and checks that its n orders passed.
func checkBuildPassed(t *testing.T, res runOut, n int) builder.Summary {
	t.Helper()
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatalf("exit %d: %v\n%s", res.code, err, res.stderr)
	}
	if res.code != ExitPass || sum.Verdict != builder.VerdictPass || len(sum.WorkOrders) != n {
		var brief struct {
			Stage   string `json:"stage"`
			Command string `json:"command"`
			Excerpt string `json:"primary_error_excerpt"`
		}
		for _, wo := range sum.WorkOrders {
			if wo.BriefPath != "" {
				readJSON(t, wo.BriefPath, &brief)
			}
		}
		t.Fatalf("exit %d, verdict %s; %s failed (%s):\n%s\n%s", res.code, sum.Verdict, brief.Command, brief.Stage, brief.Excerpt, res.stderr)
	}
	return sum
}

// TestDepsAcceptanceHasNoNetwork runs a work order whose dependency step reaches the registry
// through the gateway, and whose acceptance command then tries to reach that same registry
// directly: confined, it cannot (the gateway is the step's only, and only for the step).
func TestDepsAcceptanceHasNoNetwork(t *testing.T) {
	skipWithout(t, "go", "bash")
	proxy := registrytest.NewGoProxy(t, goModules()...)
	port := proxy.URL[strings.LastIndex(proxy.URL, ":")+1:]
	repo := newRepo(t, map[string]string{"go.mod": goAppMod + "\nrequire example.com/greet v1.0.0\n", "hello/hello.go": goHello})
	probe := `bash -c 'exec 3<>/dev/tcp/127.0.0.1/` + port + ` && printf "GET /egress-probe HTTP/1.0\r\n\r\n" >&3 && cat <&3'`
	wo := map[string]any{"id": "WO-01", "title": "Greeting test", "intent": "Test hello.Greeting.",
		"allowed_files": []string{"hello/hello_test.go"}, "forbidden": []string{}, "context_files": []string{"hello/hello.go"},
		"acceptance_commands": []string{`go test ./hello -run "^TestGreeting$" -v`, probe}}
	woPath := filepath.Join(t.TempDir(), "wo.json")
	data, _ := json.Marshal(wo)
	writeFiles(t, filepath.Dir(woPath), map[string]string{"wo.json": string(data)})
	srv := llmtest.Start(t, llmtest.Reply{Content: llmtest.Proposal("test", llmtest.Write{Path: "hello/hello_test.go", BaseSHA256: sha(""), Content: goHelloTst})})
	out := filepath.Join(t.TempDir(), "out")
	res := runFactory(t, depsEnv(t), "run", "--repo", repo, "--work-order", woPath, "--out", out, "--llm-model", "m",
		"--llm-base-url", srv.URL, "--timeout-seconds", "120", "--max-attempts", "1", "--sandbox", "auto", "--registry", "go="+proxy.URL)
	runDir := filepath.Dir(summaryPath(t, res))
	attempts := readAttempts(t, runDir)
	if len(attempts) != 1 || attempts[0].Deps == nil || len(attempts[0].Deps.Outcomes) != 1 || attempts[0].Deps.Outcomes[0].Requests == 0 {
		t.Fatalf("attempts %+v: want one whose step fetched through the gateway\n%s", attempts, res.stderr)
	}
	probed := slices.ContainsFunc(proxy.Requests(), func(r string) bool { return strings.Contains(r, "egress-probe") })
	if strings.Contains(res.stderr, "unconfined") {
		t.Logf("this machine cannot confine commands (ran unconfined): the acceptance command's network is not checked (exit %d, probe reached the registry: %t)", res.code, probed)
		return
	}
	if probed {
		t.Errorf("the acceptance command reached the registry on the host's loopback")
	}
	var brief struct {
		Stage   string `json:"stage"`
		Command string `json:"command"`
		Excerpt string `json:"primary_error_excerpt"`
	}
	readJSON(t, filepath.Join(runDir, "attempt_1", "failure_brief.json"), &brief)
	if res.code != ExitFail || brief.Stage != "acceptance_failed" || !strings.Contains(brief.Command, "/dev/tcp/") ||
		!strings.Contains(brief.Excerpt, "/dev/tcp/127.0.0.1/"+port+": ") {
		t.Errorf("exit %d, brief %+v: want the probe to fail to connect\n%s", res.code, brief, res.stderr)
	}
	t.Logf("the probe failed: %s", strings.TrimSpace(brief.Excerpt))
}

// stallingRegistry is a registry in front of another (back), serving its answers with its URLs
// pointed at itself, but for the requests stall matches while stalling: those wait, unanswered,
// until their client goes away.
type stallingRegistry struct {
	URL      string // the registry's root: back's root, on this server
	back     string // back's origin, "http://127.0.0.1:P"
	origin   string
	stall    func(path string) bool
	stalling atomic.Bool
	stalled  chan struct{} // closed when a request first stalls
	once     sync.Once
}

func newStallingRegistry(t *testing.T, back string, stall func(path string) bool) *stallingRegistry {
	t.Helper()
	s := &stallingRegistry{stall: stall, stalled: make(chan struct{})}
	s.stalling.Store(true)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	rest := strings.TrimPrefix(back, "http://")
	host, path, _ := strings.Cut(rest, "/")
	s.back, s.origin = "http://"+host, srv.URL
	s.URL = srv.URL + "/" + path
	return s
}

func (s *stallingRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.stalling.Load() && s.stall(r.URL.Path) {
		s.once.Do(func() { close(s.stalled) })
		<-r.Context().Done()
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, s.back+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Accept", r.Header.Get("Accept"))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body = bytes.ReplaceAll(body, []byte(s.back), []byte(s.origin))
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// TestDepsKilledInStepThenResumes SIGKILLs a build's process group while the dependency step waits
// on a download the registry stalls, then runs the same command again with the registry
// answering: the build recovers (the attempt's files, lockfile and half-installed tree undone),
// passes, and leaves the repository clean but for the ignored installed tree.
//
// go: the kill comes in WO-01's first download (what is half-fetched is in the dependency cache).
// npm: in WO-02, which adds a second package: WO-01's package-lock.json, committed, is pointed at
// the gateway while npm runs, and npm ci has emptied node_modules, which WO-01 installed.
func TestDepsKilledInStepThenResumes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []string
		eco   deps.Ecosystem
		// registry starts the registry behind the stalling one and returns its URL.
		registry func(t *testing.T) string
		stall    string // the path whose download stalls
		repo     map[string]string
		orders   []depsOrder
		lockfile string
	}{
		{name: "go", tools: []string{"go"}, eco: deps.Go,
			registry: func(t *testing.T) string { return registrytest.NewGoProxy(t, goModules()...).URL + "/" },
			stall:    "/example.com/greet/@v/v1.0.0.zip",
			repo:     map[string]string{"go.mod": goAppMod, "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"go.mod": goAppMod + "\nrequire example.com/greet v1.0.0\n", "hello/hello.go": goHello, "hello/hello_test.go": goHelloTst},
					`go test ./hello -run "^TestGreeting$" -v`},
				{map[string]string{"shout/shout.go": goShout, "shout/shout_test.go": goShoutTst}, `go test ./shout -run "^TestShout$" -v`},
			},
			lockfile: "go.sum"},
		{name: "npm", tools: []string{"node", "npm"}, eco: deps.NPM,
			registry: func(t *testing.T) string {
				return registrytest.NPM(t, npmPackages(registrytest.NPMPackage{Name: "tiny-shout", Version: "2.0.0",
					Files: map[string]string{"index.js": "exports.loud = (s) => s.toUpperCase();\n"}})...).URL
			},
			stall: "/tiny-shout/-/tiny-shout-2.0.0.tgz",
			repo:  map[string]string{"package.json": npmApp, "README.md": "app\n"},
			orders: []depsOrder{
				{map[string]string{"package.json": npmAppDeps, ".gitignore": "node_modules/\n", "src/greeting.js": jsGreeting, "test/greeting.test.js": jsGreetTst},
					"node --test test/greeting.test.js"},
				{map[string]string{
					"package.json":       strings.Replace(npmAppDeps, `"tiny-greet": "^1.0.0"`, `"tiny-greet": "^1.0.0", "tiny-shout": "^2.0.0"`, 1),
					"src/shout.js":       "const { greet } = require('tiny-greet');\nconst { loud } = require('tiny-shout');\n\nexports.shout = () => loud(greet());\n",
					"test/shout.test.js": jsShoutTest}, "node --test test/shout.test.js"},
			},
			lockfile: "package-lock.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			skipWithout(t, tc.tools...)
			reg := newStallingRegistry(t, tc.registry(t), func(p string) bool { return p == tc.stall })
			repo := newRepo(t, tc.repo)
			base := git(t, repo, "rev-parse", "HEAD")
			plan, replies := depsPlan(t, tc.repo, tc.orders)
			routes := newRoutes(replies)
			srv := llmtest.StartRouted(t, routes.route)
			env := depsEnv(t)
			args := []string{"build", "--plan", plan, "--repo", repo, "--out", filepath.Join(t.TempDir(), "out"),
				"--llm-model", "m", "--llm-base-url", srv.URL, "--timeout-seconds", "300", "--max-attempts", "1",
				"--registry", string(tc.eco) + "=" + reg.URL, "--json"}

			cmd := factoryCmd(t, env, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own process group, killed whole
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				select {
				case <-done:
				default:
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
				}
			})
			select {
			case <-reg.stalled:
			case <-done:
				t.Fatalf("the build ended before the step's download stalled:\n%s", stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("the step's download did not stall in 2 minutes:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), "deps: "+string(tc.eco)+": installing") {
				t.Errorf("the build's progress does not show the step:\n%s", stderr.String())
			}
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-done
			if !exists(filepath.Join(repo, ".git", "factory", "journal.json")) {
				t.Fatalf("no journal after the kill: the attempt was not cut off\n%s", stderr.String())
			}
			if lock, err := os.ReadFile(filepath.Join(repo, tc.lockfile)); err == nil {
				t.Logf("%s as the kill left it names the gateway: %t", tc.lockfile, loopbackPort.FindString(string(lock)) != "" &&
					!strings.Contains(string(lock), strings.TrimPrefix(reg.origin, "http://")))
			}

			reg.stalling.Store(false)
			res := runFactory(t, env, args...)
			if !strings.Contains(res.stderr, "recovering") {
				t.Errorf("the build did not say it recovered:\n%s", res.stderr)
			}
			sum := checkBuildPassed(t, res, len(tc.orders))
			if commits := strings.Fields(git(t, repo, "log", "--format=%H", base+"..HEAD")); len(commits) != 2 {
				t.Errorf("commits since the base: %v, want 2", commits)
			}
			lock := git(t, repo, "show", "HEAD:"+tc.lockfile)
			checkNamesNoGateway(t, tc.lockfile, lock, reg.URL)
			if tc.eco == deps.NPM && !strings.Contains(lock, `"resolved": "`+reg.URL+"tiny-shout/-/tiny-shout-2.0.0.tgz") {
				t.Errorf("package-lock.json does not resolve tiny-shout at the registry %s:\n%s", reg.URL, lock)
			}
			if st := git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Errorf("work tree not clean after the resumed build:\n%s", st)
			}
			if exists(filepath.Join(repo, ".git", "factory", "journal.json")) {
				t.Errorf("journal left after the resumed build")
			}
			// The resumed order's step installed again, from the registry now answering.
			resumed := sum.WorkOrders[0]
			if tc.eco == deps.NPM {
				resumed = sum.WorkOrders[1]
			}
			attempts := readAttempts(t, resumed.RunDir)
			if len(attempts) == 0 || attempts[0].Deps == nil || len(attempts[0].Deps.Outcomes) != 1 || attempts[0].Deps.Outcomes[0].Skipped {
				t.Errorf("%s after the kill: attempts %+v, want the step to install", resumed.ID, attempts)
			}
		})
	}
}

// TestDepsStampForgottenAfterCutStep cuts off a run's dependency step after npm ci emptied
// node_modules, which an earlier run installed and which holds a file too big for the rollback to
// back up: once the repository is restored, the next run, whose manifests are the earlier run's
// again, must install again rather than trust the stamp the rollback put back.
func TestDepsStampForgottenAfterCutStep(t *testing.T) {
	skipWithout(t, "node", "npm")
	for _, how := range []string{"SIGKILL then factory recover", "interrupt"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			back := registrytest.NPM(t,
				registrytest.NPMPackage{Name: "tiny-greet", Version: "1.0.0", Files: map[string]string{
					// data.txt is over the 64 KiB the baseline backs up of an ignored file.
					"index.js": "const fs = require('fs');\nexports.greet = () => fs.readFileSync(__dirname + '/data.txt', 'utf8').split('\\n')[0];\n",
					"data.txt": strings.Repeat("hello\n", 20000)}},
				registrytest.NPMPackage{Name: "tiny-shout", Version: "2.0.0"})
			reg := newStallingRegistry(t, back.URL, func(p string) bool { return p == "/tiny-shout/-/tiny-shout-2.0.0.tgz" })
			pkg := `{"name": "app", "version": "1.0.0", "private": true, "scripts": {"test": "node --test"}, "dependencies": {"tiny-greet": "^1.0.0"}}` + "\n"
			repo := newRepo(t, map[string]string{"package.json": pkg, ".gitignore": "node_modules/\n"})
			env := depsEnv(t)
			test := "const test = require('node:test');\nconst assert = require('node:assert/strict');\nconst { greet } = require('tiny-greet');\n\ntest('%s', () => assert.equal(greet(), 'hello'));\n"
			run := func(id string, writes map[string]string, accept string) *exec.Cmd {
				var ws []llmtest.Write
				for _, p := range slices.Sorted(maps.Keys(writes)) {
					old, _ := os.ReadFile(filepath.Join(repo, p))
					ws = append(ws, llmtest.Write{Path: p, BaseSHA256: sha(string(old)), Content: writes[p]})
				}
				wo := map[string]any{"id": id, "title": id, "intent": id, "allowed_files": slices.Sorted(maps.Keys(writes)),
					"forbidden": []string{}, "context_files": []string{}, "acceptance_commands": []string{accept}}
				woPath := filepath.Join(t.TempDir(), "wo.json")
				data, _ := json.Marshal(wo)
				writeFiles(t, filepath.Dir(woPath), map[string]string{"wo.json": string(data)})
				srv := llmtest.Start(t, llmtest.Reply{Content: llmtest.Proposal(id, ws...)})
				return factoryCmd(t, env, "run", "--repo", repo, "--work-order", woPath, "--out", filepath.Join(t.TempDir(), "out"),
					"--llm-model", "m", "--llm-base-url", srv.URL, "--timeout-seconds", "120", "--max-attempts", "1", "--registry", "npm="+reg.URL)
			}
			output := func(cmd *exec.Cmd) runOut {
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				_ = cmd.Run()
				return runOut{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
			}

			// WO-01 installs tiny-greet; its result is committed, node_modules kept (ignored).
			if res := output(run("WO-01", map[string]string{"test/a.test.js": fmt.Sprintf(test, "a")}, "node --test test/a.test.js")); res.code != ExitPass {
				t.Fatalf("WO-01: exit %d\n%s", res.code, res.stderr)
			}
			git(t, repo, "add", "-A")
			git(t, repo, "commit", "-q", "-m", "WO-01")

			// WO-02 replaces tiny-greet with tiny-shout, whose download stalls: npm ci has emptied
			// node_modules by then. It is cut off.
			cut := run("WO-02", map[string]string{"package.json": strings.Replace(pkg, `"tiny-greet": "^1.0.0"`, `"tiny-shout": "^2.0.0"`, 1)}, "node --test")
			cut.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var stderr syncBuffer
			cut.Stderr = &stderr
			if err := cut.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cut.Wait(); close(done) }()
			t.Cleanup(func() {
				select {
				case <-done:
				default:
					_ = syscall.Kill(-cut.Process.Pid, syscall.SIGKILL)
					<-done
				}
			})
			select {
			case <-reg.stalled:
			case <-done:
				t.Fatalf("WO-02 ended before its step's download stalled:\n%s", stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("WO-02's download did not stall in 2 minutes:\n%s", stderr.String())
			}
			if how == "interrupt" {
				_ = cut.Process.Signal(os.Interrupt)
				<-done
			} else {
				_ = syscall.Kill(-cut.Process.Pid, syscall.SIGKILL)
				<-done
				if rec := runFactory(t, env, "recover", "--repo", repo); rec.code != ExitPass {
					t.Fatalf("recover: exit %d\n%s", rec.code, rec.stderr)
				}
			}
			reg.stalling.Store(false)
			if st := git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Fatalf("not restored after WO-02 was cut off:\n%s", st)
			}

			// WO-03 needs tiny-greet whole, with the manifests WO-01 installed from.
			res := output(run("WO-03", map[string]string{"test/c.test.js": fmt.Sprintf(test, "c")}, "node --test test/c.test.js"))
			if res.code != ExitPass {
				t.Fatalf("WO-03 after WO-02 was cut off: exit %d\n%s", res.code, res.stderr)
			}
			attempts := readAttempts(t, filepath.Dir(summaryPath(t, res)))
			if len(attempts) != 1 || attempts[0].Deps == nil || len(attempts[0].Deps.Outcomes) != 1 || attempts[0].Deps.Outcomes[0].Skipped {
				t.Errorf("WO-03's attempts %+v: want the step to install again", attempts)
			}
		})
	}
}
