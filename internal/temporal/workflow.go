package temporal

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// retryPolicy bounds the retries of a step that failed for a reason a
// retry may fix: a lost worker (heartbeat timeout), a push race, a
// transient provider error, a git error. The other failures are
// non-retryable application errors of these types.
var retryPolicy = temporal.RetryPolicy{
	InitialInterval:        time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        30 * time.Second,
	MaximumAttempts:        5,
	NonRetryableErrorTypes: []string{errTypeFail, errTypePlanInvalid, errTypeBudget, errTypeProvider, errTypeRefused},
}

// Build is the workflow: the Plan activity once, then one WorkOrder
// activity per work order, in order, each on the commit the previous one
// pushed — or, with in.Jobs > 1, independent ones at once (parallel). When
// an order ends FAIL and repairs remain (in.Repair), a Repair activity
// asks the planner for a repaired plan, and the orders of that plan not
// yet on the branch run as before. The workflow keeps the plan, every
// step's outcome and the spend, so a replay repeats nothing and the
// budget covers every step and retry.
// It ends with the verdict of a local build: PASS completes; FAIL,
// PLAN_INVALID, BUDGET and ERROR fail with a non-retryable application
// error of that type whose details are the BuildResult; a cancel ends it
// canceled with the BuildResult as details.
func Build(ctx workflow.Context, in BuildInput) (BuildResult, error) {
	w := &buildRun{in: in, st: BuildResult{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Verdict: VerdictRunning,
		RepoURL: in.RepoURL, PlanHash: in.PlanHash, Branch: in.Branch, WorkOrders: []WorkOrderResult{},
	}, repairOf: map[string]int{}}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (BuildResult, error) { return w.st, nil }); err != nil {
		return w.st, err
	}
	hb := in.HeartbeatTimeout
	if hb <= 0 {
		hb = DefaultHeartbeatTimeout
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    hb,
		WaitForCancellation: true, // a canceled work order is rolled back before the workflow ends
		RetryPolicy:         &retryPolicy,
	})
	var plan PlanResult
	err := workflow.ExecuteActivity(actx, PlanActivityName, PlanInput{Build: in, WorkflowID: w.st.WorkflowID, Spent: w.spent}).Get(ctx, &plan)
	if err != nil {
		details(err, &plan)
		w.addPlan(plan)
		return w.finish(ctx, err)
	}
	w.addPlan(plan)
	r := &w.st
	r.BaseCommit, r.PlanSource, r.PlanDir, r.PlanWorker = plan.BaseCommit, plan.Source, plan.Dir, plan.Worker
	w.plan = plan.Manifest
	for _, wo := range plan.Manifest.WorkOrders {
		r.WorkOrders = append(r.WorkOrders, WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomePending}})
		w.used = append(w.used, wo.ID)
	}
	passed, tip := plan.Passed, plan.BranchTip
	for {
		if in.Jobs > 1 {
			err = w.parallel(ctx, actx, plan.BaseCommit, passed, tip)
		} else {
			err = w.serial(ctx, actx, plan.BaseCommit)
		}
		if err == nil {
			w.say("build %s: PASS%s, %d work orders committed on %s", in.PlanHash, builder.PassedAfter(r.Repairs), len(w.plan.WorkOrders), in.Branch)
			return w.finish(ctx, nil)
		}
		if !w.mayRepair(ctx, err) {
			return w.finish(ctx, err)
		}
		if err := w.repair(ctx, actx, plan.BaseCommit); err != nil {
			return w.finish(ctx, err)
		}
		// The orders on the branch stay; a parallel build goes on from
		// its tip.
		passed, tip = map[string]string{}, r.Head
		for _, l := range r.WorkOrders {
			if l.Outcome == builder.OutcomePassed {
				passed[l.ID] = l.Commit
			}
		}
	}
}

