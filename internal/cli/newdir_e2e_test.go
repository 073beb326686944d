package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/factory-harness/factory/internal/llmtest"
)

// newPackageReply writes a package two directories deep, answering n.
func newPackageReply(n string) llmtest.Reply {
	return llmtest.Reply{Content: llmtest.Proposal("add pkg.sub.mod",
		llmtest.Write{Path: "pkg/__init__.py", BaseSHA256: sha(""), Content: ""},
		llmtest.Write{Path: "pkg/sub/__init__.py", BaseSHA256: sha(""), Content: ""},
		llmtest.Write{Path: "pkg/sub/mod.py", BaseSHA256: sha(""), Content: "def f():\n    return " + n + "\n"})}
}

// A first attempt that creates new nested directories and fails is rolled
// back (directories, and a FIFO a command made there, removed) and the
// second attempt passes: the most common first work order of a plan.
func TestRunNewDirectoriesFailThenPass(t *testing.T) {
	for _, sandbox := range []string{"off", "auto"} {
		t.Run("sandbox="+sandbox, func(t *testing.T) {
			wo := workOrder()
			wo["allowed_files"] = []string{"pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/mod.py"}
			wo["context_files"] = []string{}
			// mkfifo fails on attempt 2 unless the rollback removed attempt 1's FIFO.
			wo["acceptance_commands"] = []string{"mkfifo pkg/sub/pipe", `python3 -c "from pkg.sub.mod import f; assert f() == 2"`}
			f := newFixture(t, wo, newPackageReply("1"), newPackageReply("2"))
			res := f.run(t, "--sandbox", sandbox)
			if res.code != ExitPass {
				t.Fatalf("exit %d, want 0\n%s", res.code, res.stderr)
			}
			s := f.summary(t, res)
			if s.TotalAttempts != 2 || s.Attempts[0].FailureBrief == nil {
				t.Fatalf("attempts = %+v", s.Attempts)
			}
			rb := s.Attempts[0].Rollback
			if rb == nil {
				t.Fatal("attempt 1 has no rollback record")
			}
			found := false
			for _, p := range rb.RemovedFiles {
				found = found || p == "pkg/sub/pipe"
			}
			if !found || len(rb.UnrestoredFiles) != 0 {
				t.Errorf("rollback of attempt 1 = %+v, want pkg/sub/pipe removed and nothing unrestored", rb)
			}
			if got, err := os.ReadFile(filepath.Join(f.repo, "pkg", "sub", "mod.py")); err != nil || string(got) != "def f():\n    return 2\n" {
				t.Errorf("pkg/sub/mod.py after PASS = %q, %v", got, err)
			}
		})
	}
}
