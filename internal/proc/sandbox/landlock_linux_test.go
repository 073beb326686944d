package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLandlockAlone checks the fallback for machines without user namespaces: writes only to the work
// tree and the private directories, and no TCP connections.
func TestLandlockAlone(t *testing.T) {
	abi, why := landlockABI()
	if abi < 1 {
		t.Skipf("no Landlock here: %s", why)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo, sibling := filepath.Join(root, "repo"), filepath.Join(root, "sibling")
	for _, dir := range []string{repo, sibling} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: abi, workTree: repo}
	run := func(script string) (string, error) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = repo
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		cleanup, err := p.Wrap(cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(`echo a > in-repo && echo b > "$TMPDIR/t" && echo c > "$HOME/h"`); err != nil {
		t.Errorf("writes to the work tree, TMPDIR and HOME: %v: %s", err, out)
	}
	for _, path := range []string{filepath.Join(sibling, "x"), filepath.Join(os.TempDir(), "factory-landlock-test")} {
		if out, err := run(fmt.Sprintf("echo x > %q", path)); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("writing %s: %v: %s; want Permission denied", path, err, out)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s exists on the host: %v", path, err)
		}
	}
	if abi < 4 {
		t.Skipf("Landlock ABI %d cannot restrict TCP", abi)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	port := ln.Addr().(*net.TCPAddr).Port
	out, err := run(fmt.Sprintf(`python3 -c "import socket; socket.create_connection(('127.0.0.1', %d), timeout=5)"`, port))
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("connecting to the host's listener: %v: %s; want Permission denied", err, out)
	}
}

// With Landlock alone, which cannot make writes private, commands see only the toolchain homes
// (read-only) and no other cache: the real ones are never written.
func TestLandlockAloneCaches(t *testing.T) {
	abi, why := landlockABI()
	if abi < 2 {
		t.Skipf("no Landlock that restricts here (ABI %d): %s", abi, why)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo, home, build := filepath.Join(root, "repo"), filepath.Join(root, "toolhome"), filepath.Join(root, "buildcache")
	for _, dir := range []string{repo, home, build} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: abi, workTree: repo}
	p.showCaches(existingCaches([]Cache{{Dir: home, Env: "TOOL_HOME", ReadOnlyFallback: true}, {Dir: build, Env: "BUILD_CACHE"}}, repo, nil), nil)
	cmd := exec.Command("sh", "-c", `echo "$TOOL_HOME ${BUILD_CACHE-unset}"; echo x > "$TOOL_HOME/x"`)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cleanup, err := p.Wrap(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.HasPrefix(string(out), home+" unset\n") || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("%v: %s; want the home shown, the build cache not, and the write denied", err, out)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("the tool home changed on the host: %v", entries)
	}
	if got, want := p.Summary().Caches, []string{home + " (TOOL_HOME, read-only)"}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("Summary().Caches = %q, want %q", got, want)
	}
	if w := p.Warning(); !strings.Contains(w, "toolchain caches are not shared") {
		t.Errorf("Warning() = %q, want it to say the caches are not shared", w)
	}
}