// serial runs the orders of the plan not yet on the branch one after the
// other, each on the commit the previous one pushed, stopping at the
// first that does not pass.
func (w *buildRun) serial(ctx, actx workflow.Context, base string) error {
	r := &w.st
	layout := builder.PlanCacheLayout(w.plan, w.in.MaxAttempts)
	parent := cmp.Or(r.Head, base)
	for i, wo := range w.plan.WorkOrders {
		if r.WorkOrders[i].Outcome == builder.OutcomePassed {
			continue
		}
		res, err := w.orderDone(ctx, i, workflow.ExecuteActivity(actx, WorkOrderActivityName, WorkOrderInput{
			Build: w.in, WorkflowID: r.WorkflowID, BaseCommit: base, Parent: parent, WorkOrder: wo, Spent: w.spent,
			CacheLayout: layout, Repair: w.repairOf[wo.ID],
		}))
		if err != nil {
			if res.Outcome == builder.OutcomeFailed {
				r.Failed = wo.ID
			}
			return err
		}
		parent, r.Head = res.Commit, res.Commit
	}
	return nil
}

// mayRepair reports whether err, which ended the orders' run, is a FAIL
// to repair now, and says so when no repairs are left.
func (w *buildRun) mayRepair(ctx workflow.Context, err error) bool {
	var app *temporal.ApplicationError
	if !w.in.Repair || ctx.Err() != nil || w.st.Failed == "" || !errors.As(err, &app) || app.Type() != errTypeFail {
		return false
	}
	if len(w.st.Repairs) >= w.in.MaxRepairs {
		w.say("%s", builder.NoRepairsLeft(w.st.Failed, w.in.MaxRepairs, w.st.Repairs))
		return false
	}
	return true
}

// repair runs the Repair activity for the failed order and goes on with
// the repaired plan: the orders it kept keep their lines, the others are
// pending. A give-up or a rejected repair is the build's FAIL, with the
// repair's account as its error.
func (w *buildRun) repair(ctx, actx workflow.Context, base string) error {
	r := &w.st
	j := slices.IndexFunc(r.WorkOrders, func(l WorkOrderResult) bool { return l.ID == r.Failed })
	line := r.WorkOrders[j]
	failed := planner.FailedOrder{ID: line.ID, Title: line.Title, Stage: line.Stage, StoppedEarly: line.StoppedEarly, Error: line.WorkOrder.Error, Attempts: []planner.AttemptFailure{}}
	if line.Failure != nil {
		failed = *line.Failure
	}
	var res RepairResult
	err := workflow.ExecuteActivity(actx, RepairActivityName, RepairInput{
		Build: w.in, WorkflowID: r.WorkflowID, BaseCommit: base, Tip: r.Head, Plan: w.plan, Failed: failed,
		Earlier: r.Repairs, Used: w.used, Spent: w.spent,
	}).Get(ctx, &res)
	if err != nil {
		details(err, &res)
	}
	w.spent = w.spent.add(res.Spend)
	r.Lines = append(r.Lines, res.Lines...)
	if err != nil {
		return err
	}
	rec := res.Record
	r.Repairs = append(r.Repairs, rec)
	if res.Manifest == nil {
		return temporal.NewNonRetryableApplicationError(rec.Describe(), errTypeFail, nil)
	}
	prev := map[string]WorkOrderResult{}
	for _, l := range r.WorkOrders {
		prev[l.ID] = l
	}
	lines := []WorkOrderResult{}
	for _, wo := range res.Manifest.WorkOrders {
		l, ok := prev[wo.ID]
		if !ok || l.Outcome != builder.OutcomePassed {
			l = WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomePending}}
		}
		lines = append(lines, l)
		if !slices.Contains(w.used, wo.ID) {
			w.used = append(w.used, wo.ID)
		}
	}
	for _, id := range slices.Concat(rec.Added, rec.Revised) {
		w.repairOf[id] = rec.Repair
	}
	w.plan, r.WorkOrders, r.Failed = res.Manifest, lines, ""
	return nil
}

