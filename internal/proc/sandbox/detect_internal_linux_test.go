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
	dir, err := os.MkdirTemp("/tmp", "factory-probe-cwd-")
	if err != nil {
		t.Skip("no /tmp here")
	}
	defer os.RemoveAll(dir)
	t.Chdir(dir)
	abi, _ := landlockABI()
	if err := probe(abi, true); err != nil {
		if strings.Contains(err.Error(), "cannot enter") {
			t.Fatalf("probe from %s: %v", dir, err)
		}
		t.Skipf("user namespaces unavailable here: %v", err)
	}
}

// Confined commands start the embedded init from its memfd.
func TestEmbeddedInitIsUsed(t *testing.T) {
	if len(initbin.Binary) == 0 {
		t.Skip("no init is embedded for this platform")
	}
	path, err := initExe()
	if err != nil || !strings.HasPrefix(path, "/proc/self/fd/") {
		t.Fatalf("initExe() = %q, %v; want the embedded init's memfd", path, err)
	}
	exe, err := os.Readlink(path)
	if err != nil || !strings.HasPrefix(exe, "/memfd:factory-sandbox-init") {
		t.Fatalf("%s -> %q, %v; want the memfd", path, exe, err)
	}
}

// Both ways of making the namespaces set up the whole view: the init's own (unshare), and the
// fork's, which a private PID namespace needs.
func TestBothWaysOfMakingNamespacesConfine(t *testing.T) {
	if !Detect().UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", Detect().UserNamespacesError)
	}
	if err := privatePIDs(); err != nil {
		t.Fatalf("confined through the fork, in a PID namespace: %v", err)
	}
}

// A library the attempt wrote into the work tree and named in LD_PRELOAD must not run outside the
// sandbox: nothing dynamically linked may run between factory and the confinement (the init is
// static).
func TestPreloadedLibraryRunsOnlyConfined(t *testing.T) {
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
	cleanup, err := p.wrap(cmd, false, nil, nil)
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
