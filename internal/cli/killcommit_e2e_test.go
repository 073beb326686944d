package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/llmtest"
)

// The tests of a build SIGKILLed inside its commit, where git (or factory
// for git) holds index.lock, HEAD.lock and the branch's ref lock: the same
// command run again at once removes the locks, undoes the attempt and ends
// with the history of a build that was never killed, byte for byte (pinned
// dates and deterministic run ids make every commit the same object).

// referenceBuild runs the three-order plan uninterrupted in a fresh
// repository and returns it, its HEAD, its branch and its build duration.
func referenceBuild(t *testing.T) (repo, head, branch string, took time.Duration) {
	t.Helper()
	f := newBuildFixture(t, buildPlan(""))
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

// killWhen SIGKILLs the build as soon as cond holds, polling without a
// pause (the git steps it aims at last milliseconds), and waits for it to
// die; false means the build ended first.
func (b *startedBuild) killWhen(cond func() bool) bool {
	for {
		select {
		case <-b.done:
			return false
		default:
		}
		if cond() {
			b.cmd.Process.Kill()
			<-b.done
			return true
		}
	}
}

// journalOf reports whether the attempt journal in repo is work order wo's.
func journalOf(repo, wo string) bool {
	data, err := os.ReadFile(filepath.Join(repo, ".git", "factory", "journal.json"))
	return err == nil && bytes.Contains(data, []byte("/"+wo+"/"))
}

// killInCommit starts a build of a fresh fixture and kills it inside work
// order wo's commit, once lock (relative to .git) exists; it tries again
// with a new fixture when the polling missed the lock (git update-ref
// holds the branch's for about a millisecond) or the kill landed after the
// commit let go of index.lock.
func killInCommit(t *testing.T, wo, lock string) (f *buildFixture, url string, routes *routeWorkOrders) {
	t.Helper()
	for range 5 {
		f = newBuildFixture(t, buildPlan(""))
		routes = newRoutes(passingReplies)
		url = llmtest.StartRouted(t, routes.route).URL
		b := startBuild(t, f, url)
		dotGit := filepath.Join(f.repo, ".git")
		if b.killWhen(func() bool { return exists(filepath.Join(dotGit, lock)) && journalOf(f.repo, wo) }) && exists(filepath.Join(dotGit, "index.lock")) {
			return f, url, routes
		}
	}
	t.Fatalf("five builds: none was killed inside %s's commit with %s held", wo, lock)
	return nil, "", nil
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
	refRepo, refHead, branch, _ := referenceBuild(t)
	refLock := filepath.Join("refs", "heads", filepath.FromSlash(branch)+".lock")

	// Genuine kills: while factory holds index.lock for the commit (git
	// commit-tree runs), and while git update-ref holds the branch's lock
	// too. (The subtests below kill WO-01 and WO-02 at index.lock and WO-01
	// at the branch's lock.)
	for _, at := range []struct{ wo, lock string }{{"WO-02", refLock}, {"WO-03", "index.lock"}, {"WO-03", refLock}} {
		t.Run(at.wo+" "+filepath.Base(at.lock), func(t *testing.T) {
			f, url, routes := killInCommit(t, at.wo, at.lock)
			res := f.build(t, url)
			if !strings.Contains(res.stderr, "removed the lock files git left") || !strings.Contains(res.stderr, "recovering") {
				t.Errorf("the build did not say it recovered:\n%s", res.stderr)
			}
			checkFinished(t, f, res, refHead)
			for _, id := range []string{"WO-01", "WO-02", "WO-03"} {
				want := 1
				if id == at.wo {
					want = 2 // its attempt, commit included, was undone
				}
				if n := routes.count(id); n != want {
					t.Errorf("%s asked %d times, want %d", id, n, want)
				}
			}
		})
	}

	// The state of a kill after git update-ref moved the branch and before
	// factory renamed index.lock over the index, made exactly: the commit
	// exists and the branch points at it, index.lock and HEAD.lock remain.
	t.Run("branch moved, index not", func(t *testing.T) {
		f, url, _ := killInCommit(t, "WO-02", "index.lock")
		dotGit := filepath.Join(f.repo, ".git")
		msg := git(t, refRepo, "log", "-1", "--format=%B", "HEAD~1")
		tree := gitWith(t, f.repo, []string{"GIT_INDEX_FILE=" + filepath.Join(dotGit, "index.lock")}, "write-tree")
		commit := gitWith(t, f.repo, nil, "commit-tree", tree, "-p", "HEAD", "-m", msg)
		if commit != git(t, refRepo, "rev-parse", "HEAD~1") {
			t.Fatalf("the hand-made commit %s is not the reference's WO-02 commit", commit)
		}
		git(t, f.repo, "update-ref", "refs/heads/"+branch, commit)
		writeFiles(t, dotGit, map[string]string{"HEAD.lock": "ref: refs/heads/" + branch + "\n"})
		checkFinished(t, f, f.build(t, url), refHead)
	})

	// factory recover does the same for the kill inside the commit.
	t.Run("factory recover", func(t *testing.T) {
		f, url, _ := killInCommit(t, "WO-01", refLock)
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
		f, url, _ := killInCommit(t, "WO-01", "index.lock")
		dotGit := filepath.Join(f.repo, ".git")
		if err := os.Remove(filepath.Join(dotGit, "factory", "git-step.json")); err != nil {
			t.Fatal(err)
		}
		before := treeSnapshot(t, f.repo)
		delete(before, ".git/factory/lock") // the killed build's; the refusing one removes it
		res := f.build(t, url)
		if res.code != ExitUsage || !strings.Contains(res.stderr, "a git process may still hold it; wait for it to finish") || strings.Contains(res.stderr, "Another git process") {
			t.Fatalf("young lock without the note: exit %d, want %d with factory's advice\n%s", res.code, ExitUsage, res.stderr)
		}
		sameTree(t, before, treeSnapshot(t, f.repo))
		old := time.Now().Add(-time.Minute)
		for _, lock := range []string{"index.lock", "HEAD.lock", refLock} { // the kill may land in update-ref
			if err := os.Chtimes(filepath.Join(dotGit, lock), old, old); err != nil && !os.IsNotExist(err) {
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
	_, refHead, _, took := referenceBuild(t)
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
