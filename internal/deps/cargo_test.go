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

// cargoEnv is the environment of the tests' cargo commands, or a skip without cargo: a HOME of the
// test's own, and rustup's home, which rustup's cargo finds under the real HOME otherwise.
func cargoEnv(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skip("cargo is not installed: install Rust (https://rustup.rs) to test the cargo driver")
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if out, err := exec.Command("rustup", "show", "home").Output(); err == nil {
		env = append(env, "RUSTUP_HOME="+strings.TrimSpace(string(out)))
	}
	return env
}

// cargoRegistry serves alpha 0.1.0, which depends on b 0.1, whose build script writes the file
// marker; c 1.0.0; and bad 1.0.0, whose .crate is not the one the index's checksum is of.
func cargoRegistry(t *testing.T, marker string) *registrytest.CargoRegistry {
	t.Helper()
	return registrytest.Cargo(t,
		registrytest.Crate{Name: "alpha", Version: "0.1.0", Deps: []registrytest.CrateDep{{Name: "b", Req: "0.1"}},
			Files: map[string]string{"src/lib.rs": "pub fn name() -> String {\n    format!(\"alpha+{}\", b::name())\n}\n"}},
		registrytest.Crate{Name: "b", Version: "0.1.0",
			Files: map[string]string{"build.rs": "fn main() {\n    std::fs::write(" + strconv.Quote(marker) + ", \"ran\").unwrap();\n}\n"}},
		registrytest.Crate{Name: "c", Version: "1.0.0"},
		registrytest.Crate{Name: "bad", Version: "1.0.0", Tampered: true},
	)
}

// cargoProject writes a package "app" depending on deps (lines of [dependencies]), with more files.
func cargoProject(t *testing.T, deps string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	all := map[string]string{
		"Cargo.toml":  "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n" + deps,
		"src/main.rs": "fn main() {}\n",
	}
	for name, body := range files {
		all[name] = body
	}
	writeFiles(t, root, all)
	return root
}

// cargoStep runs the step on root with the registry reg, logging to a directory it returns.
func cargoStep(t *testing.T, root string, reg *registrytest.CargoRegistry, cache string, sb *sandbox.Policy, env []string) (Report, string, error) {
	t.Helper()
	dir := t.TempDir()
	rep, err := Step(context.Background(), Spec{
		Root: root, Opts: Options{Registries: map[Ecosystem]string{Cargo: reg.URL}, Cache: cache},
		Sandbox: sb, Env: env, Dir: dir,
	})
	return rep, dir, err
}

func cargoOutcome(t *testing.T, rep Report) Outcome {
	t.Helper()
	for _, o := range rep.Outcomes {
		if o.Ecosystem == Cargo {
			return o
		}
	}
	t.Fatalf("no cargo outcome in %+v", rep.Outcomes)
	return Outcome{}
}

// checkCargoFetched checks a step that fetched alpha and b: Cargo.lock names crates.io with
// checksums, never the gateway or the registry, and deps.jsonl has a complete line per request
// the registry received.
func checkCargoFetched(t *testing.T, root, dir string, reg *registrytest.CargoRegistry) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(root, "Cargo.lock"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "b"} {
		entry := regexp.MustCompile(`name = "` + name + `"\nversion = "0.1.0"\nsource = "registry\+https://github.com/rust-lang/crates.io-index"\nchecksum = "[0-9a-f]{64}"`)
		if !entry.Match(lock) {
			t.Errorf("Cargo.lock has no crates.io entry with a checksum for %s:\n%s", name, lock)
		}
	}
	if s := string(lock); strings.Contains(s, "127.0.0.1") || strings.Contains(s, "factory-gateway") {
		t.Errorf("Cargo.lock names the gateway or the test registry:\n%s", s)
	}
	reqs := readLog(t, dir)
	if got := len(reg.Requests()); len(reqs) != got {
		t.Errorf("deps.jsonl has %d lines, the registry received %d requests: %+v", len(reqs), got, reqs)
	}
	origin := strings.TrimSuffix(reg.URL, "index/")
	var urls []string
	for _, r := range reqs {
		urls = append(urls, r.URL)
		if r.Method != "GET" || r.Status != 200 || r.Bytes <= 0 || len(r.SHA256) != 64 || r.Decision != Allowed || !strings.HasPrefix(r.URL, origin) {
			t.Errorf("deps.jsonl line %+v: want an allowed GET of the registry, 200, with bytes and their sha256", r)
		}
	}
	for _, want := range []string{reg.URL + "config.json", reg.URL + "al/ph/alpha", reg.URL + "1/b", origin + "crates/alpha/0.1.0/download", origin + "crates/b/0.1.0/download"} {
		if !slices.Contains(urls, want) {
			t.Errorf("deps.jsonl has no request for %s: %v", want, urls)
		}
	}
}

