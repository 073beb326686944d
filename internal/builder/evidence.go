package builder

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
)

// Check is one command that checked a work order, and how it ended.
type Check struct {
	Kind     string   `json:"kind"` // verify or acceptance
	Command  []string `json:"command"`
	ExitCode int      `json:"exit_code"`
	TimedOut bool     `json:"timed_out,omitempty"`
}

// Evidence returns, for each passed work order of st, the commands of the
// attempt that passed, read from the run its commit's Factory-Run-Id
// trailer names. An order whose run artifacts are not here (built on
// another machine, or --out elsewhere) has none.
func Evidence(ctx context.Context, repo *gitws.Repo, st *Status) (map[string][]Check, error) {
	out := map[string][]Check{}
	runs := map[string]string{} // commit → run id
	tip, ok, err := repo.BranchCommit(ctx, st.Branch)
	if err != nil || !ok {
		return out, err
	}
	commits, err := repo.Log(ctx, tip, 0)
	if err != nil {
		return nil, err
	}
	for _, c := range commits {
		if c.Hash == st.BaseCommit {
			break
		}
		runs[c.Hash] = c.Trailers[TrailerRunID]
	}
	for _, wo := range st.WorkOrders {
		run := runs[wo.Commit]
		if wo.Outcome != OutcomePassed || run == "" || run != filepath.Base(run) || wo.ID != filepath.Base(wo.ID) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(st.BuildDir, wo.ID, run, "run_summary.json"))
		if err != nil {
			continue
		}
		var sum factory.RunSummary
		if json.Unmarshal(data, &sum) != nil || sum.Verdict != factory.VerdictPass || len(sum.Attempts) == 0 {
			continue
		}
		last := sum.Attempts[len(sum.Attempts)-1]
		for _, set := range []struct {
			kind string
			cmds []factory.CmdResult
		}{{"verify", last.Verify}, {"acceptance", last.Acceptance}} {
			for _, c := range set.cmds {
				out[wo.ID] = append(out[wo.ID], Check{Kind: set.kind, Command: c.Command, ExitCode: c.ExitCode, TimedOut: c.TimedOut})
			}
		}
	}
	return out, nil
}
