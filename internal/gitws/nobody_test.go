package gitws

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRollbackAsUnprivilegedUser reruns the mode tests as nobody when they
// run as root: root reads and removes a directory a command locked with
// mode 000 whatever its mode, an ordinary user does not, and Rollback must
// unlock it first.
func TestRollbackAsUnprivilegedUser(t *testing.T) {
	switch {
	case os.Getenv("FACTORY_GITWS_TEST_NOBODY") != "":
		t.Skip("already the rerun as nobody")
	case os.Getuid() != 0:
		t.Skip("already unprivileged: TestRollbackRestoresModes covers it")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
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
	bin := filepath.Join(dir, "gitws.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.v", "-test.count=1",
		"-test.run=^(TestRollbackRestoresModes)$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "FACTORY_GITWS_TEST_NOBODY=1", "HOME=/nonexistent", "TMPDIR="+os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRollbackRestoresModes") {
		t.Fatalf("the rerun as nobody failed (%v):\n%s", err, out)
	}
}
