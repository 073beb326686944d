package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc/sandbox/initbin"
)

// The probe must not depend on factory's own directory: run from a
// directory under the host's /tmp, which the confined view replaces, it
// once failed ("cannot enter …") and made `auto` fall back to Landlock.
func TestProbeFromADirectoryUnderTmp(t *testing.T) {
	if !hooked.Load() {
		t.Skip("this test binary has no sandbox.Init hook")
	}
	dir, err := os.MkdirTemp("/tmp", "factory-probe-cwd-")
	if err != nil {
		t.Skip("no /tmp here")
	}
	defer os.RemoveAll(dir)
	t.Chdir(dir)
	abi, _ := landlockABI()
	if err := probe(abi); err != nil {
		if strings.Contains(err.Error(), "cannot enter") {
			t.Fatalf("probe from %s: %v", dir, err)
		}
		t.Skipf("user namespaces unavailable here: %v", err)
	}
}

// Where an init is embedded, confined commands start it from its memfd, not the whole binary; and
// both inits confine the same way (the probe sets up the whole view).
func TestEmbeddedInitIsUsed(t *testing.T) {
	if len(initbin.Binary) == 0 {
		t.Skip("no init is embedded for this platform")
	}
	path := initExe()
	if !strings.HasPrefix(path, "/proc/self/fd/") {
		t.Fatalf("initExe() = %q, want the embedded init's memfd", path)
	}
	exe, err := os.Readlink(path)
	if err != nil || !strings.HasPrefix(exe, "/memfd:factory-sandbox-init") {
		t.Fatalf("%s -> %q, %v; want the memfd", path, exe, err)
	}
	if !hooked.Load() {
		t.Skip("this test binary has no sandbox.Init hook")
	}
	abi, _ := landlockABI()
	if err := probe(abi); err != nil {
		t.Skipf("user namespaces unavailable here: %v", err)
	}
	t.Cleanup(func() { initMu.Lock(); initPath = path; initMu.Unlock() })
	useSelfExe()
	if err := probe(abi); err != nil {
		t.Fatalf("the embedded init confines but the binary itself does not: %v", err)
	}
}

// Both ways of making the namespaces (util-linux's unshare, or the fork) set up the whole view.
func TestBothLaunchersConfine(t *testing.T) {
	if !hooked.Load() {
		t.Skip("this test binary has no sandbox.Init hook")
	}
	abi, _ := landlockABI()
	if !Detect().UserNamespaces {
		t.Skip("user namespaces unavailable here")
	}
	initMu.Lock()
	tool := unshareTool
	initMu.Unlock()
	t.Cleanup(func() { setUnshareTool(tool) })
	if tool == "" {
		t.Log("util-linux's unshare does not make the namespaces here; the fork does")
	}
	setUnshareTool("")
	if err := probe(abi); err != nil {
		t.Fatalf("confined through the fork: %v", err)
	}
}

// A library the attempt wrote into the work tree and named in LD_PRELOAD must not run outside the
// sandbox: util-linux's unshare is dynamically linked and runs before the confinement, so such a
// command is launched by the fork, whose init is static.
func TestPreloadedLibraryRunsOnlyConfined(t *testing.T) {
	if !hooked.Load() {
		t.Skip("this test binary has no sandbox.Init hook")
	}
	if !Detect().UserNamespaces {
		t.Skip("user namespaces unavailable here")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed: cannot build the library to preload")
	}
	work, outside := t.TempDir(), t.TempDir()
	src := filepath.Join(outside, "mark.c")
	lib := filepath.Join(work, "mark.so") // in the work tree, as an attempt would leave it
	code := "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void mark(void) {\n" +
		"  const char *p = getenv(\"FACTORY_TEST_MARK\"); if (p) { FILE *f = fopen(p, \"w\"); if (f) fclose(f); } }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Skipf("gcc cannot build a shared library here: %v: %s", err, out)
	}
	mark := filepath.Join(outside, "marked") // outside the work tree: only an unconfined process can write it
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: Detect().LandlockABI, workTree: work}
	cmd := exec.Command("/bin/true")
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=" + lib, "FACTORY_TEST_MARK=" + mark}
	cleanup, err := p.wrap(cmd, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("confined true with LD_PRELOAD: %v: %s", err, out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the preloaded library wrote %s: it ran unconfined (argv %q)", mark, cmd.Args)
	}
}

// Which environments keep a command off util-linux's unshare (see loaderEnv).
func TestLoaderEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "PYTHONPATH=src", "OLD_LD=1"}, false},
		{[]string{"PATH=/usr/bin", "LD_PRELOAD=/w/x.so"}, true},
		{[]string{"LD_LIBRARY_PATH="}, true},
		{[]string{"LD_AUDIT=/w/a.so"}, true},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.check=3"}, true},
		{[]string{"MALLOC_CHECK_=3"}, true},
		{[]string{"GCONV_PATH=/w"}, true},
		{[]string{"LOCPATH=/w"}, true},
		{[]string{"NLSPATH=/w/%N"}, true},
	} {
		if got := loaderEnv(tc.env); got != tc.want {
			t.Errorf("loaderEnv(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
