package deps

import (
	"context"
	"encoding/json"
	"errors"
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
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/deps/registrytest"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// needPython skips a test where python3 cannot make a virtual environment with pip.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: install Python 3 with its venv module (Debian: python3-venv) to test the PyPI step")
	}
	if out, err := exec.Command("python3", "-c", "import venv, ensurepip").CombinedOutput(); err != nil {
		t.Skipf("python3 cannot make virtual environments with pip (install its venv module, Debian: python3-venv): %v: %s", err, out)
	}
}

// pypiIndex is the test index: demo-lib, whose import needs its dependency helper, and an sdist-only
// package whose build would write marker.
func pypiIndex(t *testing.T, o registrytest.PyPIOptions, marker string) *registrytest.PyPIRegistry {
	return registrytest.PyPI(t, o,
		registrytest.PyPIPackage{Name: "Demo_Lib", Version: "1.0", Requires: []string{"helper>=1.0"},
			Files: map[string]string{"demo_lib/__init__.py": "import helper\nVALUE = 'demo:' + helper.VERSION\n"}},
		registrytest.PyPIPackage{Name: "helper", Version: "1.0"},
		registrytest.PyPIPackage{Name: "helper", Version: "1.1"},
		registrytest.PyPIPackage{Name: "builder", Version: "1.0",
			SetupPy: "open(" + pyString(marker) + ", 'w').write('built')\nfrom setuptools import setup\nsetup(name='builder', version='1.0')\n"},
	)
}

func pyString(s string) string { b, _ := json.Marshal(s); return string(b) }

// pypiSpec is a step through the test index at url, with a cache and HOME of the test's own.
func pypiSpec(t *testing.T, root, url string) Spec {
	t.Helper()
	home := t.TempDir()
	return Spec{
		Root: root,
		Opts: Options{Registries: map[Ecosystem]string{PyPI: url}, Cache: t.TempDir()},
		Env:  append(os.Environ(), "HOME="+home),
		Dir:  t.TempDir(),
	}
}

// treeFiles are root's files and directories, .venv's contents left out.
func treeFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, filepath.ToSlash(rel))
		if rel == ".venv" {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPyPIStep installs a package with its dependency into .venv through the gateway, from an
// index linking its files on another host (JSON, as pip asks first) or relatively above its root
// (HTML): it logs every request, skips the second step, and the package imports offline.
func TestPyPIStep(t *testing.T) {
	needPython(t)
	for _, tc := range []struct {
		name  string
		opts  registrytest.PyPIOptions
		files map[string]string
	}{
		{"requirements, absolute links", registrytest.PyPIOptions{AbsoluteLinks: true},
			map[string]string{"requirements.txt": "# the library\nDemo-Lib==1.0   # pinned\n"}},
		{"pyproject, relative links", registrytest.PyPIOptions{HTMLOnly: true},
			map[string]string{"pyproject.toml": "[project]\nname = \"app\"\nversion = \"0.1\"\ndependencies = [\"demo_lib>=1\"]\n\n[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := pypiIndex(t, tc.opts, filepath.Join(t.TempDir(), "built"))
			root := workTree(t, tc.files)
			s := pypiSpec(t, root, reg.URL)
			rep, err := Step(context.Background(), s)
			if err != nil {
				t.Fatalf("Step: %v", err)
			}
			if len(rep.Outcomes) != 1 {
				t.Fatalf("outcomes %+v, want one", rep.Outcomes)
			}
			out := rep.Outcomes[0]
			t.Logf("cold install: %d ms, %d requests, %d bytes", out.DurationMS, out.Requests, out.Bytes)
			if out.Ecosystem != PyPI || out.Skipped || out.Packages != 2 || out.Refused != 0 || len(out.Lockfiles) != 0 {
				t.Errorf("outcome %+v: want pypi, not skipped, 2 packages, none refused, no lockfile", out)
			}

			log := readLog(t, s.Dir)
			if len(log) != out.Requests || len(log) == 0 {
				t.Errorf("deps.jsonl has %d lines, the outcome %d requests", len(log), out.Requests)
			}
			var wheels int
			for _, r := range log {
				if r.Decision != Allowed || r.Status != http.StatusOK || r.Method != http.MethodGet || r.Bytes == 0 || len(r.SHA256) != 64 {
					t.Errorf("request %+v: want an allowed GET, 200, with bytes and their sha256", r)
				}
				if strings.Contains(r.URL, "/_ext/") || !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
					t.Errorf("request %+v: want the upstream URL", r)
				}
				if strings.HasSuffix(r.URL, ".whl") {
					wheels++
					if want := strings.TrimSuffix(reg.URL, "simple/") + "packages/"; !strings.HasPrefix(r.URL, want) {
						t.Errorf("wheel %s: want it from %s", r.URL, want)
					}
				}
			}
			if wheels != 2 {
				t.Errorf("%d wheels fetched, want 2: %+v", wheels, log)
			}
			if got, want := treeFiles(t, root), slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(tc.files)), ".venv"))); !cmp.Equal(got, want) {
				t.Errorf("work tree holds %q: the step must add nothing but .venv", got)
			}

			again, err := Step(context.Background(), s)
			if err != nil || len(again.Outcomes) != 1 || !again.Outcomes[0].Skipped {
				t.Fatalf("second Step: %+v, %v: want skipped", again.Outcomes, err)
			}
			t.Logf("skipped step: %d ms", again.Outcomes[0].DurationMS)

			reg.Close()
			cmd := exec.Command("sh", "-c", `python -c 'import demo_lib, os, sys; print(demo_lib.VALUE, sys.prefix == os.environ["VIRTUAL_ENV"])'`)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), again.Env...)
			got, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(got)) != "demo:1.1 True" {
				t.Errorf("offline import with %q: %s, %v: want \"demo:1.1 True\"", again.Env, got, err)
			}
		})
	}
}

