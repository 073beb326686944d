package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/planner"
)

// Status is what `factory status` prints: where the plan came from and
// each work order's outcome, read from the branch's commits.
type Status struct {
	Repo       string `json:"repo"`
	PlanHash   string `json:"plan_hash"`
	PlanSource string `json:"plan_source"` // compiled, reused or given
	PlanDir    string `json:"plan_dir"`
	Spec       string `json:"spec,omitempty"`
	Branch     string `json:"branch"`
	BaseCommit string `json:"base_commit,omitempty"`
	BuildDir   string `json:"build_dir"`
	Planned    bool   `json:"planned"` // false while (or if) the plan is not written yet
	Complete   bool   `json:"complete"`
	// Spend is what the build's model calls spent so far, in every process.
	Spend      SpendRecord `json:"spend"`
	WorkOrders []WorkOrder `json:"work_orders"`
	// Repairs are the repairs of the plan so far; WorkOrders are those of
	// the plan the last applied one left.
	Repairs []RepairRecord `json:"repairs,omitempty"`
}

// ErrNoBuild is returned by ReadStatus for a repository no build ran in.
var ErrNoBuild = errors.New("no factory build has run in this repository")

// ReadStatus reads the status of the last build in repoDir. It takes no
// lock and changes nothing, so it works while a build runs.
func ReadStatus(ctx context.Context, repoDir string) (*Status, error) {
	repo, err := gitws.Open(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	p, err := ReadPointer(repo)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", repo.Root, ErrNoBuild)
	}
	if err != nil {
		return nil, err
	}
	st := &Status{Repo: repo.Root, PlanHash: p.PlanHash, PlanSource: p.PlanSource, PlanDir: p.PlanDir, Spec: p.Spec,
		Branch: p.Branch, BuildDir: p.BuildDir, WorkOrders: []WorkOrder{}}
	if st.Spend, err = ReadSpend(repo, p.PlanHash); err != nil {
		return nil, err
	}
	var last Summary
	if data, err := os.ReadFile(filepath.Join(p.BuildDir, "build_summary.json")); err == nil {
		_ = json.Unmarshal(data, &last) // only for the failure details
	}
	if st.PlanSource == "" {
		st.PlanSource = last.PlanSource
	}
	planPath, env := p.PlanDir, planner.Env{RepoUnknown: true}
	if st.Repairs, _, err = ReadRepairs(p.BuildDir); err != nil {
		return nil, err
	}
	if f := RepairedPlanFile(p.BuildDir, st.Repairs); f != "" {
		planPath, env.RepairIDs = f, true
	}
	raw, _, err := planner.LoadPlan(planPath)
	if err != nil {
		return st, nil // not planned yet
	}
	res := planner.Validate(ctx, raw, env)
	if res.Manifest == nil {
		return nil, fmt.Errorf("the plan in %s cannot be read; check it with 'factory validate %s'", planPath, planPath)
	}
	st.Planned = true
	passed := map[string]string{}
	if tip, exists, err := repo.BranchCommit(ctx, p.Branch); err != nil {
		return nil, err
	} else if exists {
		if st.BaseCommit, err = baseCommit(ctx, repo, p.Branch, p.PlanHash); err != nil {
			return nil, err
		}
		if passed, err = Passed(ctx, repo, tip, p.PlanHash, st.BaseCommit); err != nil {
			return nil, err
		}
	}
	st.Complete = true
	deps := Dependencies(res.Manifest)
	for j, wo := range res.Manifest.WorkOrders {
		line := WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: OutcomePending}
		if c, ok := passed[wo.ID]; ok {
			line.Outcome, line.Commit = OutcomePassed, c
		} else {
			st.Complete = false
			if last.Failed == wo.ID {
				for _, l := range last.WorkOrders {
					// Only a failure's details: whether an order passed is
					// the commits' to say, not a summary file's.
					if l.ID == wo.ID && l.Outcome == OutcomeFailed {
						line = l
						line.Title, line.Commit = wo.Title, ""
					}
				}
			}
		}
		for _, i := range deps[j] {
			line.DependsOn = append(line.DependsOn, res.Manifest.WorkOrders[i].ID)
		}
		st.WorkOrders = append(st.WorkOrders, line)
	}
	return st, nil
}
