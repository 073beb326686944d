package cli

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRunLeavesHomeUntouched runs a confined factory run, with the
// dependency step on, in a Python repository under a fresh HOME: factory
// leaves nothing there, and asks no toolchain where its caches are (the go
// first on PATH, in a GOROOT of its own, records every run: Go's
// configuration is derived, not asked).
func TestRunLeavesHomeUntouched(t *testing.T) {
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not installed")
	}
	goroot, ran := t.TempDir(), filepath.Join(t.TempDir(), "go-ran")
	if err := os.MkdirAll(filepath.Join(goroot, "pkg", "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(goroot, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$*\" >> '" + ran + "'\nexec '" + realGo + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, workOrder(), good(calcV2))
	home := t.TempDir()
	res := runFactory(t, []string{"OPENAI_API_KEY=test-key", "HOME=" + home, "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "FACTORY_DEPS_CACHE=",
		"PATH=" + filepath.Join(goroot, "bin") + string(filepath.ListSeparator) + os.Getenv("PATH")},
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
	if runs, err := os.ReadFile(ran); err == nil {
		t.Errorf("factory run ran go: %s", runs)
	}
}