// TestPyPIRefusals: a requirement on a host not configured is refused before any request; index
// options in requirements files and pip's own configuration do not move the install off the
// configured registry; a package that only a build (its setup.py) could install is not built.
func TestPyPIRefusals(t *testing.T) {
	needPython(t)
	var mu sync.Mutex
	var foreignHits []string
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		foreignHits = append(foreignHits, r.Method+" "+r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer foreign.Close()
	marker := filepath.Join(t.TempDir(), "built")
	for _, tc := range []struct {
		name    string
		files   map[string]string
		env     []string // more of the step's environment
		wantErr []string // in the StepError's message; none: the step succeeds
		refused string   // a URL deps.jsonl must show refused
		ignored []string // in the outcome's Ignored
	}{
		{
			name:    "URL on another host",
			files:   map[string]string{"requirements.txt": "demo-lib==1.0\nevil @ " + foreign.URL + "/evil-1.0-py3-none-any.whl\n"},
			wantErr: []string{"requirements.txt:2: evil: " + foreign.URL + "/evil-1.0-py3-none-any.whl: not on the configured registry"},
			refused: foreign.URL + "/evil-1.0-py3-none-any.whl",
		},
		{
			name:    "VCS requirement in an included file",
			files:   map[string]string{"requirements.txt": "-r reqs/base.txt\n", "reqs/base.txt": "demo-lib==1.0\ngit+https://example.com/x.git#egg=x\n"},
			wantErr: []string{"reqs/base.txt:2: x: git+https://example.com/x.git#egg=x: a VCS requirement"},
			refused: "git+https://example.com/x.git#egg=x",
		},
		{
			name: "index options and pip configuration",
			files: map[string]string{"requirements.txt": "--index-url " + foreign.URL + "/simple/\n" +
				"--extra-index-url=" + foreign.URL + "/extra/\n-f " + foreign.URL + "/links/\n--trusted-host evil\n--no-binary :all:\n" +
				"-e .[test]\ndemo-lib==1.0 -i " + foreign.URL + "/simple/\n"},
			env: []string{"PIP_INDEX_URL=" + foreign.URL + "/simple/", "PIP_EXTRA_INDEX_URL=" + foreign.URL + "/env/", "PIP_NO_BINARY=:all:"},
			ignored: []string{
				"requirements.txt:1: --index-url " + foreign.URL + "/simple/: ignored",
				"requirements.txt:2: --extra-index-url " + foreign.URL + "/extra/: ignored",
				"requirements.txt:3: --find-links " + foreign.URL + "/links/: ignored",
				"requirements.txt:4: --trusted-host evil: ignored",
				"requirements.txt:5: --no-binary :all:: ignored",
				"requirements.txt:6: .[test]: the project itself is not installed",
			},
		},
		{
			name:    "source distribution only",
			files:   map[string]string{"requirements.txt": "builder==1.0\n"},
			wantErr: []string{"No matching distribution found for builder==1.0", "--deps-allow-sdist"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			foreignHits = nil
			mu.Unlock()
			reg := pypiIndex(t, registrytest.PyPIOptions{AbsoluteLinks: true}, marker)
			root := workTree(t, tc.files)
			s := pypiSpec(t, root, reg.URL)
			s.Env = append(s.Env, tc.env...)
			// The user's pip configuration, which the step does not read either.
			conf := filepath.Join(strings.TrimPrefix(s.Env[slices.IndexFunc(s.Env, func(e string) bool { return strings.HasPrefix(e, "HOME=") })], "HOME="), ".config", "pip", "pip.conf")
			if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(conf, []byte("[global]\nindex-url = "+foreign.URL+"/conf/\n"), 0o644); err != nil {
				t.Fatal(err)
			}

			rep, err := Step(context.Background(), s)
			var se *StepError
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Step: %v", err)
				}
			} else if !errors.As(err, &se) || !errors.Is(err, ErrStep) {
				t.Fatalf("Step: %v: want a StepError", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(se.Message, want) {
					t.Errorf("message %q: want %q in it", se.Message, want)
				}
			}
			if se != nil && strings.Count(se.Message, "\n") > 20 {
				t.Errorf("message of %d lines: want a few", strings.Count(se.Message, "\n")+1)
			}
			if tc.refused != "" {
				if !slices.ContainsFunc(readLog(t, s.Dir), func(r Request) bool {
					return r.Decision == Refused && r.URL == tc.refused && r.Status == http.StatusForbidden
				}) {
					t.Errorf("deps.jsonl: no refusal of %s", tc.refused)
				}
				if n := len(reg.Requests()); n != 0 {
					t.Errorf("the registry got %d requests: a refusal comes before any", n)
				}
			}
			mu.Lock()
			if len(foreignHits) > 0 {
				t.Errorf("the host not configured got %q", foreignHits)
			}
			mu.Unlock()
			if len(rep.Outcomes) != 1 {
				t.Fatalf("outcomes %+v", rep.Outcomes)
			}
			for _, want := range tc.ignored {
				if !slices.ContainsFunc(rep.Outcomes[0].Ignored, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("ignored %q: want one starting %q", rep.Outcomes[0].Ignored, want)
				}
			}
			if len(tc.wantErr) == 0 && !slices.ContainsFunc(reg.Requests(), func(r string) bool { return strings.HasSuffix(r, ".whl") }) {
				t.Errorf("registry requests %q: want the wheels from it", reg.Requests())
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s exists: a package's build code ran", marker)
			}
		})
	}
}

