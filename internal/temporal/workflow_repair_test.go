package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// failAt is a work order that ends FAIL at stage, with its attempt's
// failure brief as the evidence for a repair.
func failAt(stage string) func(WorkOrderInput) (WorkOrderResult, error) {
	return func(in WorkOrderInput) (WorkOrderResult, error) {
		wo := in.WorkOrder
		res := WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomeFailed, Stage: stage},
			Verdict: builder.VerdictFail, Spend: Spend{Tokens: 7},
			Failure: &planner.FailedOrder{ID: wo.ID, Title: wo.Title, Stage: stage,
				Attempts: []planner.AttemptFailure{{Attempt: 1, Stage: stage, Excerpt: "No module named tests.test_typo"}}}}
		return res, temporal.NewNonRetryableApplicationError(wo.ID+" failed", errTypeFail, nil, res)
	}
}

// fakeRepair stands in for the Repair activity: it replaces the failed
// order by WO-NNrK (K the repair's number), or gives up.
type fakeRepair struct {
	mu     sync.Mutex
	calls  []RepairInput
	giveUp string
}

func (f *fakeRepair) repair(_ context.Context, in RepairInput) (RepairResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in)
	f.mu.Unlock()
	n := len(in.Earlier) + 1
	rec := builder.RepairRecord{Repair: n, Failed: in.Failed.ID, Title: in.Failed.Title, Stage: in.Failed.Stage,
		Removed: []string{}, Added: []string{}, Revised: []string{}, Tokens: 3, Dir: "/w/repairs/" + fmt.Sprint(n)}
	res := RepairResult{Worker: "w", Spend: Spend{Tokens: 3}}
	if f.giveUp != "" {
		rec.Outcome, rec.Reason = builder.RepairGaveUp, f.giveUp
		res.Record, res.Lines = rec, []string{"build: " + rec.Describe() + "; the build stops at " + in.Failed.ID}
		return res, nil
	}
	id, _, _ := strings.Cut(in.Failed.ID, "r")
	id += fmt.Sprintf("r%d", n)
	m := &workorder.Manifest{}
	for _, wo := range in.Plan.WorkOrders {
		if wo.ID == in.Failed.ID {
			wo.ID = id
		}
		m.WorkOrders = append(m.WorkOrders, wo)
	}
	rec.Outcome, rec.Removed, rec.Added = builder.RepairApplied, []string{in.Failed.ID}, []string{id}
	res.Record, res.Manifest, res.Lines = rec, m, []string{"build: " + rec.Describe()}
	return res, nil
}

