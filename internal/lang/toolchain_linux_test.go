package lang_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// confine prepares the namespaces mechanism for work with caches, skipping where the machine
// lacks it.
func confine(t *testing.T, work string, caches []sandbox.Cache, env []string) *sandbox.Policy {
	t.Helper()
	if sup := sandbox.Detect(); !sup.UserNamespaces {
		t.Skipf("user namespaces unavailable here (%s): no copy-on-write caches", sup.UserNamespacesError)
	}
	p, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: work, Caches: caches, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Warning(); strings.Contains(w, "views do not work here") {
		t.Skip(w)
	}
	return p
}

// run runs argv in dir under p (nil: unconfined) with only PATH (and HOME) from our environment, and
// returns its exit code and output.
func run(t *testing.T, p *sandbox.Policy, dir string, argv ...string) (int, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "out.txt")
	env := []string{"PATH=" + os.Getenv("PATH")}
	if p == nil { // the sandbox sets HOME
		env = append(env, "HOME="+os.Getenv("HOME"))
	}
	res := proc.Run(context.Background(), proc.Spec{Argv: argv, Dir: dir, Stdout: log, Stderr: log,
		Timeout: 3 * time.Minute, Env: env, Sandbox: p})
	out, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode, string(out)
}

// need skips the test when a toolchain is not installed.
func need(t *testing.T, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed: %v", p, err)
		}
	}
}

// tree is every entry under dir with its mode and content, to compare.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			entry += " " + string(b)
		}
		out[path] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeCache is a stand-in for a user's cache: an entry in 00/ (as Go's build cache names them) and
// one in a read-only directory (as Go's module cache makes them).
func fakeCache(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	for _, sub := range []string{"00", "sealed"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, "entry"), []byte("warm "+sub), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "sealed"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "sealed"), 0o755) })
	return dir
}