// TestPyPIFailures: what the index does not have, or a file whose hash is not the requirement's,
// fails the step with a short message naming the package.
func TestPyPIFailures(t *testing.T) {
	needPython(t)
	reg := pypiIndex(t, registrytest.PyPIOptions{}, filepath.Join(t.TempDir(), "built"))
	demoWheel, demoSum := reg.Dist("demo-lib", "1.0")
	helperWheel, helperSum := reg.Dist("helper", "1.1")
	if demoWheel == "" || helperWheel == "" {
		t.Fatal("the index has no demo-lib 1.0 or helper 1.1")
	}
	for _, tc := range []struct {
		name, requirements string
		want               []string
	}{
		{"unknown package", "no-such-package\n", []string{"No matching distribution found for no-such-package"}},
		{"missing version", "helper==9.9\n", []string{"from versions: 1.0, 1.1", "No matching distribution found for helper==9.9"}},
		{"hash mismatch", "demo-lib==1.0 --hash=sha256:" + strings.Repeat("0", 64) + "\nhelper==1.1 --hash=sha256:" + helperSum + "\n",
			[]string{"DO NOT MATCH THE HASHES", "demo-lib==1.0", "Got        " + demoSum}},
		{"transitive unhashed", "demo-lib==1.0 --hash=sha256:" + demoSum + "\n", []string{"helper"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pypiSpec(t, workTree(t, map[string]string{"requirements.txt": tc.requirements}), reg.URL)
			_, err := Step(context.Background(), s)
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("Step: %v: want a StepError", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(se.Message, want) {
					t.Errorf("message %q: want %q in it", se.Message, want)
				}
			}
			if n := strings.Count(se.Message, "\n") + 1; n > 20 {
				t.Errorf("message of %d lines: want a few", n)
			}
			registryHost := strings.TrimSuffix(strings.TrimPrefix(reg.URL, "http://"), "/simple/")
			for _, addr := range regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(se.Message, -1) {
				if addr != registryHost || strings.Contains(se.Message, "/_ext/") {
					t.Errorf("message %q names the gateway, not the registry %s", se.Message, registryHost)
				}
			}
		})
	}
}

