package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llmtest"
)

// The tests of a build SIGKILLed inside its commit, where git (or factory
// for git) holds index.lock, HEAD.lock and the branch's ref lock: the same
// command run again at once removes the locks, undoes the attempt and ends
// with the history of a build that was never killed, byte for byte (pinned
// dates and deterministic run ids make every commit the same object).

// referenceBuild runs the three-order plan uninterrupted in a fresh
// repository and returns it, its HEAD, its branch and its build duration.
// With slow, it builds the slow plan (newSlowBuildFixture), released from
// the start.
func referenceBuild(t *testing.T, slow bool) (repo, head, branch string, took time.Duration) {
	t.Helper()
	f := newBuildFixture(t, buildPlan(""))
	if slow {
		f = newSlowBuildFixture(t)
		f.release(t)
	}
	start := time.Now()
	res := f.build(t, llmtest.StartRouted(t, newRoutes(passingReplies).route).URL)
	took = time.Since(start)
	if res.code != ExitPass {
		t.Fatalf("reference build: exit %d\n%s", res.code, res.stderr)
	}
	return f.repo, git(t, f.repo, "rev-parse", "HEAD"), git(t, f.repo, "branch", "--show-current"), took
}

// startedBuild is a build started in the background.
type startedBuild struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startBuild(t *testing.T, f *buildFixture, url string) *startedBuild {
	t.Helper()
	b := &startedBuild{cmd: factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(url)...), done: make(chan struct{})}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.cmd.Process.Kill(); <-b.done })
	return b
}

// cutInCommit leaves f's repository exactly as a build SIGKILLed inside
// WO-02's commit leaves it (racing for the milliseconds git holds its
// locks made the test depend on the machine's load): it kills a build of
// the slow plan while WO-02's acceptance command waits (WO-02's journal
// written, its files in the tree), then makes what the commit had made by
// then. state is one of
//   - "index.lock": factory staged the new index in index.lock, git
//     commit-tree runs;
//   - "ref locks": git update-ref also holds HEAD.lock and the branch's lock;
//   - "branch moved": update-ref moved the branch to the commit (msg, as
//     the uninterrupted build wrote it), index.lock not yet renamed;
//
// and with noted the note of the commit step (gitws.GitStep) is there, as
// the build writes it before committing. It releases WO-02 for the next
// build.
func cutInCommit(t *testing.T, state, branch, msg string, noted bool) (*buildFixture, string, *routeWorkOrders) {
	t.Helper()
	f := newSlowBuildFixture(t)
	routes := newRoutes(passingReplies)
	url := llmtest.StartRouted(t, routes.route).URL
	b := startBuild(t, f, url)
	waitFor(t, "WO-02's slow command", func() bool {
		return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && exists(filepath.Join(f.repo, startedFile))
	})
	b.cmd.Process.Kill()
	<-b.done
	dotGit := filepath.Join(f.repo, ".git")
	if err := os.Remove(filepath.Join(dotGit, "factory", "command.json")); err != nil { // the command had ended
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dotGit, "index"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dotGit, map[string]string{"index.lock": string(index)})
	staged := []string{"GIT_INDEX_FILE=" + filepath.Join(dotGit, "index.lock")}
	gitWith(t, f.repo, staged, "update-index", "--add", "calc.py", "tests/test_multiply.py")
	refLock := filepath.Join("refs", "heads", filepath.FromSlash(branch)+".lock")
	switch state {
	case "index.lock":
	case "ref locks":
		writeFiles(t, dotGit, map[string]string{"HEAD.lock": "", refLock: git(t, f.repo, "rev-parse", "HEAD") + "\n"})
	case "branch moved":
		commit := gitWith(t, f.repo, nil, "commit-tree", gitWith(t, f.repo, staged, "write-tree"), "-p", "HEAD", "-m", msg)
		git(t, f.repo, "update-ref", "refs/heads/"+branch, commit)
		writeFiles(t, dotGit, map[string]string{"HEAD.lock": "ref: refs/heads/" + branch + "\n"})
	default:
		t.Fatalf("no state %q", state)
	}
	if noted {
		note, _ := json.Marshal(map[string]any{"step": "commit WO-02", "branch": branch, "pid": b.cmd.Process.Pid})
		writeFiles(t, dotGit, map[string]string{"factory/git-step.json": string(note)})
	}
	f.release(t)
	return f, url, routes
}

