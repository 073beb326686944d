package factory

import (
	"context"
	"fmt"
	"io"

	"github.com/factory-harness/factory/internal/deps"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/proc"
)

// RecoverResult says what Recover found and did.
type RecoverResult struct {
	Found    bool   // a journal was there
	Tool     string // who wrote it ("factory run", "factory build")
	RunDir   string // the artifacts of the run that was cut off
	Killed   bool   // the recorded command's process group was still alive and has been killed
	Rollback RollbackRecord
}

// Recover restores the repository at repoDir after a run was killed in the
// middle of an attempt, from the journal that run left in the git
// directory: it kills the recorded command's process group if it still
// lives (and is the same process), restores the baseline exactly as a
// rollback does (content, modes, ignored files, git metadata; files the
// attempt created removed) and removes the journal. Without a journal it
// changes nothing. Refusals (not a repository, lock held, unreadable
// journal) are *PreflightError.
func Recover(ctx context.Context, repoDir string, progress io.Writer) (RecoverResult, error) {
	repo, err := gitws.Open(ctx, repoDir)
	if err != nil {
		return RecoverResult{}, preflightf("--repo: %v", err)
	}
	lock, err := lockRepo(repo)
	if err != nil {
		return RecoverResult{}, err
	}
	defer lock.Unlock()
	return RecoverHeld(ctx, repo, progress)
}

// readJournal reads the journal in repo; found is false when there is none.
func readJournal(repo *gitws.Repo) (j journal, found bool, err error) {
	if found, err = repo.HasJournal(); err != nil || !found {
		return j, false, err
	}
	if err := repo.ReadJournal(&j); err != nil {
		return j, true, preflightf("%v (remove it by hand once you have checked the repository)", err)
	}
	if j.Version != journalVersion {
		return j, true, preflightf("journal %s has version %d; this factory reads version %d", repo.JournalPath(), j.Version, journalVersion)
	}
	return j, true, nil
}

// JournalTool reports whether repo holds the journal of a run that was cut
// off, and which tool wrote it ("factory run", "factory build").
func JournalTool(repo *gitws.Repo) (tool string, found bool, err error) {
	j, found, err := readJournal(repo)
	return j.Tool, found, err
}

// RecoverHeld is Recover for a caller that already holds the repository
// lock (factory build recovers from its own journal before resuming).
func RecoverHeld(ctx context.Context, repo *gitws.Repo, progress io.Writer) (RecoverResult, error) {
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	j, found, err := readJournal(repo)
	if err != nil || !found {
		return RecoverResult{}, err
	}
	res := RecoverResult{Found: true, Tool: j.Tool, RunDir: j.RunDir}
	say("recover: found the journal of %s (pid %d, attempt %d, artifacts in %s)", j.Tool, j.PID, j.Attempt, j.RunDir)
	cmd, running, err := repo.RecordedCommand()
	if err != nil {
		return res, err
	}
	if running {
		if res.Killed, err = proc.KillGroupIfSame(cmd.PGID, cmd.StartTicks); err != nil {
			return res, fmt.Errorf("kill the command left running (process group %d): %w", cmd.PGID, err)
		}
		if res.Killed {
			say("recover: killed the command still running (process group %d)", cmd.PGID)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if res.Rollback, err = rollbackTo(ctx, repo, j.Baseline, j.Undo); err != nil {
		return res, err
	}
	// The run may have been killed inside the dependency step, which
	// leaves a stamp without the tree it describes: install again.
	if err := deps.Forget(repo.Root); err != nil {
		return res, fmt.Errorf("after the rollback: %w", err)
	}
	say("recover: restored %s to %s (removed %d, restored %d, could not restore %d)", repo.Root, gitws.ShortHash(j.Baseline.Commit),
		len(res.Rollback.RemovedFiles), len(res.Rollback.RestoredFiles), len(res.Rollback.UnrestoredFiles))
	return res, nil
}
