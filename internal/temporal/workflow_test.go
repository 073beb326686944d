package temporal

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/workorder"
)

// fakeSteps stand in for the activities: the plan has three work orders,
// and each work order's outcomes come from a script, in order.
type fakeSteps struct {
	mu     sync.Mutex
	script map[string][]func(WorkOrderInput) (WorkOrderResult, error)
	calls  []WorkOrderInput
}

func (f *fakeSteps) plan(_ context.Context, in PlanInput) (PlanResult, error) {
	m := &workorder.Manifest{}
	for _, id := range []string{"WO-01", "WO-02", "WO-03"} {
		m.WorkOrders = append(m.WorkOrders, workorder.WorkOrder{ID: id, Title: "t " + id,
			ContextFiles: []string{"docs/guide.md", "calc.py"}, AllowedFiles: []string{strings.ToLower(id) + ".py"}})
	}
	m.WorkOrders[0].AllowedFiles = append(m.WorkOrders[0].AllowedFiles, "calc.py")
	return PlanResult{Manifest: m, BaseCommit: "base", Source: builder.PlanGiven, Spend: Spend{Tokens: 5}, Lines: []string{"plan: 3 work orders"}}, nil
}

func (f *fakeSteps) workOrder(_ context.Context, in WorkOrderInput) (WorkOrderResult, error) {
	f.mu.Lock()
	n := 0
	for _, c := range f.calls {
		if c.WorkOrder.ID == in.WorkOrder.ID {
			n++
		}
	}
	f.calls = append(f.calls, in)
	steps := f.script[in.WorkOrder.ID]
	f.mu.Unlock()
	return steps[min(n, len(steps)-1)](in)
}

func pass(commit string) func(WorkOrderInput) (WorkOrderResult, error) {
	return func(in WorkOrderInput) (WorkOrderResult, error) {
		return WorkOrderResult{WorkOrder: builder.WorkOrder{ID: in.WorkOrder.ID, Outcome: builder.OutcomePassed, Commit: commit},
			Verdict: builder.VerdictPass, Spend: Spend{Tokens: 10, CostUSD: 0.5}, Lines: []string{in.WorkOrder.ID + ": PASS"}}, nil
	}
}

func run(t *testing.T, f *fakeSteps) (BuildResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(f.plan, activity.RegisterOptions{Name: PlanActivityName})
	env.RegisterActivityWithOptions(f.workOrder, activity.RegisterOptions{Name: WorkOrderActivityName})
	env.ExecuteWorkflow(WorkflowName, BuildInput{PlanHash: "h", Branch: "factory/h", MaxAttempts: 4})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res BuildResult
	err := env.GetWorkflowError()
	if err == nil {
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res, nil
	}
	if !details(err, &res) {
		t.Fatalf("a failed workflow without a result: %v", err)
	}
	return res, err
}

// Each work order starts from the previous one's commit with the spend
// so far; the result sums every step.
func TestBuildPasses(t *testing.T) {
	f := &fakeSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {pass("c1")}, "WO-02": {pass("c2")}, "WO-03": {pass("c3")}}}
	res, err := run(t, f)
	if err != nil || res.Verdict != builder.VerdictPass || res.Head != "c3" || res.Tokens != 35 || res.CostUSD == nil || *res.CostUSD != 1.5 {
		t.Fatalf("%v: %+v", err, res)
	}
	parents := []string{}
	for _, c := range f.calls {
		parents = append(parents, c.Parent)
	}
	if got := strings.Join(parents, " "); got != "base c1 c2" {
		t.Errorf("parents %s", got)
	}
	if f.calls[2].Spent.Tokens != 25 {
		t.Errorf("WO-03 was told %d tokens were spent, want 25", f.calls[2].Spent.Tokens)
	}
	// Every work order's prompt is laid out from the whole plan, as in a
	// local build: 3 orders × 4 attempts is a long build.
	want := builder.CacheLayout{Shared: []string{"calc.py", "docs/guide.md"}, Stable: []string{"docs/guide.md"}, Long: true}
	for _, c := range f.calls {
		if diff := cmp.Diff(want, c.CacheLayout); diff != "" {
			t.Errorf("%s: cache layout (-want +got):\n%s", c.WorkOrder.ID, diff)
		}
	}
	if want := "plan: 3 work orders\nWO-01: PASS\nWO-02: PASS\nWO-03: PASS\nbuild h: PASS, 3 work orders committed on factory/h"; strings.Join(res.Lines, "\n") != want {
		t.Errorf("lines:\n%s", strings.Join(res.Lines, "\n"))
	}
}

