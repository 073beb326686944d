package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// fixture is a repository with its git directory, a sibling directory, a stand-in for the user's
// home and an artifact directory, all under one temporary directory.
type fixture struct {
	root, repo, gitDir, sibling, home, out string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{root: root, repo: filepath.Join(root, "repo"), sibling: filepath.Join(root, "sibling"),
		home: filepath.Join(root, "home"), out: filepath.Join(root, "out")}
	f.gitDir = filepath.Join(f.repo, ".git")
	for _, dir := range []string{f.sibling, f.out, filepath.Join(f.home, ".ssh"), filepath.Join(f.gitDir, "hooks")} {
		mustMkdir(t, dir)
	}
	mustWrite(t, filepath.Join(f.gitDir, "config"), "[core]\n")
	mustWrite(t, filepath.Join(f.home, ".ssh", "id_x"), "SECRET KEY\n")
	return f
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// prepare returns a policy for f that must use the namespaces mechanism, skipping where the machine
// lacks it.
func prepare(t *testing.T, f fixture, hide ...string) *sandbox.Policy {
	t.Helper()
	sup := sandbox.Detect()
	if !sup.UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", sup.UserNamespacesError)
	}
	p, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: f.repo,
		ReadOnly: []string{f.gitDir, f.out}, Hide: hide})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mechanism() != sandbox.MechanismNamespaces {
		t.Fatalf("mechanism = %s, want %s", p.Mechanism(), sandbox.MechanismNamespaces)
	}
	return p
}

// sh runs script with sh -c in dir under p and returns the result and its output.
func sh(t *testing.T, p *sandbox.Policy, dir, script string) (proc.Result, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "out.txt")
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"sh", "-c", script}, Dir: dir,
		Stdout: log, Stderr: log, Timeout: time.Minute, Sandbox: p})
	out, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(out)
}

func TestWriteInWorkTreePasses(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	res, out := sh(t, p, f.repo, "mkdir -p pkg && echo hello > pkg/new.txt && mv pkg/new.txt moved.txt && cat moved.txt")
	if res.ExitCode != 0 || out != "hello\n" {
		t.Fatalf("exit %d (%s), output %q; want 0, hello", res.ExitCode, res.Err, out)
	}
	if got, err := os.ReadFile(filepath.Join(f.repo, "moved.txt")); err != nil || string(got) != "hello\n" {
		t.Fatalf("moved.txt on the host = %q, %v", got, err)
	}
}

func TestWritesOutsideAreDenied(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	for _, c := range []struct{ name, path, want string }{
		{"real home", filepath.Join(f.home, "x"), "Read-only file system"},
		{"sibling of the repo", filepath.Join(f.sibling, "x"), "Read-only file system"},
		{"new dir beside the repo", filepath.Join(f.root, "newdir", "x"), "Read-only file system"},
		{".git/config", filepath.Join(f.gitDir, "config"), "Read-only file system"},
		{".git/hooks/pre-commit", filepath.Join(f.gitDir, "hooks", "pre-commit"), "Read-only file system"},
		{"artifact directory", filepath.Join(f.out, "x"), "Read-only file system"},
		{"/etc", "/etc/factory-sandbox-test", "Read-only file system"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(c.path)
			res, out := sh(t, p, f.repo, fmt.Sprintf("mkdir -p %q && echo pwned >> %q", filepath.Dir(c.path), c.path))
			if res.ExitCode == 0 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, output %q; want a failure with %q", res.ExitCode, out, c.want)
			}
			if after, _ := os.ReadFile(c.path); string(after) != string(before) {
				t.Errorf("%s changed on the host: %q", c.path, after)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.root, "newdir")); !os.IsNotExist(err) {
		t.Errorf("a directory beside the repo appeared: %v", err)
	}
}

