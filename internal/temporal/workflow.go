package temporal

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/factory-harness/factory/internal/builder"
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
// pushed. The workflow keeps the plan, every step's outcome and the spend,
// so a replay repeats nothing and the budget covers every step and retry.
// It ends with the verdict of a local build: PASS completes; FAIL,
// PLAN_INVALID, BUDGET and ERROR fail with a non-retryable application
// error of that type whose details are the BuildResult; a cancel ends it
// canceled with the BuildResult as details.
func Build(ctx workflow.Context, in BuildInput) (BuildResult, error) {
	w := &buildRun{in: in, st: BuildResult{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Verdict: VerdictRunning,
		RepoURL: in.RepoURL, PlanHash: in.PlanHash, Branch: in.Branch, WorkOrders: []WorkOrderResult{},
	}}
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
	for _, wo := range plan.Manifest.WorkOrders {
		r.WorkOrders = append(r.WorkOrders, WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomePending}})
	}
	parent := plan.BaseCommit
	layout := builder.PlanCacheLayout(plan.Manifest, in.MaxAttempts)
	for i, wo := range plan.Manifest.WorkOrders {
		var res WorkOrderResult
		err := workflow.ExecuteActivity(actx, WorkOrderActivityName, WorkOrderInput{
			Build: in, WorkflowID: r.WorkflowID, BaseCommit: plan.BaseCommit, Parent: parent, WorkOrder: wo, Spent: w.spent,
			CacheLayout: layout,
		}).Get(ctx, &res)
		if err != nil && !details(err, &res) {
			res.WorkOrder = r.WorkOrders[i].WorkOrder
		}
		w.spent = w.spent.add(res.Spend)
		w.st.Lines = append(w.st.Lines, res.Lines...)
		res.Lines = nil
		r.WorkOrders[i] = res
		if err != nil {
			if res.Outcome == builder.OutcomeFailed {
				r.Failed = wo.ID
			}
			return w.finish(ctx, err)
		}
		parent, r.Head = res.Commit, res.Commit
	}
	w.say("build %s: PASS, %d work orders committed on %s", in.PlanHash, len(plan.Manifest.WorkOrders), in.Branch)
	return w.finish(ctx, nil)
}

// buildRun is the workflow's state.
type buildRun struct {
	in    BuildInput
	st    BuildResult // the result so far, with the progress lines
	spent Spend
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
