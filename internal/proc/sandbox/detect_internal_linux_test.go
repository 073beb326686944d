package sandbox

import (
	"os"
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