// Writes to /tmp and $HOME land in a tmpfs private to the command, which vanishes with it: nothing
// is made on the host for it, not even a directory to remove afterwards.
func TestTmpAndHomeArePrivate(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	name := fmt.Sprintf("factory-sandbox-test-%d", time.Now().UnixNano())
	before := sandboxDirs(t)
	res, out := sh(t, p, f.repo, `echo x > /tmp/`+name+` && echo y > "${TMPDIR-/tmp}/`+name+`.2" && echo z > "$HOME/x" && echo "${TMPDIR-unset}" && echo "$HOME" && stat -f -c %T /tmp`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d (%s): %s", res.ExitCode, res.Err, out)
	}
	// TMPDIR replaces the environment's, and is left unset otherwise: /tmp is private.
	tmpdir := "unset"
	if _, ok := os.LookupEnv("TMPDIR"); ok {
		tmpdir = "/tmp"
	}
	lines := strings.Fields(out)
	if len(lines) != 3 || lines[0] != tmpdir || !strings.HasPrefix(lines[1], "/tmp/") || lines[2] != "tmpfs" {
		t.Fatalf("TMPDIR, HOME and the file system of /tmp = %q, want %s, a directory in it and tmpfs", lines, tmpdir)
	}
	if after := sandboxDirs(t); !slices.Equal(before, after) {
		t.Errorf("private directories on the host: %q before the command, %q after", before, after)
	}
	for _, path := range []string{filepath.Join(os.TempDir(), name), filepath.Join(os.TempDir(), name+".2"), lines[1]} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s exists on the host after the command: %v", path, err)
		}
	}
}

// sandboxDirs lists the host's private sandbox directories in the temporary directory.
func sandboxDirs(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(os.TempDir(), "factory-sandbox-*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestLinkedWorktreeGitDirIsReadOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	main, wt := filepath.Join(root, "main"), filepath.Join(root, "wt")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	mustMkdir(t, main)
	git(main, "init", "-q")
	git(main, "commit", "-q", "--allow-empty", "-m", "base")
	git(main, "worktree", "add", "-q", wt)
	gitDir, commonDir := git(wt, "rev-parse", "--absolute-git-dir"), filepath.Join(main, ".git")
	sup := sandbox.Detect()
	if !sup.UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", sup.UserNamespacesError)
	}
	p, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: wt,
		ReadOnly: []string{filepath.Join(wt, ".git"), gitDir, commonDir}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(gitDir, "HEAD"), filepath.Join(gitDir, "new"), filepath.Join(commonDir, "config"),
		filepath.Join(wt, ".git"), filepath.Join(main, "x")} {
		before, _ := os.ReadFile(path)
		res, out := sh(t, p, wt, fmt.Sprintf("echo pwned >> %q", path))
		if res.ExitCode == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("writing %s: exit %d, output %q; want Read-only file system", path, res.ExitCode, out)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("%s changed on the host", path)
		}
	}
	// git itself still reads the repository.
	if res, out := sh(t, p, wt, "git log --oneline"); res.ExitCode != 0 || !strings.Contains(out, "base") {
		t.Errorf("git log in the sandbox: exit %d: %s", res.ExitCode, out)
	}
}

func TestNetworkIsLoopbackOnly(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	f := newFixture(t)
	p := prepare(t, f)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=5); print('connected')", port)
	res, out := sh(t, p, f.repo, "python3 -c \""+connect+"\"")
	if res.ExitCode == 0 || !strings.Contains(out, "Connection refused") {
		t.Errorf("connecting to the host's listener: exit %d, output %q; want Connection refused", res.ExitCode, out)
	}
	res, out = sh(t, p, f.repo, `python3 -c "import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)"`)
	if res.ExitCode == 0 || !strings.Contains(out, "Network is unreachable") {
		t.Errorf("connecting outside: exit %d, output %q; want Network is unreachable", res.ExitCode, out)
	}
	local := "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); " +
		"c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept(); a.sendall(b'ok'); print(c.recv(2).decode())"
	if res, out := sh(t, p, f.repo, "python3 -c \""+local+"\""); res.ExitCode != 0 || out != "ok\n" {
		t.Errorf("a server and client on the sandbox's loopback: exit %d, output %q; want ok", res.ExitCode, out)
	}
}

func TestBackgroundChildIsKilled(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	res, out := sh(t, p, f.repo, "(sleep 1; echo late > late.txt) & echo started")
	if res.ExitCode != 0 || out != "started\n" {
		t.Fatalf("exit %d (%s), output %q", res.ExitCode, res.Err, out)
	}
	time.Sleep(2 * time.Second)
	if _, err := os.Stat(filepath.Join(f.repo, "late.txt")); !os.IsNotExist(err) {
		t.Errorf("the background child outlived the command and wrote late.txt (%v)", err)
	}
}