// A FAIL, a budget stop and a final provider error end the build with
// their verdict at once; a retryable failure is retried.
func TestBuildOutcomes(t *testing.T) {
	final := func(typ, verdict string) func(WorkOrderInput) (WorkOrderResult, error) {
		return func(in WorkOrderInput) (WorkOrderResult, error) {
			res := WorkOrderResult{WorkOrder: builder.WorkOrder{ID: in.WorkOrder.ID, Outcome: builder.OutcomeFailed}, Verdict: verdict, Spend: Spend{Tokens: 7}}
			return res, temporal.NewNonRetryableApplicationError("it ended", typ, nil, res)
		}
	}
	flaky := func(WorkOrderInput) (WorkOrderResult, error) { return WorkOrderResult{}, errors.New("push race") }
	for _, tc := range []struct {
		name, verdict string
		wo02          []func(WorkOrderInput) (WorkOrderResult, error)
		calls         int
	}{
		{"fail", builder.VerdictFail, []func(WorkOrderInput) (WorkOrderResult, error){final(errTypeFail, builder.VerdictFail)}, 2},
		{"budget", builder.VerdictBudget, []func(WorkOrderInput) (WorkOrderResult, error){final(errTypeBudget, builder.VerdictBudget)}, 2},
		{"provider", builder.VerdictError, []func(WorkOrderInput) (WorkOrderResult, error){final(errTypeProvider, builder.VerdictError)}, 2},
		{"retried", builder.VerdictPass, []func(WorkOrderInput) (WorkOrderResult, error){flaky, pass("c2")}, 4},
		{"retries run out", builder.VerdictError, []func(WorkOrderInput) (WorkOrderResult, error){flaky}, 1 + int(retryPolicy.MaximumAttempts)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
				"WO-01": {pass("c1")}, "WO-02": tc.wo02, "WO-03": {pass("c3")}}}
			res, err := run(t, f)
			if res.Verdict != tc.verdict || len(f.calls) != tc.calls {
				t.Fatalf("verdict %s after %d calls, want %s after %d (%v)", res.Verdict, len(f.calls), tc.verdict, tc.calls, err)
			}
			if tc.verdict == builder.VerdictPass {
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != tc.verdict {
				t.Errorf("workflow error %v, want an application error of type %s", err, tc.verdict)
			}
			if res.WorkOrders[2].Outcome != builder.OutcomePending || res.WorkOrders[0].Commit != "c1" {
				t.Errorf("work orders %+v", res.WorkOrders)
			}
		})
	}
}

func TestWorkflowID(t *testing.T) {
	in := BuildInput{RepoURL: "file:///r.git", Base: "main", Branch: "factory/h", PlanHash: "h"}
	same := in
	same.Model, same.MaxCostUSD = "other", 3 // settings are not the build's identity
	other := in
	other.Base = "dev"
	if WorkflowID(in) != WorkflowID(same) || WorkflowID(in) == WorkflowID(other) {
		t.Errorf("ids %s %s %s", WorkflowID(in), WorkflowID(same), WorkflowID(other))
	}
}

func TestLineLog(t *testing.T) {
	var tee strings.Builder
	l := &lineLog{tee: &tee}
	for _, w := range []string{"a\nb", "c\n", "\n", "d"} {
		l.Write([]byte(w))
	}
	if got := strings.Join(l.Lines(), "|"); got != "a|bc|" || tee.String() != "a\nbc\n\nd" {
		t.Errorf("lines %q, tee %q", got, tee.String())
	}
}
