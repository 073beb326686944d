package initbin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEmbeddedInitIsFresh rebuilds the embedded inits from source, with gen.sh, and compares them
// byte for byte: an init older than package initproc would confine commands by outdated rules.
func TestEmbeddedInitIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	want, err := os.ReadFile("go.version")
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(want)); v != runtime.Version() {
		t.Skipf("the embedded inits were built by %s and this is %s: builds are only reproducible for one Go version", v, runtime.Version())
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "gen.sh", dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, msg)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, "init-linux-"+arch)
		built, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := os.ReadFile("init-linux-" + arch)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, embedded) {
			t.Errorf("init-linux-%s is not what its source builds: run `go generate ./internal/proc/sandbox/initbin` and commit the result", arch)
		}
	}
}