func TestHiddenPathsAreUnreadable(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.home, ".aws"), "SECRET FILE\n")
	p := prepare(t, f, filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".aws"))
	for _, path := range []string{filepath.Join(f.home, ".ssh", "id_x"), filepath.Join(f.home, ".aws")} {
		// The command runs (the init hid the path and went on), and cat fails.
		res, out := sh(t, p, f.repo, fmt.Sprintf("cat %q || echo unreadable", path))
		if res.ExitCode != 0 || strings.Contains(out, "SECRET") || !strings.Contains(out, "unreadable") {
			t.Errorf("reading %s: exit %d, output %q; want cat to fail inside a command that runs", path, res.ExitCode, out)
		}
	}
	if res, out := sh(t, p, f.repo, fmt.Sprintf("ls -a %q", filepath.Join(f.home, ".ssh"))); strings.Contains(out, "id_x") {
		t.Errorf("listing the hidden directory: exit %d, output %q", res.ExitCode, out)
	}
	// Paths under the host's /tmp are not visible at all inside; hiding matters elsewhere, as in
	// /var/tmp: a file there is covered by an unreadable empty file, a directory by an empty one.
	outside, err := os.MkdirTemp("/var/tmp", "factory-sandbox-hide-")
	if err != nil {
		t.Skipf("no /var/tmp to hide paths in: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	secretFile, secretDir := filepath.Join(outside, "secret.txt"), filepath.Join(outside, "dir")
	if err := os.Mkdir(secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, secretFile, "SECRET FILE\n")
	mustWrite(t, filepath.Join(secretDir, "x"), "SECRET DIR\n")
	p = prepare(t, f, secretFile, secretDir)
	res, out := sh(t, p, f.repo, fmt.Sprintf("cat %q %q || echo unreadable; ls -a %q || true", secretFile, filepath.Join(secretDir, "x"), secretDir))
	if res.ExitCode != 0 || strings.Contains(out, "SECRET") || !strings.Contains(out, "unreadable") {
		t.Errorf("reading hidden paths in %s: exit %d, output %q; want cat to fail inside a command that runs", outside, res.ExitCode, out)
	}
}

// The process started is the command's own: its exit code, its death by a signal, the timeout.
func TestExitStatusSignalsAndTimeout(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	if res, _ := sh(t, p, f.repo, "exit 3"); res.ExitCode != 3 || res.Err != "" {
		t.Errorf("exit 3: got exit %d, %q", res.ExitCode, res.Err)
	}
	if res, _ := sh(t, p, f.repo, "kill -TERM $$"); res.ExitCode != -1 || res.Err != "killed by signal: terminated" {
		t.Errorf("kill -TERM $$: got exit %d, %q", res.ExitCode, res.Err)
	}
	log := filepath.Join(t.TempDir(), "log")
	start := time.Now()
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30"}, Dir: f.repo,
		Stdout: log, Stderr: log, Timeout: 500 * time.Millisecond, Sandbox: p})
	if !res.TimedOut || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: got %+v after %s", res, time.Since(start))
	}
}

func TestMissingProgramFailsAsUnconfined(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"factory-no-such-program"}, Dir: f.repo, Sandbox: p})
	if res.ExitCode != -1 || !strings.Contains(res.Err, "executable file not found") {
		t.Errorf("got exit %d, %q; want the start failure", res.ExitCode, res.Err)
	}
}

// The command runs as the user, not as root in the namespace, with no capabilities left from the init.
func TestCommandRunsAsTheUserWithoutCapabilities(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	res, out := sh(t, p, f.repo, "id -u; id -g; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | tr -s '\t' ' '; grep NoNewPrivs /proc/self/status")
	want := fmt.Sprintf("%d\n%d\nCapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs:\t1\n", os.Getuid(), os.Getgid())
	if res.ExitCode != 0 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", res.ExitCode, out, want)
	}
}

// TestAsUnprivilegedUser reruns the main tests as nobody when they run as root, which user
// namespaces treat differently: the design must hold for the unprivileged users factory serves.
func TestAsUnprivilegedUser(t *testing.T) {
	switch {
	case os.Getenv("FACTORY_SANDBOX_TEST_NOBODY") != "":
		t.Skip("already the rerun as nobody")
	case os.Getuid() != 0:
		t.Skip("already unprivileged: the other tests cover it")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
	}
	if !sandbox.Detect().UserNamespaces {
		t.Skip("user namespaces unavailable here")
	}
	// The test binary, where nobody can run it.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.v", "-test.count=1",
		"-test.run=^(TestWriteInWorkTreePasses|TestWritesOutsideAreDenied|TestTmpAndHomeArePrivate|TestNetworkIsLoopbackOnly|TestHiddenPathsAreUnreadable|TestCommandRunsAsTheUserWithoutCapabilities|TestCachesAreCopyOnWrite)$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "FACTORY_SANDBOX_TEST_NOBODY=1", "HOME=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- SKIP") || strings.Count(string(out), "--- PASS") < 7 {
		t.Fatalf("the rerun as nobody failed (%v):\n%s", err, out)
	}
}

