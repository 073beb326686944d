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
	"github.com/factory-harness/factory/internal/workorder"
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
	facts, err := readStatusFacts(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	return facts.status(), nil
}

// statusFacts are what ReadStatus reads: the build pointer and spend
// record, the build directory's summary and repairs, the plan and the
// branch's commits. status merges them, reading nothing.
type statusFacts struct {
	root    string
	pointer Pointer
	spend   SpendRecord
	summary []byte // build_summary.json; nil when it cannot be read
	repairs []RepairRecord
	// plan is the validated plan (the last applied repair's); nil when
	// none is written yet.
	plan *workorder.Manifest
	// base is the build's base commit and passed the commit that carries
	// each passed order's trailers, when the branch exists.
	base   string
	passed map[string]string
}

// readStatusFacts reads what ReadStatus needs: files and git.
func readStatusFacts(ctx context.Context, repoDir string) (*statusFacts, error) {
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
	f := &statusFacts{root: repo.Root, pointer: p}
	if f.spend, err = ReadSpend(repo, p.PlanHash); err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(filepath.Join(p.BuildDir, "build_summary.json")); err == nil {
		f.summary = data
	}
	planPath, env := p.PlanDir, planner.Env{RepoUnknown: true}
	if f.repairs, _, err = ReadRepairs(p.BuildDir); err != nil {
		return nil, err
	}
	if file := RepairedPlanFile(p.BuildDir, f.repairs); file != "" {
		planPath, env.RepairIDs = file, true
	}
	raw, _, err := planner.LoadPlan(planPath)
	if err != nil {
		return f, nil // not planned yet
	}
	res := planner.Validate(ctx, raw, env)
	if res.Manifest == nil {
		return nil, fmt.Errorf("the plan in %s cannot be read; check it with 'factory validate %s'", planPath, planPath)
	}
	f.plan, f.passed = res.Manifest, map[string]string{}
	if tip, exists, err := repo.BranchCommit(ctx, p.Branch); err != nil {
		return nil, err
	} else if exists {
		if f.base, err = baseCommit(ctx, repo, p.Branch, p.PlanHash); err != nil {
			return nil, err
		}
		if f.passed, err = Passed(ctx, repo, tip, p.PlanHash, f.base); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// status merges the facts into a Status. Whether an order passed is the
// commits' to say; the summary only adds a failed order's details (and the
// plan's source when the pointer has none), whatever it holds.
func (f *statusFacts) status() *Status {
	p := f.pointer
	st := &Status{Repo: f.root, PlanHash: p.PlanHash, PlanSource: p.PlanSource, PlanDir: p.PlanDir, Spec: p.Spec,
		Branch: p.Branch, BuildDir: p.BuildDir, Spend: f.spend, Repairs: f.repairs, WorkOrders: []WorkOrder{}}
	var last Summary
	_ = json.Unmarshal(f.summary, &last) // only for the failure details
	if st.PlanSource == "" {
		st.PlanSource = last.PlanSource
	}
	if f.plan == nil {
		return st // not planned yet
	}
	st.Planned, st.BaseCommit, st.Complete = true, f.base, true
	deps := Dependencies(f.plan)
	for j, wo := range f.plan.WorkOrders {
		line := WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: OutcomePending}
		if c, ok := f.passed[wo.ID]; ok {
			line.Outcome, line.Commit = OutcomePassed, c
		} else {
			st.Complete = false
			if last.Failed == wo.ID {
				for _, l := range last.WorkOrders {
					// Only a failure's details: whether an order passed is
					// the commits' to say, not a summary file's; what it
					// depends on is the plan's.
					if l.ID == wo.ID && l.Outcome == OutcomeFailed {
						line = l
						line.Title, line.Commit, line.DependsOn = wo.Title, "", nil
					}
				}
			}
		}
		for _, i := range deps[j] {
			line.DependsOn = append(line.DependsOn, f.plan.WorkOrders[i].ID)
		}
		st.WorkOrders = append(st.WorkOrders, line)
	}
	return st
}
