package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
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

// replyWO01Syntax is WO-01 with a calc.py that does not compile: its
// directories (scripts/, tests/) are new, and verification fails.
var replyWO01Syntax = llmtest.Reply{Content: llmtest.Proposal("skeleton",
	llmtest.Write{Path: "scripts/verify.sh", BaseSHA256: sha(""), Content: bVerify},
	llmtest.Write{Path: "tests/__init__.py", BaseSHA256: sha(""), Content: ""},
	llmtest.Write{Path: "tests/test_add.py", BaseSHA256: sha(""), Content: bTestAdd},
	llmtest.Write{Path: "calc.py", BaseSHA256: sha(""), Content: "def add(a, b)\n    return a + b\n"})}

// A build whose first work order fails once in the directories it creates
// retries it and finishes, with the same commits as a build that never
// failed.
func TestBuildNewDirectoriesFailThenPass(t *testing.T) {
	for _, sandbox := range []string{"off", "auto"} {
		t.Run("sandbox="+sandbox, func(t *testing.T) {
			f := newBuildFixture(t, buildPlan(""))
			srv := llmtest.Start(t, replyWO01Syntax, replyWO01, replyWO02, replyWO03)
			base := git(t, f.repo, "rev-parse", "HEAD")
			res := f.build(t, srv.URL, "--json", "--sandbox", sandbox)
			if res.code != ExitPass {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			var sum builder.Summary
			if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if wo1 := sum.WorkOrders[0]; wo1.Attempts != 2 || wo1.Outcome != builder.OutcomePassed {
				t.Errorf("WO-01 = %+v, want passed on its second attempt", wo1)
			}
			checkCommits(t, f.repo, base, committed)
			checkClean(t, f.repo)
		})
	}
}

// Two identical failures of the first work order stop the build (exit 1)
// before a third attempt, and leave the tree as it was: the directories
// the attempts made are gone.
func TestBuildSyntaxErrorTwiceStopsEarly(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t, replyWO01Syntax, replyWO01Syntax, replyWO01)
	base := git(t, f.repo, "rev-parse", "HEAD")
	res := f.build(t, srv.URL, "--json", "--repair", "off")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, ExitFail, res.stdout, res.stderr)
	}
	if srv.Remaining() != 1 {
		t.Errorf("%d scripted replies left, want 1 (early stop after two identical failures)", srv.Remaining())
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if wo1 := sum.WorkOrders[0]; sum.Verdict != builder.VerdictFail || sum.StoppedEarly != "identical failure" ||
		wo1.Outcome != builder.OutcomeFailed || wo1.Attempts != 2 {
		t.Errorf("summary = %+v", sum)
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != base {
		t.Errorf("HEAD moved to %s", head)
	}
	checkClean(t, f.repo)
	for _, dir := range []string{"scripts", "tests"} {
		if _, err := os.Lstat(filepath.Join(f.repo, dir)); !os.IsNotExist(err) {
			t.Errorf("%s/ is still there after the rollback: %v", dir, err)
		}
	}
}