func TestSandboxHomeIsWritableHome(t *testing.T) {
	f := newFixture(t)
	if !sandbox.Detect().UserNamespaces {
		t.Skip("user namespaces unavailable here")
	}
	home := f.home
	mustMkdir(t, home)
	p, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: f.repo, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if res, out := sh(t, p, f.repo, `echo "$HOME" && echo kept > "$HOME/x"`); res.ExitCode != 0 || out != home+"\n" {
		t.Fatalf("exit %d, output %q; want HOME=%s", res.ExitCode, out, home)
	}
	if got, err := os.ReadFile(filepath.Join(home, "x")); err != nil || string(got) != "kept\n" {
		t.Errorf("$HOME/x on the host = %q, %v", got, err)
	}
}

func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		req     sandbox.Request
		wantErr string
	}{
		{"bad mode", sandbox.Request{Mode: "maybe", WorkTree: dir}, `unknown sandbox mode "maybe"`},
		{"missing work tree", sandbox.Request{Mode: sandbox.ModeAuto, WorkTree: filepath.Join(dir, "missing")}, "work tree"},
		{"missing home", sandbox.Request{Mode: sandbox.ModeAuto, WorkTree: dir, Home: filepath.Join(dir, "missing")}, "--sandbox-home"},
		{"relative hide", sandbox.Request{Mode: sandbox.ModeAuto, WorkTree: dir, Hide: []string{".ssh"}}, "not an absolute path"},
		{"off needs nothing", sandbox.Request{Mode: sandbox.ModeOff}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := sandbox.Prepare(c.req)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("Prepare: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("Prepare: %v, want an error with %q", err, c.wantErr)
			case c.wantErr == "" && (p.Confined() || !strings.Contains(p.Warning(), "--sandbox off")):
				t.Errorf("off: confined %v, warning %q", p.Confined(), p.Warning())
			}
		})
	}
}

func TestExplain(t *testing.T) {
	for out, want := range map[string]string{
		"OSError: [Errno 30] Read-only file system: '/etc/x'":                                                        "(EROFS)",
		"OSError: [Errno 101] Network is unreachable":                                                                "(ENETUNREACH)",
		"sh: 1: cannot create /x: Permission denied":                                                                 "(EACCES)",
		"AssertionError: 3 != 4":                                                                                     "",
		"go: go.mod requires go >= 1.99 (running go 1.26.8; GOTOOLCHAIN=local)":                                      "toolchains cannot be downloaded in the sandbox",
		"[6] Could not resolve hostname (Could not resolve host: index.crates.io)":                                   "nothing can be downloaded",
		"npm error request to https://registry.npmjs.org/x failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org": "nothing can be downloaded",
	} {
		got := sandbox.Explain(out)
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("Explain(%q) = %q, want it to contain %q", out, got, want)
		}
	}
}

// A command cannot read the environment of the process that runs it, where provider keys live.
func TestParentEnvironmentIsUnreadable(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	// In a PID namespace with its own /proc our pid names no process; with Landlock alone it does,
	// and reading it is denied.
	res, out := sh(t, p, f.repo, fmt.Sprintf("cat /proc/%d/environ", os.Getpid()))
	if res.ExitCode == 0 || !strings.Contains(out, "Permission denied") && !strings.Contains(out, "No such file") {
		t.Errorf("reading our environment: exit %d, output %q; want Permission denied or No such file", res.ExitCode, out)
	}
	if res, out := sh(t, p, f.repo, fmt.Sprintf("kill -0 %d", os.Getpid())); res.ExitCode == 0 {
		t.Errorf("signalling us: exit %d, output %q; want a failure", res.ExitCode, out)
	}
}

// prepareWith is prepare with the extra request fields of req (PrivatePIDs, HostNetwork,
// ConnectPorts).
func prepareWith(t *testing.T, f fixture, req sandbox.Request) *sandbox.Policy {
	t.Helper()
	if sup := sandbox.Detect(); !sup.UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", sup.UserNamespacesError)
	}
	req.Mode, req.WorkTree, req.ReadOnly = sandbox.ModeRequired, f.repo, append([]string{f.gitDir, f.out}, req.ReadOnly...)
	p, err := sandbox.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With PrivatePIDs a command is PID 1 of its own namespace and sees none of the processes above it.