// TestPyPIConfined installs through the gateway port of a real sandbox, into a pip cache that a
// second install (of a tree whose stamp is forgotten) takes the files from.
func TestPyPIConfined(t *testing.T) {
	needPython(t)
	if sup := sandbox.Detect(); !sup.UserNamespaces {
		t.Skipf("user namespaces are not available here (%s): the confined step cannot be tested", sup.UserNamespacesError)
	}
	reg := pypiIndex(t, registrytest.PyPIOptions{AbsoluteLinks: true}, filepath.Join(t.TempDir(), "built"))
	root := workTree(t, map[string]string{"requirements.txt": "demo-lib\n"})
	s := pypiSpec(t, root, reg.URL)
	req, err := StepRequest(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root}, s.Opts.Cache)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sandbox, err = sandbox.Prepare(req); err != nil {
		t.Fatal(err)
	}
	wheels := func() int {
		return len(slices.DeleteFunc(reg.Requests(), func(r string) bool { return !strings.HasSuffix(r, ".whl") }))
	}
	for i, want := range []int{2, 2} {
		rep, err := Step(context.Background(), s)
		if err != nil {
			t.Fatalf("Step %d: %v", i+1, err)
		}
		if out := rep.Outcomes[0]; out.Skipped || out.Packages != 2 || out.Refused != 0 {
			t.Errorf("outcome %+v: want 2 packages installed, none refused", out)
		}
		if got := wheels(); got != want {
			t.Errorf("after step %d the registry served %d wheels, want %d (the second step takes them from the cache)", i+1, got, want)
		}
		t.Logf("confined install %d: %d ms", i+1, rep.Outcomes[0].DurationMS)
		if err := Forget(root); err != nil {
			t.Fatal(err)
		}
	}
	reg.Close()
	cmd := exec.Command(filepath.Join(root, ".venv", "bin", "python"), "-c", "import demo_lib; print(demo_lib.VALUE)")
	if got, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "demo:1.1" {
		t.Errorf("offline import: %s, %v", got, err)
	}
}