// runRepair runs the workflow with in on the fake activities.
func runRepair(t *testing.T, in BuildInput, plan, workOrder, integrate, repair any) (BuildResult, error) {
	t.Helper()
	env := new(testsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(plan, activity.RegisterOptions{Name: PlanActivityName})
	env.RegisterActivityWithOptions(workOrder, activity.RegisterOptions{Name: WorkOrderActivityName})
	env.RegisterActivityWithOptions(integrate, activity.RegisterOptions{Name: IntegrateActivityName})
	env.RegisterActivityWithOptions(repair, activity.RegisterOptions{Name: RepairActivityName})
	env.ExecuteWorkflow(WorkflowName, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res BuildResult
	if err := env.GetWorkflowError(); err != nil {
		if !details(err, &res) {
			t.Fatalf("a failed workflow without a result: %v", err)
		}
		return res, err
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// A serial build whose WO-02 fails: with repairs on, the Repair activity
// gets the plan, the failure's evidence and the branch's tip, and the
// build goes on with the repaired plan from WO-01's commit; a give-up, or
// no repairs left, ends it FAIL saying why; with repairs off (a workflow
// started before they existed) it stops at the FAIL without asking.
func TestBuildRepairs(t *testing.T) {
	type fn = func(WorkOrderInput) (WorkOrderResult, error)
	for _, tc := range []struct {
		name       string
		repair     bool
		maxRepairs int
		giveUp     string
		wo02r1     fn
		verdict    string
		repairs    int    // Repair activities
		ran        string // work orders run, in order
		outcomes   string
		line       string // a line of the build's progress
		errText    string
	}{
		{name: "applied", repair: true, maxRepairs: 2, wo02r1: pass("c2r"), verdict: builder.VerdictPass, repairs: 1,
			ran: "WO-01@base WO-02@c1 WO-02r1@c1 WO-03@c2r", outcomes: "WO-01=passed WO-02r1=passed WO-03=passed",
			line: "build h: PASS after 1 repair, 3 work orders committed on factory/h"},
		{name: "gave up", repair: true, maxRepairs: 2, giveUp: "the spec asks for a module no order may write", verdict: builder.VerdictFail, repairs: 1,
			ran: "WO-01@base WO-02@c1", outcomes: "WO-01=passed WO-02=failed WO-03=pending",
			line:    "the planner gave up: the spec asks for a module no order may write; the build stops at WO-02",
			errText: "repair 1 (WO-02 failed at acceptance_failed): the planner gave up: the spec asks for a module no order may write"},
		{name: "no repairs left", repair: true, maxRepairs: 1, wo02r1: failAt("verify_failed"), verdict: builder.VerdictFail, repairs: 1,
			ran: "WO-01@base WO-02@c1 WO-02r1@c1", outcomes: "WO-01=passed WO-02r1=failed WO-03=pending",
			line:    "build: WO-02r1 failed and no repairs are left (--max-repairs 1); repairs tried: repair 1 (WO-02 failed at acceptance_failed): removed WO-02; added WO-02r1",
			errText: "WO-02r1 failed"},
		{name: "off", maxRepairs: 2, verdict: builder.VerdictFail, ran: "WO-01@base WO-02@c1", outcomes: "WO-01=passed WO-02=failed WO-03=pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSteps{script: map[string][]fn{"WO-01": {pass("c1")}, "WO-02": {failAt("acceptance_failed")}, "WO-02r1": {tc.wo02r1}, "WO-03": {pass("c3")}}}
			rep := &fakeRepair{giveUp: tc.giveUp}
			in := BuildInput{PlanHash: "h", Branch: "factory/h", MaxAttempts: 4, Repair: tc.repair, MaxRepairs: tc.maxRepairs}
			res, err := runRepair(t, in, f.plan, f.workOrder, (&parallelSteps{}).integrate, rep.repair)
			if res.Verdict != tc.verdict || len(rep.calls) != tc.repairs || len(res.Repairs) != tc.repairs {
				t.Fatalf("verdict %s after %d repairs (%d recorded), want %s after %d (%v)", res.Verdict, len(rep.calls), len(res.Repairs), tc.verdict, tc.repairs, err)
			}
			var ran []string
			for _, c := range f.calls {
				ran = append(ran, c.WorkOrder.ID+"@"+c.Parent)
				if want := map[bool]int{true: 1}[c.WorkOrder.ID == "WO-02r1"]; c.Repair != want {
					t.Errorf("%s ran as written by repair %d, want %d", c.WorkOrder.ID, c.Repair, want)
				}
			}
			if got := strings.Join(ran, " "); got != tc.ran {
				t.Errorf("ran %s, want %s", got, tc.ran)
			}
			var outcomes []string
			for _, wo := range res.WorkOrders {
				outcomes = append(outcomes, wo.ID+"="+wo.Outcome)
			}
			if got := strings.Join(outcomes, " "); got != tc.outcomes {
				t.Errorf("outcomes %s, want %s", got, tc.outcomes)
			}
			if tc.line != "" && !slices.Contains(res.Lines, tc.line) && !strings.Contains(strings.Join(res.Lines, "\n"), tc.line) {
				t.Errorf("the progress lacks %q:\n%s", tc.line, strings.Join(res.Lines, "\n"))
			}
			if tc.errText != "" {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != builder.VerdictFail || res.Error != tc.errText {
					t.Errorf("error %v (result's %q), want FAIL: %s", err, res.Error, tc.errText)
				}
			}
			if tc.repairs == 0 {
				return
			}
			// The repair is asked with what the local builder gives it.
			c := rep.calls[0]
			if c.Tip != "c1" || c.BaseCommit != "base" || c.Failed.ID != "WO-02" || len(c.Failed.Attempts) != 1 ||
				len(c.Plan.WorkOrders) != 3 || !slices.Equal(c.Used, []string{"WO-01", "WO-02", "WO-03"}) || len(c.Earlier) != 0 || c.Spent.Tokens != 5+10+7 {
				t.Errorf("repair input %+v", c)
			}
			if wantTokens := int64(5 + 10 + 7 + 3); tc.verdict == builder.VerdictFail && tc.wo02r1 == nil && res.Tokens != wantTokens {
				t.Errorf("tokens %d, want %d (the repair's counted)", res.Tokens, wantTokens)
			}
		})
	}
}

// -j 2: WO-02 fails beside WO-01, which is integrated; the repair is asked
// at the branch's tip with WO-01 on it, and the build goes on in parallel
// with the repaired plan, WO-04 now after WO-02r1.
func TestParallelBuildRepair(t *testing.T) {
	failed := make(chan struct{})
	f := &parallelSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {func(in WorkOrderInput) (WorkOrderResult, error) {
			<-failed
			time.Sleep(200 * time.Millisecond) // WO-02's failure reaches the workflow first
			return pass("c01")(in)
		}},
		"WO-02": {func(in WorkOrderInput) (WorkOrderResult, error) {
			defer close(failed)
			return failAt("acceptance_failed")(in)
		}},
		"WO-02r1": {pass("c02r")},
		"WO-03":   {pass("c03")}, "WO-04": {pass("c04")}}}
	rep := &fakeRepair{}
	in := BuildInput{PlanHash: "h", Branch: "factory/h", MaxAttempts: 2, Jobs: 2, Repair: true, MaxRepairs: 2}
	res, err := runRepair(t, in, f.plan, f.workOrder, f.integrate, rep.repair)
	if err != nil || res.Verdict != builder.VerdictPass || len(rep.calls) != 1 {
		t.Fatalf("%v: verdict %s after %d repairs", err, res.Verdict, len(rep.calls))
	}
	if c := rep.calls[0]; c.Tip != "ic01" || c.Failed.ID != "WO-02" {
		t.Errorf("repaired at %s after %s failed, want at ic01 after WO-02", c.Tip, c.Failed.ID)
	}
	n01 := 0
	for _, c := range f.calls {
		if c.WorkOrder.ID == "WO-04" && !slices.Equal(c.Chain, []string{"c02r"}) {
			t.Errorf("WO-04 ran with chain %v, want WO-02r1's commit", c.Chain)
		}
		if c.WorkOrder.ID == "WO-01" {
			n01++
		}
	}
	if got, want := strings.Join(commitsOf(res), " "), "WO-01=ic01 WO-02r1=ic02r WO-03=ic03 WO-04=ic04"; got != want || n01 != 1 {
		t.Errorf("commits %s, want %s; WO-01 ran %d times, want 1", got, want, n01)
	}
}
