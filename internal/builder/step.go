package builder

import (
	"context"
	"io"
	"path/filepath"
	"slices"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// Step runs the steps of a build one at a time, for a caller that
// schedules them itself and keeps the build's state (internal/temporal):
// the plan, then each work order on a repository the caller has checked
// out at the build branch and locked. They are the local build's own code
// paths, so progress lines, artifacts, commits and trailers are the same.
type Step struct {
	// Options as for Run: SpecPath or PlanDir, Out, the planner fields,
	// Python and Spent for LoadPlan; Run (with Lock set), Spent and
	// Progress for RunWorkOrder; SpecPath, the planner fields, Python,
	// Meter and MaxRepairs for RepairPlan. Repo and Branch are not used.
	Options
	Repo     *gitws.Repo
	PlanHash string
	// Base is the commit the plan is validated against (LoadPlan).
	Base string
	// BuildDir receives events.jsonl and one run directory per work order
	// (RunWorkOrder); Run writes them to <out>/builds/<plan hash>.
	BuildDir string
	// CacheLayout is the whole plan's (PlanCacheLayout), for the prompts of
	// RunWorkOrder, which sees one work order; nil: that order's alone.
	CacheLayout *CacheLayout
	// OrderRepair is the repair that last wrote the order RunWorkOrder
	// runs (its commit's Factory-Repair trailer); 0 for none.
	OrderRepair int
}

// PlanHash is the identity of the build o describes, as Run computes it:
// the compile hash of the planner's inputs, or the hash of the given
// plan's files. A refusal is a *RefusedError.
func PlanHash(o Options) (string, error) { return newBuilder(o).planHash() }

// Plan is the outcome of Step.LoadPlan.
type Plan struct {
	Manifest *workorder.Manifest
	Source   string // PlanCompiled, PlanReused or PlanGiven
	Dir      string
}

// LoadPlan validates the given plan, reuses the one compiled for the same
// inputs under Out, or compiles one, against the files of s.Base. An
// invalid plan is a *PlanInvalidError (its issues are printed).
func (s Step) LoadPlan(ctx context.Context) (Plan, error) {
	b := s.builder()
	err := b.planStep(ctx)
	return Plan{Manifest: b.plan, Source: b.sum.PlanSource, Dir: b.sum.PlanDir}, err
}

// RunWorkOrder runs wo as the local build does — the factory's attempts,
// then on PASS the commit with the build's message and trailers, the
// clean-up and the journal's removal — and returns its summary line and
// why its attempts stopped early, if they did. A FAIL verdict is
// ErrWorkOrderFailed; a budget stop an *llm.BudgetError; a provider's
// failure an *llm.ProviderError.
func (s Step) RunWorkOrder(ctx context.Context, wo workorder.WorkOrder) (line WorkOrder, stoppedEarly string, err error) {
	b := s.builder()
	if s.BuildDir != "" {
		b.events = filepath.Join(s.BuildDir, "events.jsonl")
	}
	// A build of this one work order, run by the local loop's runOne.
	b.plan = &workorder.Manifest{WorkOrders: []workorder.WorkOrder{wo}}
	b.sum.WorkOrders = []WorkOrder{{ID: wo.ID, Title: wo.Title, Outcome: OutcomePending}}
	b.repairOf = map[string]int{wo.ID: s.OrderRepair}
	err = b.runOne(ctx, 0)
	return b.sum.WorkOrders[0], b.sum.StoppedEarly, err
}

// RepairJob is a repair for Step.RepairPlan to ask for.
type RepairJob struct {
	Plan   *workorder.Manifest // the plan as it stands
	Failed planner.FailedOrder // the order that failed and its evidence (FailedOrder)
	// Passed maps the orders committed on the build branch to their
	// commits (Passed).
	Passed map[string]string
	// Earlier are the build's repairs so far: this one is the next.
	Earlier []RepairRecord
	Used    []string // every id the build's plans have held
}

// RepairPlan asks the planner for the repair job describes and records
// it in s.BuildDir's repairs/<N>/, as the local build does, on s.Repo
// checked out at the build branch's tip. It returns the repair's record
// and, when it was applied, the repaired plan; err is a model, budget or
// I/O error.
func (s Step) RepairPlan(ctx context.Context, job RepairJob) (RepairRecord, *workorder.Manifest, error) {
	b := s.builder()
	if s.BuildDir != "" {
		b.events = filepath.Join(s.BuildDir, "events.jsonl")
	}
	b.plan, b.used, b.repairs, b.repairOf = job.Plan, slices.Clone(job.Used), slices.Clone(job.Earlier), map[string]int{}
	rj, err := b.requestRepair(ctx, job.Failed, job.Passed)
	if err != nil {
		return RepairRecord{}, nil, err
	}
	applied, err := b.repair(ctx, rj)
	if err != nil {
		return RepairRecord{}, nil, err
	}
	rec := b.repairs[len(b.repairs)-1]
	if !applied {
		return rec, nil, nil
	}
	return rec, b.plan, nil
}

// Recheck checks commit out, detached, in s.Repo and runs wo's checks on
// it without asking the model (factory.Run.Recheck), as a parallel build
// rechecks an order replayed onto the build branch: stage is "" when
// they pass, else the stage that failed. Options.Run (with Lock set) as
// for RunWorkOrder.
func (s Step) Recheck(ctx context.Context, wo workorder.WorkOrder, commit string) (stage string, err error) {
	b := s.builder()
	if s.BuildDir != "" {
		b.events = filepath.Join(s.BuildDir, "events.jsonl")
	}
	return b.recheck(ctx, s.Repo, wo, commit)
}

// Recover restores repo after a build that was cut off in the middle of
// an attempt, as Run does before it starts; a journal another tool left
// is refused (*RefusedError). The caller holds the repository lock.
func Recover(ctx context.Context, repo *gitws.Repo, progress io.Writer) error {
	b := newBuilder(Options{Progress: progress})
	b.repo = repo
	return b.recover(ctx)
}

// ErrWorkOrderFailed is a work order that ended with a FAIL verdict
// (Step.RunWorkOrder).
var ErrWorkOrderFailed = errWorkOrderFailed

// VerdictOf is the build verdict an error of a step stands for: FAIL,
// PLAN_INVALID, BUDGET or ERROR.
func VerdictOf(err error) string { return verdictOf(err) }

func (s Step) builder() *builder {
	b := newBuilder(s.Options)
	b.repo, b.base, b.layout = s.Repo, s.Base, s.CacheLayout
	b.sum.PlanHash, b.sum.BuildDir = s.PlanHash, s.BuildDir
	return b
}
