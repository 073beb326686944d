package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/gitws"
)

// Recheck runs the checks PO runs after an attempt's writes — global
// verification, the postconditions, the acceptance commands — on the
// tree as it is, without asking the model: a parallel build rechecks a
// work order that passed on a tree without some earlier, independent
// orders once their commits and its own are put together. The commands
// run as an attempt's do (confined, journaled, their git metadata
// guarded), and the tree is rolled back afterwards whatever they did.
// stage is "" when every check passed, else the failure stage; the
// artifacts are in <Out>/<run id>/recheck/.
func (r *Run) Recheck(ctx context.Context) (stage string, err error) {
	defer r.Close()
	if r.runDir, err = artifact.NewRunDir(r.opts.Out, r.runID); err != nil {
		return "", &PreflightError{Msg: err.Error()}
	}
	a := &attempt{index: 1, dir: filepath.Join(r.runDir, "recheck")}
	if err := os.MkdirAll(filepath.Join(a.dir, "logs"), 0o755); err != nil {
		return "", fmt.Errorf("create the recheck directory: %w", err)
	}
	r.progress("recheck %s: work order %s on %s, artifacts in %s", r.runID, r.opts.WorkOrder.ID, gitws.ShortHash(r.baseline.Commit), a.dir)
	if err := r.writeJournal(a); err != nil {
		return "", err
	}
	poErr := r.po(ctx, &state{cur: a})
	_, rbErr := r.rollback(ctx, a)
	if err := errors.Join(poErr, rbErr); err != nil {
		return "", err
	}
	if a.brief != nil {
		if err := artifact.WriteJSON(filepath.Join(a.dir, "failure_brief.json"), a.brief); err != nil {
			return a.brief.Stage, err
		}
		return a.brief.Stage, nil
	}
	return "", nil
}

// WriteJournal writes the journal of tool for a step that changes repo's
// work tree outside an attempt (a parallel build checking out its branch
// at the end): a process killed inside the step leaves the journal, and
// the next run of tool, or `factory recover`, restores b. The caller
// removes it with repo.RemoveJournal once the step is done.
func WriteJournal(repo *gitws.Repo, tool string, b gitws.Baseline) error {
	return repo.WriteJournal(journal{Version: journalVersion, Tool: tool, PID: os.Getpid(), Baseline: b})
}
