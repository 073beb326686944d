package temporal

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/builder"
)

// A workflow's result read as a local build's summary: the work orders'
// lines, spend and failure carry over, the worker-side details do not.
func TestBuildResultSummary(t *testing.T) {
	cost := 0.25
	res := BuildResult{WorkflowID: "w", Verdict: builder.VerdictFail, RepoURL: "file:///r.git", PlanHash: "p", PlanSource: builder.PlanCompiled,
		PlanDir: "/work/plans/p", PlanWorker: "a", Branch: "factory/p", BaseCommit: "b", Head: "h1", Tokens: 300, CostUSD: &cost,
		Failed: "WO-02", Error: "WO-02 failed", Lines: []string{"x"},
		WorkOrders: []WorkOrderResult{
			{WorkOrder: builder.WorkOrder{ID: "WO-01", Outcome: builder.OutcomePassed, Commit: "h1", Attempts: 1, Tokens: 100}, Worker: "a", Verdict: builder.VerdictPass},
			{WorkOrder: builder.WorkOrder{ID: "WO-02", Outcome: builder.OutcomeFailed, Stage: "verify_failed", Attempts: 2, Tokens: 200}, Worker: "b", StoppedEarly: "identical failure"},
			{WorkOrder: builder.WorkOrder{ID: "WO-03", Outcome: builder.OutcomePending}},
		}}
	want := builder.Summary{Verdict: builder.VerdictFail, PlanHash: "p", PlanSource: builder.PlanCompiled, PlanDir: "/work/plans/p",
		Branch: "factory/p", BaseCommit: "b", Tokens: 300, CostUSD: &cost, Failed: "WO-02", StoppedEarly: "identical failure", Error: "WO-02 failed",
		WorkOrders: []builder.WorkOrder{res.WorkOrders[0].WorkOrder, res.WorkOrders[1].WorkOrder, res.WorkOrders[2].WorkOrder}}
	if diff := cmp.Diff(want, res.Summary()); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if got := (BuildResult{}).Summary().WorkOrders; got == nil {
		t.Error("no work orders: nil, want [] (as a local summary)")
	}
}

// Only a verdict on the code is final: an eval uses it instead of
// building again.
func TestFinalVerdict(t *testing.T) {
	for v, want := range map[string]bool{
		builder.VerdictPass: true, builder.VerdictFail: true, builder.VerdictPlanInvalid: true,
		builder.VerdictError: false, builder.VerdictBudget: false, VerdictCanceled: false, VerdictRunning: false, "": false,
	} {
		if got := finalVerdict(v); got != want {
			t.Errorf("finalVerdict(%q) = %v, want %v", v, got, want)
		}
	}
}