// parallel runs the work orders of a build with Jobs > 1 as a local
// parallel build does, with its rules (builder.Dependencies, ToStart,
// NextIntegration, Block, BaseChain): each WorkOrder activity as soon as
// the orders it depends on have passed, at most Jobs at once, on whichever
// workers take them, from the base with its dependencies' commits
// replayed; and one Integrate activity at a time, in plan order, which
// puts a passed order onto the branch (replayed onto the tip and
// rechecked when it ran elsewhere) or asks for it to run again from the
// tip. Only the workflow moves the branch, one push at a time. Every
// decision is made here from the states of completed activities, as
// Temporal's history gives them, so a replay makes the same ones. When an
// order fails, no new one starts; the running ones finish, and the passed
// ones whose dependencies passed are integrated. The error is the first
// failure in plan order that is not a FAIL, else the first FAIL.
func (w *buildRun) parallel(ctx, actx workflow.Context, base string, passed map[string]string, tip string) error {
	r, wos := &w.st, w.plan.WorkOrders
	deps := builder.Dependencies(w.plan)
	layout := builder.PlanCacheLayout(w.plan, w.in.MaxAttempts)
	st := make([]builder.OrderState, len(wos))
	// commits are each order's latest: its own, at its orderRef (what the
	// orders depending on it start from, as in a local build), or, for an
	// order an earlier workflow integrated, the branch's.
	commits := make([]string, len(wos))
	chains := make([][]string, len(wos))
	errs := make([]error, len(wos))
	for j, wo := range wos {
		if c, ok := passed[wo.ID]; ok {
			st[j], commits[j] = builder.StateIntegrated, c
			if r.WorkOrders[j].Outcome != builder.OutcomePassed { // not by this workflow
				r.WorkOrders[j] = WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomePassed, Commit: c},
					Verdict: builder.VerdictPass, Reused: true}
			}
		}
	}
	r.Head = tip
	// chainOf are the commits order j starts from, on the base.
	chainOf := func(j int) []string {
		cs := []string{}
		for _, i := range builder.BaseChain(deps, j) {
			cs = append(cs, commits[i])
		}
		return cs
	}
	stopping := false // an order failed: none starts any more
	fail := func(j int, err error) {
		st[j], errs[j], stopping = builder.StateFailed, err, true
	}
	sel := workflow.NewSelector(ctx)
	// start runs order j from parent with chain replayed onto it; a nil
	// chain runs it again from the branch's tip, parent.
	start := func(j int, parent string, chain []string) {
		st[j], chains[j] = builder.StateRunning, chain
		f := workflow.ExecuteActivity(actx, WorkOrderActivityName, WorkOrderInput{
			Build: w.in, WorkflowID: r.WorkflowID, BaseCommit: base, Parent: parent, WorkOrder: wos[j], Spent: w.spent,
			CacheLayout: layout, Parallel: true, Chain: chain, Repair: w.repairOf[wos[j].ID],
		})
		sel.AddFuture(f, func(f workflow.Future) {
			res, err := w.orderDone(ctx, j, f)
			if err != nil {
				fail(j, err)
				builder.Block(deps, st, j)
				return
			}
			st[j], commits[j] = builder.StatePassed, res.Commit
		})
	}
	integrate := func(j int) {
		id, onto := wos[j].ID, cmp.Or(tip, base)
		if chains[j] != nil && !slices.Equal(chains[j], chainOf(j)) {
			w.say("%s: a work order it depends on ran again since it started; running it again from the branch's tip %s", id, gitws.ShortHash(onto))
			start(j, onto, nil)
			return
		}
		st[j] = builder.StateIntegrating
		f := workflow.ExecuteActivity(actx, IntegrateActivityName, IntegrateInput{
			Build: w.in, WorkflowID: r.WorkflowID, BaseCommit: base, WorkOrder: wos[j], Commit: commits[j], Tip: tip,
		})
		sel.AddFuture(f, func(f workflow.Future) {
			var res IntegrateResult
			err := f.Get(ctx, &res)
			w.st.Lines = append(w.st.Lines, res.Lines...)
			switch {
			case err != nil:
				fail(j, err)
				r.WorkOrders[j].Outcome, r.WorkOrders[j].Commit = builder.OutcomeFailed, ""
			case res.Rerun != "":
				w.say("%s: %s; running it again from the branch's tip %s", id, res.Rerun, gitws.ShortHash(onto))
				start(j, onto, nil)
			default:
				st[j], tip = builder.StateIntegrated, res.Commit
				r.WorkOrders[j].Commit, r.Head = res.Commit, res.Commit
			}
		})
	}
	w.say("build %s: up to %d work orders at a time, on any workers, integrated in plan order", w.in.PlanHash, w.in.Jobs)
	for {
		if ctx.Err() != nil {
			stopping = true
		}
		if !slices.Contains(st, builder.StateIntegrating) {
			if j := builder.NextIntegration(deps, st, stopping); j >= 0 {
				integrate(j)
			}
		}
		for _, j := range builder.ToStart(deps, st, w.in.Jobs, stopping) {
			start(j, base, chainOf(j))
		}
		if !slices.ContainsFunc(st, func(s builder.OrderState) bool { return s == builder.StateRunning || s == builder.StateIntegrating }) {
			break
		}
		sel.Select(ctx)
	}
	for j := range wos {
		if st[j] == builder.StatePassed { // not integrated: an earlier integration failed
			r.WorkOrders[j].Outcome, r.WorkOrders[j].Commit = builder.OutcomePending, ""
		}
	}
	var first error
	for j, err := range errs {
		var app *temporal.ApplicationError
		switch {
		case err == nil:
			continue
		case !errors.As(err, &app) || app.Type() != errTypeFail:
			return err
		case first == nil:
			first, r.Failed = err, wos[j].ID
		}
	}
	return first
}

