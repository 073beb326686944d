package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// needNamespaces skips where the machine cannot confine with namespaces.
func needNamespaces(t *testing.T) {
	t.Helper()
	if s := sandbox.Detect(); !s.UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", s.UserNamespacesError)
	}
}

// Confined, the command that tampers with .git is simply denied: the attempt
// fails on its exit code, the brief names the denial, nothing changed.
func TestSandboxKeepsGitReadOnly(t *testing.T) {
	needNamespaces(t)
	f := newMessFixture(t)

	res := f.run(t, "--max-attempts", "1", "--sandbox", "required")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "sandbox required: namespaces+landlock (network: loopback only") {
		t.Errorf("progress does not say how commands are confined:\n%s", res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	s := f.summary(t, res)
	want := sandbox.Summary{Mode: sandbox.ModeRequired, Mechanism: sandbox.MechanismNamespaces, Network: "loopback only"}
	if got := s.Sandbox; got.Mode != want.Mode || got.Mechanism != want.Mechanism || got.Network != want.Network ||
		len(got.Writable) == 0 || got.Writable[0] != f.repo {
		t.Errorf("summary sandbox = %+v, want %+v with the repo writable", got, want)
	}
	if got := s.Sandbox.Caches; len(got) == 0 || !strings.HasSuffix(got[0], ", copy-on-write)") || !strings.Contains(res.stderr, "; caches: "+got[0]) {
		t.Errorf("summary caches = %q, want the machine's toolchain caches, copy-on-write, also on the progress line", got)
	}
	b := s.Attempts[0].FailureBrief
	if b == nil || b.Stage != factory.StageAcceptanceFailed ||
		!strings.Contains(b.PrimaryErrorExcerpt, "Read-only file system: '.git/hooks/pre-commit'") ||
		!strings.Contains(b.PrimaryErrorExcerpt, "runs in a sandbox; its output shows a denied operation") {
		t.Errorf("brief = %+v, want acceptance_failed naming the denied write", b)
	}
}

// A sandbox request that cannot be honored is refused before anything is
// modified, as a bad --sandbox value is.
func TestSandboxRefusals(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	for _, args := range [][]string{
		{"--sandbox", "maybe"},
		{"--sandbox", "required", "--sandbox-home", filepath.Join(t.TempDir(), "missing")},
	} {
		res := f.run(t, args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, "sandbox") {
			t.Errorf("%v: exit %d, want %d with a sandbox error:\n%s", args, res.code, ExitUsage, res.stderr)
		}
		sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		if _, err := os.Stat(f.out); !os.IsNotExist(err) {
			t.Errorf("%v: --out was created: %v", args, err)
		}
	}
}

func TestSandboxOffIsStatedLoudly(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	res := f.run(t, "--sandbox", "off")
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "warning: --sandbox off: verification and acceptance commands run with your full privileges") {
		t.Errorf("stderr does not warn about --sandbox off:\n%s", res.stderr)
	}
	if got := f.summary(t, res).Sandbox; got.Mode != sandbox.ModeOff || got.Mechanism != sandbox.MechanismNone || got.Network != "unrestricted" {
		t.Errorf("summary sandbox = %+v", got)
	}
}

// --sandbox-hide keeps a secret from the command: it cannot read it, and the
// attempt fails on that.
func TestSandboxHide(t *testing.T) {
	needNamespaces(t)
	home := t.TempDir()
	key := filepath.Join(home, ".ssh", "id_x")
	writeFiles(t, home, map[string]string{".ssh/id_x": "SECRET KEY\n"})
	wo := workOrder()
	wo["acceptance_commands"] = []string{"cat " + key}
	f := newFixture(t, wo, good(calcV2))
	res := f.run(t, "--max-attempts", "1", "--sandbox", "required", "--sandbox-hide", filepath.Join(home, ".ssh"))
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitFail, res.stderr)
	}
	if acc := f.summary(t, res).Attempts[0].Acceptance; len(acc) != 1 || acc[0].ExitCode == 0 || strings.Contains(acc[0].StdoutTrunc, "SECRET") {
		t.Errorf("acceptance = %+v, want cat to fail without output", acc)
	}
}

// The bundled example passes confined, as a user would run it.
func TestExampleUnderRequiredSandbox(t *testing.T) {
	if s := sandbox.Detect(); !s.UserNamespaces && s.LandlockABI == 0 {
		t.Skipf("this machine cannot confine commands: %s; %s", s.UserNamespacesError, s.LandlockError)
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "example", "run.sh"), "--sandbox", "required")
	cmd.Env = append(os.Environ(), "FACTORY=factory", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example/run.sh --sandbox required: %v\n%s", err, out)
	}
	for _, want := range []string{"sandbox required: ", "verdict: PASS", " M calc.py", "?? tests/test_multiply.py"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSandboxFlagsRequest(t *testing.T) {
	env := Env{Getenv: func(name string) string { return map[string]string{"HOME": "/home/u"}[name] }}
	o := sandboxFlags{mode: "required", home: "/srv/home", hide: []string{"~/.ssh", "/etc/secret"}}
	req, err := o.request(env)
	if err != nil {
		t.Fatal(err)
	}
	if req.Mode != sandbox.ModeRequired || req.Home != "/srv/home" || strings.Join(req.Hide, " ") != "/home/u/.ssh /etc/secret" {
		t.Errorf("request = %+v", req)
	}
}

// --sandbox-cache adds directories to the toolchains' caches found on this machine; it must name
// a directory; with --sandbox off no cache is asked for.
func TestSandboxCacheFlag(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := Env{Getenv: func(name string) string { return map[string]string{"HOME": home}[name] }}
	machine := lang.MachineToolchains()
	cases := []struct {
		name, mode string
		caches     []string
		want       []sandbox.Cache // after the machine's
		wantErr    string
	}{
		{"machine's only", "auto", nil, nil, ""},
		{"~/ expanded", "auto", []string{"~/cache"}, []sandbox.Cache{{Dir: filepath.Join(home, "cache")}}, ""},
		{"absolute", "required", []string{filepath.Join(home, "cache")}, []sandbox.Cache{{Dir: filepath.Join(home, "cache")}}, ""},
		{"missing", "auto", []string{"~/missing"}, nil, "--sandbox-cache ~/missing: not a directory"},
		{"a file", "auto", []string{"/etc/hostname"}, nil, "--sandbox-cache /etc/hostname: not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := sandboxFlags{mode: c.mode, caches: c.caches}
			req, err := o.request(env)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("request: %v, want an error with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(machine.Caches), c.want...)
			if !slices.Equal(req.Caches, want) || !slices.Equal(req.Env, machine.Env) {
				t.Errorf("request caches %+v, env %q; want %+v, %q", req.Caches, req.Env, want, machine.Env)
			}
		})
	}
	o := sandboxFlags{mode: "off", caches: []string{"~/cache"}}
	if req, err := o.request(env); err != nil || req.Caches != nil || req.Env != nil {
		t.Errorf("--sandbox off: %+v, %v; want no caches", req, err)
	}
	cmd := newRootCmd(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: env.Getenv})
	for _, name := range []string{"run", "build", "eval", "mcp", "worker"} {
		sub, _, err := cmd.Find([]string{name})
		if err != nil || sub.Flags().Lookup("sandbox-cache") == nil {
			t.Errorf("factory %s has no --sandbox-cache (%v)", name, err)
		}
	}
}