// A confined command that writes into each cache, with the toolchain's own commands, leaves the
// user's cache byte for byte as it was. Stand-ins in temporary directories play the user's caches;
// rustup's home is the machine's, only read.
func TestConfinedToolchainsLeaveCachesUnchanged(t *testing.T) {
	crate := func(t *testing.T) string {
		dir := t.TempDir()
		write(t, dir, "Cargo.toml", "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
		write(t, dir, "src/lib.rs", "pub fn one() -> i32 { 1 }\n#[cfg(test)]\nmod tests { #[test] fn one() { assert_eq!(super::one(), 1); } }\n")
		return dir
	}
	cases := []struct {
		name, env string
		programs  []string
		work      func(t *testing.T) string
		script    string // run with sh in the work tree; $CACHE is the cache
	}{
		{"Go build cache", "GOCACHE", []string{"go"}, nil,
			`go clean -cache && test ! -e "$CACHE/00" && echo x > "$CACHE/new"`},
		{"Go module cache", "GOMODCACHE", []string{"go"}, moduleProxy,
			// go mod download from the proxy in the work tree writes the module into the cache;
			// then it is emptied as go clean -modcache would, which stops at once here: the
			// directory itself, the view's mount point, cannot be removed.
			`GOPROXY=file://$PWD/proxy GOSUMDB=off go mod download example.com/dep@v1.0.0 && test -f "$CACHE/example.com/dep@v1.0.0/dep.go" &&
			chmod -R u+w "$CACHE" && rm -rf "$CACHE"/*`},
		{"cargo's home", "CARGO_HOME", []string{"cargo", "rustup"}, crate,
			`rm -rf "$CACHE/00" && mkdir -p "$CACHE/registry/index" && echo x > "$CACHE/registry/index/new" && cargo test --offline -q`},
		{"npm's cache", "npm_config_cache", []string{"npm"}, nil,
			`npm cache verify && test -d "$CACHE/_cacache" && npm cache clean --force && test ! -e "$CACHE/_cacache" && rm -r "$CACHE/00"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			need(t, c.programs...)
			cache := fakeCache(t)
			work := t.TempDir()
			if c.work != nil {
				work = c.work(t)
			}
			caches := []sandbox.Cache{{Dir: cache, Env: c.env}}
			if c.env == "CARGO_HOME" { // the toolchains, read only
				for _, m := range lang.MachineToolchains().Caches {
					if m.Env == "RUSTUP_HOME" {
						caches = append(caches, m)
					}
				}
			}
			p := confine(t, work, caches, nil)
			before := tree(t, cache)
			if code, out := run(t, p, work, "sh", "-c", "CACHE=$"+c.env+"; set -e; "+c.script); code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			if after := tree(t, cache); !maps.Equal(after, before) {
				t.Errorf("the cache changed:\n%v\nwant\n%v", after, before)
			}
		})
	}
}

// moduleProxy is a work tree holding a module proxy (proxy/, for GOPROXY=file://) that serves
// example.com/dep v1.0.0.
func moduleProxy(t *testing.T) string {
	dir := t.TempDir()
	v := filepath.Join(dir, "proxy", "example.com", "dep", "@v")
	write(t, v, "list", "v1.0.0\n")
	write(t, v, "v1.0.0.info", `{"Version": "v1.0.0"}`)
	write(t, v, "v1.0.0.mod", "module example.com/dep\n")
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for name, content := range map[string]string{"go.mod": "module example.com/dep\n", "dep.go": "package dep\n"} {
		w, err := zw.Create("example.com/dep@v1.0.0/" + name)
		if err == nil {
			_, err = w.Write([]byte(content))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, v, "v1.0.0.zip", zipped.String())
	return dir
}

// rustup's cargo works confined with the machine's own homes: a crate without dependencies
// builds and tests offline.
func TestRustupCargoWorksConfined(t *testing.T) {
	need(t, "cargo", "rustup")
	dir := t.TempDir()
	write(t, dir, "Cargo.toml", "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
	write(t, dir, "src/main.rs", "fn main() { println!(\"tiny runs\"); }\n#[test]\nfn works() {}\n")
	tc := lang.MachineToolchains()
	p := confine(t, dir, tc.Caches, tc.Env)
	for _, argv := range [][]string{{"cargo", "build", "--offline"}, {"cargo", "test", "--offline"}, {"cargo", "run", "--offline", "-q"}} {
		if code, out := run(t, p, dir, argv...); code != 0 {
			t.Fatalf("%s: exit %d: %s", strings.Join(argv, " "), code, out)
		}
	}
	if code, out := run(t, p, dir, "cargo", "run", "--offline", "-q"); code != 0 || out != "tiny runs\n" {
		t.Errorf("cargo run: exit %d, output %q", code, out)
	}
}

// A confined `go test` reuses the user's warm build cache, and what one confined command writes
// there (a test result, forged or not) is gone for the next. The machine's build cache is only
// read by the confined commands; the unconfined warm-up writes it, as any go test does.
func TestGoTestReusesTheWarmCacheAndForgetsItsWrites(t *testing.T) {
	need(t, "go")
	dir := t.TempDir()
	// A test no cache has seen: its result is not cached anywhere yet.
	token := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	write(t, dir, "go.mod", "module tiny\n\ngo 1.22\n")
	write(t, dir, "tiny_test.go", "package tiny\n\nimport \"testing\"\n\nfunc TestToken(t *testing.T) { t.Log(\""+token+"\") }\n")
	tc := lang.MachineToolchains()
	p := confine(t, dir, tc.Caches, tc.Env)
	for i := range 2 {
		code, out := run(t, p, dir, "go", "test", ".")
		if code != 0 || !strings.HasPrefix(out, "ok") || strings.Contains(out, "(cached)") {
			t.Fatalf("confined go test %d: exit %d, output %q; want ok, not cached (a confined run's result must not outlive it)", i+1, code, out)
		}
	}
	if code, out := run(t, nil, dir, "go", "test", "."); code != 0 {
		t.Fatalf("unconfined go test: exit %d: %s", code, out)
	}
	if code, out := run(t, p, dir, "go", "test", "."); code != 0 || !strings.Contains(out, "(cached)") {
		t.Errorf("confined go test after the unconfined one: exit %d, output %q; want the cached result", code, out)
	}
}

// A go.mod asking for a newer Go fails at once, without reaching for the network, and the
// failure's explanation says why.
func TestNewerGoIsNotDownloaded(t *testing.T) {
	need(t, "go")
	dir := t.TempDir()
	write(t, dir, "go.mod", "module tiny\n\ngo 1.999\n")
	write(t, dir, "tiny.go", "package tiny\n")
	tc := lang.MachineToolchains()
	p := confine(t, dir, tc.Caches, tc.Env)
	code, out := run(t, p, dir, "go", "build", "./...")
	if code == 0 || !strings.Contains(out, "GOTOOLCHAIN=local)") {
		t.Fatalf("go build: exit %d, output %q; want go.mod's requirement refused with GOTOOLCHAIN=local", code, out)
	}
	if hint := sandbox.Explain(out); !strings.Contains(hint, "toolchains cannot be downloaded in the sandbox") {
		t.Errorf("Explain(%q) = %q, want the toolchain hint", out, hint)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