// buildRun is the workflow's state.
type buildRun struct {
	in    BuildInput
	st    BuildResult // the result so far, with the progress lines
	spent Spend
	plan  *workorder.Manifest // the first, or the last repair's
	// used are the ids every plan of the build has held; repairOf the
	// repair that last wrote each order (its Factory-Repair trailer).
	used     []string
	repairOf map[string]int
}

// orderDone takes the result of work order j's activity f and folds it
// into the build: its spending, its log lines and its line of the result.
func (w *buildRun) orderDone(ctx workflow.Context, j int, f workflow.Future) (WorkOrderResult, error) {
	var res WorkOrderResult
	err := f.Get(ctx, &res)
	if err != nil && !details(err, &res) {
		res.WorkOrder = w.st.WorkOrders[j].WorkOrder
	}
	w.spent = w.spent.add(res.Spend)
	w.st.Lines = append(w.st.Lines, res.Lines...)
	res.Lines = nil
	w.st.WorkOrders[j] = res
	return res, err
}

func (w *buildRun) say(format string, args ...any) {
	w.st.Lines = append(w.st.Lines, fmt.Sprintf(format, args...))
}

func (w *buildRun) addPlan(p PlanResult) {
	w.spent = w.spent.add(p.Spend)
	w.st.Lines = append(w.st.Lines, p.Lines...)
}

// finish sets the verdict from err (nil: PASS) and ends the workflow.
func (w *buildRun) finish(ctx workflow.Context, err error) (BuildResult, error) {
	r := &w.st
	r.Tokens, r.CostUSD = w.spent.Tokens, w.spent.cost()
	r.InputTokens, r.CachedInputTokens, r.CacheWriteTokens = w.spent.InputTokens, w.spent.CachedInputTokens, w.spent.CacheWriteTokens
	var canceled *temporal.CanceledError
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		r.Verdict = builder.VerdictPass
		return *r, nil
	case errors.As(err, &canceled) || ctx.Err() != nil:
		r.Verdict, r.Error = VerdictCanceled, "canceled"
		w.say("build %s: canceled; the work orders committed so far stay on %s", w.in.PlanHash, w.in.Branch)
		return *r, temporal.NewCanceledError(*r)
	case errors.As(err, &app) && (app.Type() == errTypeFail || app.Type() == errTypePlanInvalid || app.Type() == errTypeBudget):
		r.Verdict, r.Error = app.Type(), app.Message()
	default:
		r.Verdict, r.Error = builder.VerdictError, cause(err)
	}
	if r.Verdict != builder.VerdictFail {
		w.say("build %s: %s: %s", w.in.PlanHash, r.Verdict, r.Error)
	}
	return *r, temporal.NewNonRetryableApplicationError(r.Error, r.Verdict, nil, *r)
}

// details decodes the details of an activity's application error into v.
func details(err error, v any) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.HasDetails() && app.Details(v) == nil
}

// cause is the innermost message of an activity's failure: what failed,
// without Temporal's "activity error (type: ..., scheduledEventID: ...)"
// wrapping.
func cause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "a step timed out: " + timeout.Error()
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
