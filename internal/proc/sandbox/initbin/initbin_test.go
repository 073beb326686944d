package initbin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEmbeddedInitIsFresh rebuilds the embedded inits from source, with gen.sh, and compares them
// byte for byte: an init older than c/init.c would confine commands by outdated rules.
func TestEmbeddedInitIsFresh(t *testing.T) {
	for _, cc := range []string{"x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("%s is not installed (Debian: gcc, gcc-aarch64-linux-gnu): cannot rebuild the inits", cc)
		}
	}
	dir := t.TempDir()
	if msg, err := exec.Command("sh", "gen.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, msg)
	}
	want, err := os.ReadFile("cc.version")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "cc.version")); !bytes.Equal(got, want) {
		t.Skipf("the embedded inits were built by other compilers: builds are only the same with the same ones\nthen:\n%snow:\n%s", want, got)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		built, err := os.ReadFile(filepath.Join(dir, "init-linux-"+arch))
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := os.ReadFile("init-linux-" + arch)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, embedded) {
			t.Errorf("init-linux-%s is not what c/init.c builds: run `go generate ./internal/proc/sandbox/initbin` and commit the result", arch)
		}
	}
}
