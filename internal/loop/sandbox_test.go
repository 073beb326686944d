package loop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// gitIn runs git in dir with a pinned identity and no user configuration.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	env, _ := proc.EnvPolicy{}.Environ(os.Environ())
	env = append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@test.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@test.invalid")
	out, err := proc.Output(context.Background(), dir, append([]string{"git"}, args...), env)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestOpenGuardSandboxRequiredRefuses: on a machine that cannot confine a
// guard (no namespaces, no Landlock), "required" refuses before anything is
// modified, "auto" opens (and would run the guard unconfined with a warning).
func TestOpenGuardSandboxRequiredRefuses(t *testing.T) {
	t.Cleanup(sandbox.MakeUnavailable("no confinement on this test machine"))
	ctx := context.Background()
	root := t.TempDir()
	gitIn(t, root, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "add", "-A")
	gitIn(t, root, "commit", "-q", "-m", "baseline")
	if _, err := Init(InitOptions{Root: root}); err != nil {
		t.Fatal(err)
	}
	cfg := "[guard]\nsandbox = \"required\"\ncommand = [\"true\"]\n[executor]\ncommand = [\"true\"]\n"
	if err := os.WriteFile(filepath.Join(root, ConfigPath), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Start(ctx, StartOptions{Root: root, RunID: "t1"}); err != nil {
		t.Fatal(err)
	}
	head := gitIn(t, root, "rev-parse", "HEAD")
	before := gitIn(t, root, "status", "--porcelain", "--ignored")

	_, err := Open(ctx, Options{Root: root})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `[guard] sandbox = "required": --sandbox required: cannot confine commands on this machine: no confinement on this test machine`) {
		t.Fatalf("Open = %v, want a refusal saying the guard cannot be confined", err)
	}
	if got := gitIn(t, root, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if st := gitIn(t, root, "status", "--porcelain", "--ignored"); st != before {
		t.Errorf("the refusal left changes:\n%s", st)
	}

	var progress strings.Builder
	if err := os.WriteFile(filepath.Join(root, ConfigPath), []byte(strings.Replace(cfg, "required", "auto", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "commit", "-q", "-am", "auto")
	r, err := Open(ctx, Options{Root: root, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if want := "guard sandbox auto: NOT confined\nwarning: sandbox unavailable, commands run unconfined: no confinement on this test machine\n" +
		"executor sandbox auto: NOT confined\nwarning: sandbox unavailable, commands run unconfined: no confinement on this test machine\n"; progress.String() != want {
		t.Errorf("progress = %q, want %q", progress.String(), want)
	}
}