func TestPrivatePIDs(t *testing.T) {
	f := newFixture(t)
	p := prepareWith(t, f, sandbox.Request{PrivatePIDs: true})
	if got := p.Summary().Processes; got != "private" {
		t.Errorf("Summary().Processes = %q, want private", got)
	}
	res, out := sh(t, p, f.repo, fmt.Sprintf(`echo "pid $$"; ls /proc | grep -c '^[0-9]'; cat /proc/%d/cmdline`, os.Getpid()))
	if res.ExitCode == 0 || !strings.HasPrefix(out, "pid 1\n") || !strings.Contains(out, "No such file or directory") {
		t.Errorf("exit %d, output %q: want pid 1 and our /proc entry missing", res.ExitCode, out)
	}
	if n, _, _ := strings.Cut(strings.TrimPrefix(out, "pid 1\n"), "\n"); n != "2" && n != "3" {
		t.Errorf("the command sees %s processes, want its own 2 or 3 (sh, ls, grep)", n)
	}
	// A timeout still ends the command: PID 1 ignores SIGTERM without a handler, SIGKILL follows.
	log := filepath.Join(t.TempDir(), "out.txt")
	res = proc.Run(context.Background(), proc.Spec{Argv: []string{"sleep", "60"}, Dir: f.repo, Stdout: log, Stderr: log,
		Timeout: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond, Sandbox: p})
	if !res.TimedOut || res.Duration > 10*time.Second {
		t.Errorf("sleep 60 with a 200 ms timeout: %+v", res)
	}
}

// With HostNetwork a command reaches the host's loopback, but only on ConnectPorts.
func TestHostNetworkConnectPorts(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	if abi := sandbox.Detect().LandlockABI; abi < 4 {
		t.Skipf("Landlock ABI %d < 4 cannot restrict TCP connections", abi)
	}
	listen := func() int {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	allowed, other := listen(), listen()
	f := newFixture(t)
	p := prepareWith(t, f, sandbox.Request{HostNetwork: true, ConnectPorts: []uint16{uint16(allowed)}})
	if got, want := p.Summary().Network, fmt.Sprintf("host, TCP connect only to port %d (Landlock)", allowed); got != want {
		t.Errorf("Summary().Network = %q, want %q", got, want)
	}
	connect := func(port int) string {
		return fmt.Sprintf("python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), timeout=5); print('connected')\"", port)
	}
	if res, out := sh(t, p, f.repo, connect(allowed)); res.ExitCode != 0 || out != "connected\n" {
		t.Errorf("connecting to the allowed port: exit %d, output %q", res.ExitCode, out)
	}
	if res, out := sh(t, p, f.repo, connect(other)); res.ExitCode == 0 || !strings.Contains(out, "Permission denied") {
		t.Errorf("connecting to another port: exit %d, output %q; want Permission denied", res.ExitCode, out)
	}
}

// The command gets the descriptors an unconfined one gets and no more: none of the init's own
// (the memfd of its program, the Landlock ruleset, the detached mounts) is left open to it.
func TestCommandGetsOnlyItsDescriptors(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	// The shell's own descriptors, read by the shell (a pipeline would add its pipes, at times).
	const script = "for fd in /proc/$$/fd/*; do printf '%s ' ${fd##*/}; done"
	res, confined := sh(t, p, f.repo, script)
	_, unconfined := sh(t, nil, f.repo, script)
	if res.ExitCode != 0 || confined != unconfined {
		t.Errorf("exit %d; descriptors confined %q, unconfined %q", res.ExitCode, confined, unconfined)
	}
}

// However many paths are hidden or read-only and ports allowed, commands run: the init keeps no
// list of a fixed length.
func TestManyPathsAndPorts(t *testing.T) {
	f := newFixture(t)
	var hide, readOnly []string
	var ports []uint16
	for i := range 300 {
		secret := filepath.Join(f.home, fmt.Sprintf("secret%03d", i))
		mustWrite(t, secret, "SECRET\n")
		hide = append(hide, secret)
		readOnly = append(readOnly, filepath.Join(f.repo, fmt.Sprintf("ro%03d", i)))
		ports = append(ports, uint16(20000+i))
	}
	mustMkdir(t, readOnly[299])
	p := prepareWith(t, f, sandbox.Request{Hide: hide, ReadOnly: readOnly, HostNetwork: true, ConnectPorts: ports})
	res, out := sh(t, p, f.repo, fmt.Sprintf("cat %q || echo unreadable; touch %q/x || echo read-only", hide[299], readOnly[299]))
	if res.ExitCode != 0 || strings.Contains(out, "SECRET") || !strings.Contains(out, "unreadable") || !strings.Contains(out, "read-only") {
		t.Errorf("exit %d (%s), output %q; want a command that runs, with the last path hidden and the last read-only one unwritable", res.ExitCode, res.Err, out)
	}
}
