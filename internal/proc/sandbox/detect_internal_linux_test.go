package sandbox

import (
	"os"
	"strings"
	"testing"
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