// checkFinished checks a build after a kill: exit 0, no git advice, and
// the history of the uninterrupted build.
func checkFinished(t *testing.T, f *buildFixture, res runOut, refHead string) {
	t.Helper()
	if res.code != ExitPass || strings.Contains(res.stderr, "Another git process") {
		t.Fatalf("build after the kill: exit %d\n%s", res.code, res.stderr)
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != refHead {
		t.Errorf("HEAD %s, want the uninterrupted build's %s:\n%s", head, refHead, git(t, f.repo, "log", "--format=%H %s"))
	}
	checkClean(t, f.repo)
	for _, p := range []string{"index.lock", "HEAD.lock", "factory/git-step.json", "factory/journal.json"} {
		if exists(filepath.Join(f.repo, ".git", p)) {
			t.Errorf(".git/%s left", p)
		}
	}
}

func TestBuildKilledInCommit(t *testing.T) {
	refRepo, refHead, branch, _ := referenceBuild(t, true)
	refMsg := git(t, refRepo, "log", "-1", "--format=%B", "HEAD~1")
	refLock := filepath.Join("refs", "heads", filepath.FromSlash(branch)+".lock")

	// The kill inside each step of the commit: the same command again
	// removes git's locks, undoes the attempt (the commit too, when the
	// branch had moved) and asks for WO-02 once more; the commit it then
	// makes is the same object.
	for _, state := range []string{"index.lock", "ref locks", "branch moved"} {
		t.Run(state, func(t *testing.T) {
			f, url, routes := cutInCommit(t, state, branch, refMsg, true)
			res := f.build(t, url)
			if !strings.Contains(res.stderr, "removed the lock files git left") || !strings.Contains(res.stderr, "recovering") {
				t.Errorf("the build did not say it recovered:\n%s", res.stderr)
			}
			checkFinished(t, f, res, refHead)
			for id, want := range map[string]int{"WO-01": 1, "WO-02": 2, "WO-03": 1} {
				if n := routes.count(id); n != want {
					t.Errorf("%s asked %d times, want %d", id, n, want)
				}
			}
		})
	}

	// factory recover does the same for the kill inside the commit.
	t.Run("factory recover", func(t *testing.T) {
		f, url, _ := cutInCommit(t, "ref locks", branch, refMsg, true)
		rec := runFactory(t, nil, "recover", "--repo", f.repo)
		if rec.code != ExitPass || !strings.Contains(rec.stderr, "removed the lock files git left") || strings.Contains(rec.stderr, "Another git process") {
			t.Fatalf("recover: exit %d\n%s%s", rec.code, rec.stdout, rec.stderr)
		}
		checkClean(t, f.repo)
		checkFinished(t, f, f.build(t, url), refHead)
	})

	// Without the note of a git step, a young lock is not taken for a
	// leftover (a git may hold it): the build refuses with its own advice
	// and changes nothing; once the lock is stale, the build removes it.
	t.Run("journal without the note", func(t *testing.T) {
		f, url, _ := cutInCommit(t, "ref locks", branch, refMsg, false)
		dotGit := filepath.Join(f.repo, ".git")
		before := treeSnapshot(t, f.repo)
		res := f.build(t, url)
		if res.code != ExitUsage || !strings.Contains(res.stderr, "a git process may still hold it; wait for it to finish") || strings.Contains(res.stderr, "Another git process") {
			t.Fatalf("young lock without the note: exit %d, want %d with factory's advice\n%s", res.code, ExitUsage, res.stderr)
		}
		after := treeSnapshot(t, f.repo)
		delete(before, ".git/factory/lock") // the killed build's; the refusing one removes it
		delete(after, ".git/factory/lock")
		sameTree(t, before, after)
		old := time.Now().Add(-time.Minute)
		for _, lock := range []string{"index.lock", "HEAD.lock", refLock} {
			if err := os.Chtimes(filepath.Join(dotGit, lock), old, old); err != nil {
				t.Fatal(err)
			}
		}
		checkFinished(t, f, f.build(t, url), refHead)
	})

	// No journal and no note: the lock is nobody's that factory knows of.
	t.Run("lock without a journal", func(t *testing.T) {
		f := newBuildFixture(t, buildPlan(""))
		writeFiles(t, f.repo, map[string]string{".git/index.lock": ""})
		before := treeSnapshot(t, f.repo)
		res := f.build(t, llmtest.Start(t).URL)
		if res.code != ExitUsage || !strings.Contains(res.stderr, "is not factory's to remove") || strings.Contains(res.stderr, "Another git process") {
			t.Fatalf("lock without a journal: exit %d, want %d with factory's advice\n%s", res.code, ExitUsage, res.stderr)
		}
		sameTree(t, before, treeSnapshot(t, f.repo))
	})
}

// gitWith runs git in dir with extra environment and returns its output.
func gitWith(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(t.TempDir()), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestBuildKillLoop SIGKILLs builds at delays spread over a whole build
// and runs the same command again at once: each finishes with the
// uninterrupted build's history.
func TestBuildKillLoop(t *testing.T) {
	_, refHead, _, took := referenceBuild(t, false)
	const kills = 12
	for i := range kills {
		delay := took * time.Duration(i+1) / kills
		t.Run(delay.Round(time.Millisecond).String(), func(t *testing.T) {
			t.Parallel()
			f := newBuildFixture(t, buildPlan(""))
			url := llmtest.StartRouted(t, newRoutes(passingReplies).route).URL
			b := startBuild(t, f, url)
			select {
			case <-b.done:
			case <-time.After(delay):
				b.cmd.Process.Kill()
				<-b.done
			}
			checkFinished(t, f, f.build(t, url), refHead)
		})
	}
}

// TestBuildRecoversKilledBranchSwitch: a build killed while git switched
// to the build branch left the tree half one branch, half the other, and
// git's index.lock. The next build puts the tree back, switches again and
// goes on (gitws.TestRecoverSwitchAfterKill kills a real checkout).
func TestBuildRecoversKilledBranchSwitch(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t, replyWO01, replyWO02Bad)
	if res := f.build(t, srv.URL, "--max-attempts", "1", "--repair", "off"); res.code != ExitFail {
		t.Fatalf("first build: exit %d\n%s", res.code, res.stderr)
	}
	branch := git(t, f.repo, "branch", "--show-current")
	tip := git(t, f.repo, "rev-parse", "HEAD")
	git(t, f.repo, "checkout", "-q", "main")

	// What a kill inside 'git checkout <branch>' leaves: the note, the
	// lock, some of the branch's files written, one of them half.
	repo, err := gitws.Open(context.Background(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RecordGitStep(gitws.GitStep{Step: gitws.StepSwitch, Branch: branch, Target: tip}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.repo, map[string]string{"calc.py": bCalcAdd, "tests/test_add.py": bTestAdd[:len(bTestAdd)/2]})
	writeFiles(t, filepath.Join(f.repo, ".git"), map[string]string{"index.lock": ""})

	fixed := llmtest.Start(t, replyWO02, replyWO03)
	res := f.build(t, fixed.URL)
	if res.code != ExitPass || !strings.Contains(res.stderr, "killed while switching to "+branch) {
		t.Fatalf("resumed build: exit %d\n%s", res.code, res.stderr)
	}
	checkClean(t, f.repo)
}
