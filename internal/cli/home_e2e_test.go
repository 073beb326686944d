package cli

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// TestRunLeavesHomeUntouched runs a confined factory run, with the
// dependency step on, in a Python repository under a fresh HOME: factory
// and the toolchains it asks (go env writes telemetry counters under the
// user's configuration directory) leave nothing there.
func TestRunLeavesHomeUntouched(t *testing.T) {
	f := newFixture(t, workOrder(), good(calcV2))
	home := t.TempDir()
	res := runFactory(t, []string{"OPENAI_API_KEY=test-key", "HOME=" + home, "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "FACTORY_DEPS_CACHE="},
		"run", "--repo", f.repo, "--work-order", f.woPath, "--out", f.out,
		"--llm-model", "test-model", "--llm-base-url", f.srv.URL, "--timeout-seconds", "20", "--sandbox", "auto")
	if res.code != ExitPass {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var left []string
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if p != home {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("factory run left files in HOME: %v", left)
	}
}