// cargoRun runs a cargo command in root, offline, with the step's environment for later commands.
func cargoRun(t *testing.T, root string, env []string, rep Report, args ...string) string {
	t.Helper()
	cmd := exec.Command("cargo", args...)
	cmd.Dir = root
	cmd.Env = append(slices.Clone(env), rep.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cargo %s with %v: %v\n%s", strings.Join(args, " "), rep.Env, err, out)
	}
	return string(out)
}

func TestCargoStepFetchesThenBuildsOffline(t *testing.T) {
	env := cargoEnv(t)
	marker := filepath.Join(t.TempDir(), "b-build-script-ran")
	reg := cargoRegistry(t, marker)
	cache := t.TempDir()
	root := cargoProject(t, "alpha = \"0.1\"\n", map[string]string{"src/main.rs": "fn main() {\n    println!(\"{}\", alpha::name());\n}\n"})

	rep, dir, err := cargoStep(t, root, reg, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	out := cargoOutcome(t, rep)
	t.Logf("cold fetch: %d ms, %d requests, %d bytes", out.DurationMS, out.Requests, out.Bytes)
	if out.Skipped || out.Packages != 2 || out.Refused != 0 || !slices.Equal(out.Lockfiles, []string{"Cargo.lock"}) || !slices.Equal(rep.Lockfiles, []string{"Cargo.lock"}) {
		t.Errorf("outcome %+v, lockfiles %v: want 2 packages installed, Cargo.lock written, nothing refused", out, rep.Lockfiles)
	}
	checkCargoFetched(t, root, dir, reg)
	if _, err := os.Stat(marker); err == nil {
		t.Error("b's build script ran during the step")
	}

	requests := len(reg.Requests())
	rep, _, err = cargoStep(t, root, reg, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if out := cargoOutcome(t, rep); !out.Skipped || len(reg.Requests()) != requests {
		t.Errorf("second step: outcome %+v, %d more requests: want it skipped", out, len(reg.Requests())-requests)
	} else {
		t.Logf("skipped step: %d ms", out.DurationMS)
	}

	// A dependency added to a manifest whose lockfile exists: cargo resolves it into the lockfile.
	manifest := filepath.Join(root, "Cargo.toml")
	b, _ := os.ReadFile(manifest)
	if err := os.WriteFile(manifest, append(b, "c = \"1\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _, err = cargoStep(t, root, reg, cache, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if out := cargoOutcome(t, rep); out.Skipped || out.Packages != 3 {
		t.Errorf("step after adding c: outcome %+v, want 3 packages installed", out)
	}
	if lock, _ := os.ReadFile(filepath.Join(root, "Cargo.lock")); !strings.Contains(string(lock), "name = \"c\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"") {
		t.Errorf("Cargo.lock lacks c from crates.io:\n%s", lock)
	}

	reg.Close()
	if got := cargoRun(t, root, env, rep, "run", "--quiet"); strings.TrimSpace(got) != "alpha+b@0.1.0" {
		t.Errorf("offline cargo run printed %q, want alpha+b@0.1.0", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("b's build script did not run during the offline build: %v", err)
	}
}

// TestCargoStepIgnoresProjectConfiguration: a .cargo/config.toml and a rust-toolchain.toml the
// model could write neither redirect the step nor make it run a program.
func TestCargoStepIgnoresProjectConfiguration(t *testing.T) {
	env := cargoEnv(t)
	reg := cargoRegistry(t, filepath.Join(t.TempDir(), "b-build-script-ran"))
	ran := filepath.Join(t.TempDir(), "ran")
	program := "#!/bin/sh\necho \"$0\" >> " + ran + "\nexit 1\n"
	bin := t.TempDir()
	for _, name := range []string{"wrapper", "toolchain/bin/cargo", "toolchain/bin/rustc"} {
		path := filepath.Join(bin, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(program), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := cargoProject(t, "alpha = \"0.1\"\n", map[string]string{
		".cargo/config.toml": `[source.crates-io]
replace-with = "elsewhere"

[source.elsewhere]
registry = "sparse+http://127.0.0.1:1/"

[http]
proxy = "127.0.0.1:1"

[build]
rustc-wrapper = "` + filepath.Join(bin, "wrapper") + `"
rustc = "` + filepath.Join(bin, "toolchain/bin/rustc") + `"

[env]
RUSTC_BOOTSTRAP = "1"
`,
		"rust-toolchain.toml": "[toolchain]\npath = \"" + filepath.Join(bin, "toolchain") + "\"\n",
	})
	rep, dir, err := cargoStep(t, root, reg, t.TempDir(), nil, env)
	if err != nil {
		t.Fatal(err)
	}
	checkCargoFetched(t, root, dir, reg)
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("the step ran the project's programs:\n%s", b)
	}
	want := []string{
		".cargo/config.toml:2: source.crates-io.replace-with",
		".cargo/config.toml:5: source.elsewhere.registry",
		".cargo/config.toml:8: http.proxy",
	}
	ignored := cargoOutcome(t, rep).Ignored
	if len(ignored) != len(want) {
		t.Errorf("ignored %q, want %d lines", ignored, len(want))
	}
	for i, w := range want {
		if i < len(ignored) && !strings.HasPrefix(ignored[i], w+": ") {
			t.Errorf("ignored[%d] = %q, want it to name %s", i, ignored[i], w)
		}
	}
}

func TestCargoStepRefusesOtherSources(t *testing.T) {
	env := cargoEnv(t)
	for _, tc := range []struct {
		name  string
		deps  string
		files map[string]string
		url   string // refused
		want  string // in the message
	}{
		{name: "git dependency", deps: "evil = { git = \"https://evil.example/evil.git\" }\n",
			url: "https://evil.example/evil.git", want: "Cargo.toml [dependencies] evil: a git dependency"},
		{name: "other registry", deps: "evil = { version = \"1\", registry = \"other\" }\n",
			url: "registry:other", want: "Cargo.toml [dependencies] evil: a dependency on registry other"},
		{name: "registry index", deps: "evil = { version = \"1\", registry-index = \"https://evil.example/index\" }\n",
			url: "https://evil.example/index", want: "Cargo.toml [dependencies] evil: a dependency on the registry at https://evil.example/index"},
		{name: "patch from git", deps: "alpha = \"0.1\"\n\n[patch.crates-io]\nalpha = { git = \"https://evil.example/alpha.git\" }\n",
			url: "https://evil.example/alpha.git", want: "Cargo.toml [patch.crates-io] alpha: a git dependency"},
		{name: "workspace member's target dependency", deps: "m = { path = \"crates/m\" }\n\n[workspace]\nmembers = [\"crates/*\"]\n",
			files: map[string]string{
				"crates/m/Cargo.toml": "[package]\nname = \"m\"\nversion = \"0.1.0\"\n\n[target.'cfg(unix)'.build-dependencies]\nevil = { git = \"https://evil.example/evil.git\", branch = \"main\" }\n",
				"crates/m/src/lib.rs": "",
			},
			url: "https://evil.example/evil.git", want: "crates/m/Cargo.toml [target.cfg(unix).build-dependencies] evil: a git dependency"},
		{name: "lockfile source", deps: "alpha = \"0.1\"\n",
			files: map[string]string{"Cargo.lock": "version = 4\n\n[[package]]\nname = \"alpha\"\nversion = \"0.1.0\"\nsource = \"git+https://evil.example/alpha.git#0123abc\"\n"},
			url:   "https://evil.example/alpha.git#0123abc", want: "Cargo.lock package alpha 0.1.0: from git+https://evil.example/alpha.git#0123abc, not crates.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := cargoRegistry(t, filepath.Join(t.TempDir(), "b-build-script-ran"))
			root := cargoProject(t, tc.deps, tc.files)
			rep, dir, err := cargoStep(t, root, reg, t.TempDir(), nil, env)
			var se *StepError
			if !errors.As(err, &se) || !errors.Is(err, ErrStep) {
				t.Fatalf("step: %v, want a StepError", err)
			}
			t.Logf("%s", se.Message)
			if !strings.Contains(se.Message, tc.want) || strings.Count(se.Message, "\n") > 4 {
				t.Errorf("message %q, want a few lines with %q", se.Message, tc.want)
			}
			if out := cargoOutcome(t, rep); out.Refused != 1 || out.Error == "" {
				t.Errorf("outcome %+v, want one refusal and the error", out)
			}
			reqs := readLog(t, dir)
			if len(reqs) != 1 || reqs[0].URL != tc.url || reqs[0].Decision != Refused || reqs[0].Status != 403 || reqs[0].Reason == "" {
				t.Errorf("deps.jsonl %+v, want one refusal of %s", reqs, tc.url)
			}
			if got := reg.Requests(); len(got) != 0 {
				t.Errorf("the registry received %v, want nothing", got)
			}
		})
	}
}

func TestCargoStepFailures(t *testing.T) {
	env := cargoEnv(t)
	reg := cargoRegistry(t, filepath.Join(t.TempDir(), "b-build-script-ran"))
	for _, tc := range []struct {
		name, deps string
		want       []string // in the message
	}{
		{"unknown crate", "nosuch = \"1\"\n", []string{"no matching package named `nosuch` found"}},
		{"missing version", "alpha = \"9\"\n", []string{"failed to select a version for the requirement `alpha = \"^9\"`", "0.1.0"}},
		{"checksum mismatch", "bad = \"1\"\n", []string{"failed to verify the checksum of `bad v1.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := cargoProject(t, tc.deps, nil)
			_, _, err := cargoStep(t, root, reg, t.TempDir(), nil, env)
			var se *StepError
			if !errors.As(err, &se) || !strings.Contains(se.Command, "cargo fetch") {
				t.Fatalf("step: %v, want a StepError of cargo fetch", err)
			}
			t.Logf("%s", se.Message)
			for _, w := range tc.want {
				if !strings.Contains(se.Message, w) {
					t.Errorf("message %q, want %q in it", se.Message, w)
				}
			}
			if n := strings.Count(se.Message, "\n") + 1; n > 12 || strings.Contains(se.Message, "Updating") {
				t.Errorf("message of %d lines, want cargo's error only:\n%s", n, se.Message)
			}
		})
	}
}

// TestCargoStepConfined runs the step confined, and the offline build confined as verification
// runs, each seeing the dependency cache as its policy shows it.
func TestCargoStepConfined(t *testing.T) {
	env := cargoEnv(t)
	if !sandbox.Detect().UserNamespaces {
		t.Skip("no user namespaces here: the confined step is not tested")
	}
	cache := t.TempDir()
	root := cargoProject(t, "alpha = \"0.1\"\n", map[string]string{"src/main.rs": "fn main() {\n    println!(\"{}\", alpha::name());\n}\n"})
	// b's build script writes where verification may: in the work tree.
	reg := cargoRegistry(t, filepath.Join(root, "b-build-script-ran"))
	// The toolchain as the run shows it: rustup's home and the user's cargo home, for cargo itself.
	var toolchain []sandbox.Cache
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "RUSTUP_HOME="); ok {
			toolchain = append(toolchain, sandbox.Cache{Dir: dir, Env: "RUSTUP_HOME", ReadOnlyFallback: true})
		}
	}
	if cargo, err := exec.LookPath("cargo"); err == nil {
		toolchain = append(toolchain, sandbox.Cache{Dir: filepath.Dir(filepath.Dir(cargo)), Env: "CARGO_HOME", ReadOnlyFallback: true})
	}
	run := sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root, Caches: toolchain}
	req, err := StepRequest(run, cache)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := sandbox.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	rep, dir, err := cargoStep(t, root, reg, cache, policy, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("confined cold fetch: %d ms", cargoOutcome(t, rep).DurationMS)
	checkCargoFetched(t, root, dir, reg)

	reg.Close()
	run.Caches = RunCaches(toolchain, cache)
	verify, err := sandbox.Prepare(run)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cargo", "run", "--quiet")
	cmd.Dir = root
	cmd.Env = append(slices.Clone(env), rep.Env...)
	cleanup, err := verify.Wrap(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	got, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "alpha+b@0.1.0" {
		t.Errorf("confined offline cargo run: %v\n%s", err, got)
	}
}

func TestCargoRewrite(t *testing.T) {
	g, err := NewGateway(Cargo, "https://index.example/", "http://127.0.0.1:7390/", nil, GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, in, want string }{
		{"download host elsewhere, template", "config.json",
			`{"dl":"https://static.example/crates/{crate}/{crate}-{version}.crate?sum={sha256-checksum}","api":"https://index.example/","auth-required":true}`,
			`{"dl":"http://127.0.0.1:7390/_ext/https/static.example/crates/{crate}/{crate}-{version}.crate?sum={sha256-checksum}"}`},
		{"download under the index, prefix markers", "config.json",
			`{"dl":"https://index.example/dl/{prefix}/{lowerprefix}/{crate}","api":"https://index.example/"}`,
			`{"dl":"http://127.0.0.1:7390/dl/{prefix}/{lowerprefix}/{crate}"}`},
		{"download location without markers", "config.json",
			`{"dl":"https://static.example/crates"}`,
			`{"dl":"http://127.0.0.1:7390/_ext/https/static.example/crates"}`},
		{"index file", "al/ph/alpha", `{"name":"alpha","vers":"0.1.0"}`, `{"name":"alpha","vers":"0.1.0"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(cargoRewrite(g, tc.path, "application/json", []byte(tc.in))); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