// pypiTestEnv is a stepEnv for root whose gateway, at http://127.0.0.1:7390/, serves the registry
// https://pypi.example/simple/.
func pypiTestEnv(t *testing.T, root string, opts Options) *stepEnv {
	t.Helper()
	log, err := OpenLog(filepath.Join(t.TempDir(), "deps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	opts.Registries = map[Ecosystem]string{PyPI: "https://pypi.example/simple/"}
	g, err := NewGateway(PyPI, opts.Registry(PyPI), "http://127.0.0.1:7390/", log, GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &stepEnv{Root: root, Gateway: g, Cache: t.TempDir(), Opts: opts, HostEnv: func(string) string { return "" }, log: log}
}

// TestPyPIPrepare: the step's copies of the requirements files, line for line, and pip's command.
func TestPyPIPrepare(t *testing.T) {
	const pyproject = `[project]
name = "My.App"
version = "1"
dependencies = ["dep1>=1"]
dynamic = ["version"]
[project.optional-dependencies]
Test = ["tester", "my-app[extra]"]
extra = ["dep2"]
docs = ["sphinx"]
[dependency-groups]
dev = ["devtool", {include-group = "lint"}]
lint = ["linter"]
`
	for _, tc := range []struct {
		name       string
		files      map[string]string
		allowSdist bool
		copies     map[string]string // the copies the step writes, by source
		args       []string          // in pip's command line, each
		noArgs     []string          // not in it
		ignored    []string          // prefixes of the outcome's Ignored, in order
		refused    []string          // in the StepError's message; none: no error
		venvOnly   bool              // nothing to install: the command only makes .venv
	}{
		{
			name: "options, continuations, includes, project",
			files: map[string]string{
				"requirements.txt": "# tools\n--index-url https://user:secret@mirror.example/simple\n--extra-index https://x.example/simple\n" +
					"-ihttps://short.example/\n--pre\ndemo-lib==1.0 \\\n    --hash=sha256:aaa \\\n    --hash=sha256:bbb  # pinned\n" +
					"other>=2 ; python_version >= \"3\"\n-r sub/more.txt\n-c constraints.txt\n",
				"sub/more.txt":    "third @ https://pypi.example/packages/third-1.0-py3-none-any.whl#sha256=ccc\n-e .[docs]\n",
				"constraints.txt": "other<3 # bound\n",
				"pyproject.toml":  pyproject,
			},
			copies: map[string]string{
				"requirements.txt": "\n\n\n\n--pre\ndemo-lib==1.0 --hash=sha256:aaa --hash=sha256:bbb\n\n\nother>=2 ; python_version >= \"3\"\n" +
					"-r ROOT/.venv/factory-pip/sub/more.txt\n-c ROOT/.venv/factory-pip/constraints.txt\n",
				"sub/more.txt":               "third @ http://127.0.0.1:7390/_ext/https/pypi.example/packages/third-1.0-py3-none-any.whl#sha256=ccc\n\n",
				"constraints.txt":            "other<3\n",
				"pyproject-dependencies.txt": "dep1>=1\ntester\ndep2\ndevtool\nlinter\nsphinx\n",
			},
			args:   []string{"--index-url http://127.0.0.1:7390/ ", " --only-binary :all: ", "-r ROOT/.venv/factory-pip/requirements.txt -r ROOT/.venv/factory-pip/pyproject-dependencies.txt"},
			noArgs: []string{"--require-hashes"},
			ignored: []string{
				"requirements.txt:2: --index-url https://user:xxxxx@mirror.example/simple: ignored",
				"requirements.txt:3: --extra-index-url https://x.example/simple: ignored",
				"requirements.txt:4: --index-url https://short.example/: ignored",
				"sub/more.txt:2: .[docs]: the project itself is not installed",
			},
		},
		{
			name: "every requirement hashed",
			files: map[string]string{
				"requirements.txt":     "a==1 --hash=sha256:1\n",
				"requirements-dev.txt": "b==2 --hash sha256:2\n--no-binary :all:\n",
				"pyproject.toml":       pyproject,
			},
			copies: map[string]string{"requirements.txt": "a==1 --hash=sha256:1\n", "requirements-dev.txt": "b==2 --hash=sha256:2\n\n"},
			args:   []string{" --require-hashes -r ROOT/.venv/factory-pip/requirements-dev.txt -r ROOT/.venv/factory-pip/requirements.txt"},
			ignored: []string{
				"requirements-dev.txt:2: --no-binary :all:: ignored: the step installs wheels only",
				"pyproject.toml: its dependencies are not installed",
			},
		},
		{
			name: "source builds allowed",
			files: map[string]string{
				"requirements.txt": "--no-binary :all:\n./libs/local\n-e 'libs/local'\nwheels/w-1.0-py3-none-any.whl\n",
				"libs/local/x.py":  "", "wheels/w-1.0-py3-none-any.whl": "",
			},
			allowSdist: true,
			copies:     map[string]string{"requirements.txt": "--no-binary :all:\n./libs/local\n-e libs/local\nwheels/w-1.0-py3-none-any.whl\n"},
			noArgs:     []string{"--only-binary"},
		},
		{
			name: "local projects without source builds",
			files: map[string]string{
				"requirements.txt": "./libs/local\nwheels/w-1.0-py3-none-any.whl\n",
				"libs/local/x.py":  "", "wheels/w-1.0-py3-none-any.whl": "",
			},
			copies:  map[string]string{"requirements.txt": "\nwheels/w-1.0-py3-none-any.whl\n"},
			args:    []string{" --only-binary :all: "},
			ignored: []string{"requirements.txt:1: ./libs/local: not installed"},
		},
		{
			name:    "line breaks as Python's",
			files:   map[string]string{"requirements.txt": "\ufeff--index-url https://x.example/\r\ndemo-lib\rhelper\u2028other\n"},
			copies:  map[string]string{"requirements.txt": "\ndemo-lib\nhelper\nother\n"},
			ignored: []string{"requirements.txt:1: --index-url https://x.example/: ignored"},
		},
		{
			name:     "nothing to install",
			files:    map[string]string{"requirements.txt": "# none yet\n"},
			copies:   map[string]string{"requirements.txt": "\n"},
			venvOnly: true,
		},
		{
			name:    "pyproject.toml not TOML",
			files:   map[string]string{"pyproject.toml": "[project\ndependencies = 1\n"},
			refused: []string{"pyproject.toml: toml: line 2: expected"},
		},
		{
			name: "refusals",
			files: map[string]string{
				"requirements.txt": "evil @ https://evil.example/e-1.0-py3-none-any.whl\nhttps://evil.example/f-1.0.tar.gz#egg=f\n" +
					"git+https://github.com/x/y#egg=y\n-e git+https://github.com/x/z#egg=z\n-r https://evil.example/r.txt\n-r ../outside.txt\n" +
					"./missing-1.0-py3-none-any.whl\nsame @ https://user:pw@pypi.example/simple/same.whl\nenv==${VERSION}\n",
				"pyproject.toml": "[project]\nname = \"app\"\ndependencies = [\"zed @ http://pypi.example/simple/zed.whl\"]\n",
			},
			refused: []string{
				"requirements.txt:1: evil: https://evil.example/e-1.0-py3-none-any.whl: not on the configured registry https://pypi.example/simple/",
				"requirements.txt:2: f: https://evil.example/f-1.0.tar.gz#egg=f: not on the configured registry",
				"requirements.txt:3: y: git+https://github.com/x/y#egg=y: a VCS requirement",
				"requirements.txt:4: z: git+https://github.com/x/z#egg=z: an editable requirement from a URL",
				"requirements.txt:5: -r/-c https://evil.example/r.txt: https://evil.example/r.txt: a requirements file on the network",
				"requirements.txt:6: ../outside.txt: outside the work tree",
				"requirements.txt:7: ./missing-1.0-py3-none-any.whl: no such file",
				"requirements.txt:8: same: https://user:xxxxx@pypi.example/simple/same.whl: a URL with credentials",
				"requirements.txt:9: env==${VERSION}: ${VERSION}: the step does not take environment variables",
				"pyproject.toml [project] dependencies: zed: http://pypi.example/simple/zed.whl: not on the configured registry",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := workTree(t, tc.files)
			if err := os.MkdirAll(filepath.Join(root, ".venv", "lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			e := pypiTestEnv(t, root, Options{AllowSdist: tc.allowSdist})
			cmds, err := pypiPrepare(e)
			if len(tc.refused) > 0 {
				var se *StepError
				if !errors.As(err, &se) {
					t.Fatalf("prepare: %v: want a StepError", err)
				}
				for _, want := range tc.refused {
					if !strings.Contains(se.Message, want) {
						t.Errorf("message:\n%s\nwant %q in it", se.Message, want)
					}
				}
				if strings.Contains(se.Message, "pw@") {
					t.Errorf("message %q shows a password", se.Message)
				}
				if _, err := os.Stat(filepath.Join(root, ".venv", "lib")); err != nil {
					t.Errorf("a refused step removed .venv: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			if len(cmds) != 1 || !slices.Equal(cmds[0].Argv[:5], []string{"python3", "-I", "-c", pypiScript, filepath.Join(root, ".venv")}) {
				t.Fatalf("commands %q: want python3 making .venv, then running its pip", cmds)
			}
			if _, err := os.Stat(filepath.Join(root, ".venv", "lib")); err == nil {
				t.Error("the old .venv is still there")
			}
			if tc.venvOnly != (len(cmds[0].Argv) == 5) {
				t.Fatalf("command %q: want pip to run: %t", cmds[0].Argv, !tc.venvOnly)
			}
			argv := strings.Join(cmds[0].Argv[5:], " ")
			for _, want := range tc.args {
				if want = strings.ReplaceAll(want, "ROOT", root); !strings.Contains(argv, want) {
					t.Errorf("pip's command %q: want %q in it", argv, want)
				}
			}
			for _, not := range tc.noArgs {
				if strings.Contains(argv, not) {
					t.Errorf("pip's command %q: want no %s", argv, not)
				}
			}
			if !slices.Contains(cmds[0].Env, "PIP_CONFIG_FILE="+os.DevNull) || !tc.venvOnly && !strings.Contains(argv, "--isolated") {
				t.Errorf("pip's command %q with %q: want no configuration read", argv, cmds[0].Env)
			}
			got := map[string]string{}
			_ = filepath.WalkDir(filepath.Join(root, filepath.FromSlash(pypiWork)), func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(path)
					rel, _ := filepath.Rel(filepath.Join(root, filepath.FromSlash(pypiWork)), path)
					got[filepath.ToSlash(rel)] = strings.ReplaceAll(string(b), root, "ROOT")
				}
				return nil
			})
			if diff := cmp.Diff(tc.copies, got); diff != "" {
				t.Errorf("copies (-want +got):\n%s", diff)
			}
			if len(e.ignored) != len(tc.ignored) {
				t.Errorf("ignored %q: want %d", e.ignored, len(tc.ignored))
			}
			for i, want := range tc.ignored {
				if i < len(e.ignored) && !strings.HasPrefix(e.ignored[i], want) {
					t.Errorf("ignored[%d] = %q: want it to start %q", i, e.ignored[i], want)
				}
			}
		})
	}
}

// TestPyPIRewrite: the links of index pages lead back to the gateway, hashes kept.
func TestPyPIRewrite(t *testing.T) {
	const files = "https://files.example/packages/ab/x-1.0-py3-none-any.whl"
	for _, tc := range []struct {
		name, path, contentType, body, want string
		allowed                             []string // gateway paths the gateway now forwards
	}{
		{
			name: "HTML, files host", path: "x/", contentType: "text/html; charset=utf-8",
			body:    `<a href="` + files + `#sha256=abc" data-requires-python="&gt;=3.8">x-1.0</a>`,
			want:    `<a href="http://127.0.0.1:7390/_ext/https/files.example/packages/ab/x-1.0-py3-none-any.whl#sha256=abc" data-requires-python="&gt;=3.8">x-1.0</a>`,
			allowed: []string{"/_ext/https/files.example/packages/ab/x-1.0-py3-none-any.whl"},
		},
		{
			name: "HTML, relative links", path: "x/", contentType: "application/vnd.pypi.simple.v1+html",
			body:    `<a href='../../packages/x.whl#sha256=1'>x</a><a href=x-2.whl>y</a><a HREF="f.whl?a=1&amp;b=2">z</a>`,
			want:    `<a href="http://127.0.0.1:7390/_ext/https/pypi.example/packages/x.whl#sha256=1">x</a><a href="http://127.0.0.1:7390/x/x-2.whl">y</a><a HREF="http://127.0.0.1:7390/x/f.whl?a=1&amp;b=2">z</a>`,
			allowed: []string{"/_ext/https/pypi.example/packages/x.whl"},
		},
		{
			name: "HTML, base", path: "x/", contentType: "text/html",
			body: `<base href="https://mirror.example/base/"><a href="f.whl">f</a>`,
			want: `<base href="http://127.0.0.1:7390/_ext/https/mirror.example/base/"><a href="http://127.0.0.1:7390/_ext/https/mirror.example/base/f.whl">f</a>`,
		},
		{
			name: "JSON", path: "x/", contentType: "application/vnd.pypi.simple.v1+json",
			body:    `{"meta":{"api-version":"1.0"},"name":"x","files":[{"filename":"x.whl","url":"` + files + `","hashes":{"sha256":"1"}},{"filename":"y.whl","url":"y.whl"}]}`,
			want:    `{"files":[{"filename":"x.whl","hashes":{"sha256":"1"},"url":"http://127.0.0.1:7390/_ext/https/files.example/packages/ab/x-1.0-py3-none-any.whl"},{"filename":"y.whl","url":"http://127.0.0.1:7390/x/y.whl"}],"meta":{"api-version":"1.0"},"name":"x"}`,
			allowed: []string{"/_ext/https/files.example/packages/ab/x-1.0-py3-none-any.whl"},
		},
		{
			name: "a file", path: "x/x.whl", contentType: "application/octet-stream",
			body: `<a href="` + files + `">`, want: `<a href="` + files + `">`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := pypiTestEnv(t, t.TempDir(), Options{}).Gateway
			if got := string(pypiRewrite(g, tc.path, tc.contentType, []byte(tc.body))); got != tc.want {
				t.Errorf("rewritten:\n%s\nwant\n%s", got, tc.want)
			}
			for _, p := range tc.allowed {
				if _, refusal := g.target(httptest.NewRequest(http.MethodGet, p, nil)); refusal != "" {
					t.Errorf("%s: refused: %s", p, refusal)
				}
			}
		})
	}
}
