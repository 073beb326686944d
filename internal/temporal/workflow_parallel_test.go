package temporal

import (
	"context"
	"errors"
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
	"github.com/factory-harness/factory/internal/workorder"
)

// parallelSteps stand in for the activities of a parallel build of two
// independent chains: WO-01 → WO-03 (package a) and WO-02 → WO-04
// (package b). Each work order's outcomes come from a script, in order;
// an integration puts the order's commit on the branch as "i"+commit,
// unless rerun names the order (once).
type parallelSteps struct {
	mu      sync.Mutex
	script  map[string][]func(WorkOrderInput) (WorkOrderResult, error)
	calls   []WorkOrderInput
	merges  []IntegrateInput
	rerun   map[string]bool
	block   map[string]bool // these run until they are canceled
	running int
	most    int // work orders running at once, at most
}

func (f *parallelSteps) plan(_ context.Context, in PlanInput) (PlanResult, error) {
	m := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{
		{ID: "WO-01", Title: "a one", AllowedFiles: []string{"a/one.py"}},
		{ID: "WO-02", Title: "b one", AllowedFiles: []string{"b/one.py"}},
		{ID: "WO-03", Title: "a two", AllowedFiles: []string{"a/two.py"}, ContextFiles: []string{"a/one.py"}},
		{ID: "WO-04", Title: "b two", AllowedFiles: []string{"b/two.py"}, ContextFiles: []string{"b/one.py"}},
	}}
	return PlanResult{Manifest: m, BaseCommit: "base", Source: builder.PlanGiven}, nil
}

func (f *parallelSteps) workOrder(ctx context.Context, in WorkOrderInput) (WorkOrderResult, error) {
	if f.block[in.WorkOrder.ID] {
		f.mu.Lock()
		f.calls = append(f.calls, in)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return WorkOrderResult{}, temporal.NewCanceledError()
		case <-time.After(10 * time.Second):
			return WorkOrderResult{}, errors.New(in.WorkOrder.ID + " was not canceled")
		}
	}
	f.mu.Lock()
	n := 0
	for _, c := range f.calls {
		if c.WorkOrder.ID == in.WorkOrder.ID {
			n++
		}
	}
	f.calls = append(f.calls, in)
	f.running++
	f.most = max(f.most, f.running)
	steps := f.script[in.WorkOrder.ID]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()
	return steps[min(n, len(steps)-1)](in)
}

func (f *parallelSteps) integrate(_ context.Context, in IntegrateInput) (IntegrateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.merges = append(f.merges, in)
	if f.rerun[in.WorkOrder.ID] {
		delete(f.rerun, in.WorkOrder.ID)
		return IntegrateResult{Rerun: "its checks fail (acceptance) on the branch with the earlier work orders"}, nil
	}
	return IntegrateResult{Commit: "i" + in.Commit}, nil
}

func (f *parallelSteps) run(t *testing.T, jobs int) (BuildResult, error) {
	t.Helper()
	return f.runIn(t, new(testsuite.WorkflowTestSuite).NewTestWorkflowEnvironment(), jobs)
}

func (f *parallelSteps) runIn(t *testing.T, env *testsuite.TestWorkflowEnvironment, jobs int) (BuildResult, error) {
	t.Helper()
	env.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(f.plan, activity.RegisterOptions{Name: PlanActivityName})
	env.RegisterActivityWithOptions(f.workOrder, activity.RegisterOptions{Name: WorkOrderActivityName})
	env.RegisterActivityWithOptions(f.integrate, activity.RegisterOptions{Name: IntegrateActivityName})
	env.ExecuteWorkflow(WorkflowName, BuildInput{PlanHash: "h", Branch: "factory/h", MaxAttempts: 2, Jobs: jobs})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res BuildResult
	if err := env.GetWorkflowError(); err != nil {
		var canceled *temporal.CanceledError
		if !details(err, &res) && !(errors.As(err, &canceled) && canceled.HasDetails() && canceled.Details(&res) == nil) {
			t.Fatalf("a failed workflow without a result: %v", err)
		}
		return res, err
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// together makes the work orders it is given to wait for each other to
// start before they pass: they only pass when they run at the same time.
func together(ids ...string) map[string]func(WorkOrderInput) (WorkOrderResult, error) {
	var wg sync.WaitGroup
	wg.Add(len(ids))
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	out := map[string]func(WorkOrderInput) (WorkOrderResult, error){}
	for _, id := range ids {
		out[id] = func(in WorkOrderInput) (WorkOrderResult, error) {
			wg.Done()
			select {
			case <-all:
				return pass("c" + strings.TrimPrefix(id, "WO-"))(in)
			case <-time.After(10 * time.Second):
				return WorkOrderResult{}, temporal.NewNonRetryableApplicationError(id+" ran alone", "TEST", nil)
			}
		}
	}
	return out
}

func commitsOf(res BuildResult) []string {
	var out []string
	for _, wo := range res.WorkOrders {
		out = append(out, wo.ID+"="+wo.Commit)
	}
	return out
}

// With -j 2 the first orders of the two chains run at the same time,
// each chain's second order starts from its dependency's commit on the
// base, and the branch gets every order in plan order, each integration
// onto the previous one's commit.
func TestParallelBuildRunsIndependentOrdersTogether(t *testing.T) {
	first := together("WO-01", "WO-02")
	f := &parallelSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {first["WO-01"]}, "WO-02": {first["WO-02"]}, "WO-03": {pass("c03")}, "WO-04": {pass("c04")}}}
	res, err := f.run(t, 2)
	if err != nil || res.Verdict != builder.VerdictPass || res.Head != "ic04" {
		t.Fatalf("%v: %+v", err, res)
	}
	if f.most != 2 {
		t.Errorf("at most %d work orders ran at once, want 2", f.most)
	}
	for _, c := range f.calls {
		want := map[string][]string{"WO-01": {}, "WO-02": {}, "WO-03": {"c01"}, "WO-04": {"c02"}}[c.WorkOrder.ID]
		if !c.Parallel || c.Parent != "base" || !slices.Equal(c.Chain, want) {
			t.Errorf("%s ran from %s with chain %v (parallel %v), want base with %v", c.WorkOrder.ID, c.Parent, c.Chain, c.Parallel, want)
		}
	}
	var merged []string
	for _, m := range f.merges {
		merged = append(merged, m.WorkOrder.ID+":"+m.Commit+"@"+m.Tip)
	}
	if got, want := strings.Join(merged, " "), "WO-01:c01@ WO-02:c02@ic01 WO-03:c03@ic02 WO-04:c04@ic03"; got != want {
		t.Errorf("integrations %s, want %s", got, want)
	}
	if got, want := strings.Join(commitsOf(res), " "), "WO-01=ic01 WO-02=ic02 WO-03=ic03 WO-04=ic04"; got != want {
		t.Errorf("commits %s, want %s", got, want)
	}
}

// Without Jobs (a workflow started before it existed) the build is
// serial: no Integrate step, each order on the previous one's commit.
func TestParallelBuildWithoutJobsIsSerial(t *testing.T) {
	f := &parallelSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {pass("c01")}, "WO-02": {pass("c02")}, "WO-03": {pass("c03")}, "WO-04": {pass("c04")}}}
	res, err := f.run(t, 0)
	if err != nil || res.Head != "c04" || len(f.merges) != 0 || f.most != 1 {
		t.Fatalf("%v: head %s, %d integrations, %d at once", err, res.Head, len(f.merges), f.most)
	}
	for i, c := range f.calls {
		if want := []string{"base", "c01", "c02", "c03"}[i]; c.Parallel || c.Parent != want {
			t.Errorf("%s ran from %s (parallel %v), want %s", c.WorkOrder.ID, c.Parent, c.Parallel, want)
		}
	}
}

// When an order fails, no new one starts; the one still running
// finishes and, passed, is integrated; the build fails naming the
// failed order, and the orders depending on it never run.
func TestParallelBuildFailure(t *testing.T) {
	failed := make(chan struct{})
	f := &parallelSteps{script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {func(in WorkOrderInput) (WorkOrderResult, error) {
			<-failed
			time.Sleep(200 * time.Millisecond) // WO-02's failure reaches the workflow first
			return pass("c01")(in)
		}},
		"WO-02": {func(in WorkOrderInput) (WorkOrderResult, error) {
			defer close(failed)
			res := WorkOrderResult{WorkOrder: builder.WorkOrder{ID: in.WorkOrder.ID, Outcome: builder.OutcomeFailed}, Verdict: builder.VerdictFail}
			return res, temporal.NewNonRetryableApplicationError("WO-02 failed", errTypeFail, nil, res)
		}},
		"WO-03": {pass("c03")}, "WO-04": {pass("c04")}}}
	res, err := f.run(t, 2)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != builder.VerdictFail || res.Verdict != builder.VerdictFail || res.Failed != "WO-02" {
		t.Fatalf("%v: verdict %s, failed %s", err, res.Verdict, res.Failed)
	}
	var ran []string
	for _, c := range f.calls {
		ran = append(ran, c.WorkOrder.ID)
	}
	slices.Sort(ran)
	if got := strings.Join(ran, " "); got != "WO-01 WO-02" {
		t.Errorf("ran %s, want WO-01 WO-02", got)
	}
	if len(f.merges) != 1 || f.merges[0].WorkOrder.ID != "WO-01" || res.Head != "ic01" {
		t.Errorf("integrations %+v, head %s: want WO-01 alone", f.merges, res.Head)
	}
	outcomes := []string{}
	for _, wo := range res.WorkOrders {
		outcomes = append(outcomes, wo.ID+"="+wo.Outcome)
	}
	if got, want := strings.Join(outcomes, " "), "WO-01=passed WO-02=failed WO-03=pending WO-04=pending"; got != want {
		t.Errorf("outcomes %s, want %s", got, want)
	}
}

// An order whose recheck fails on the branch runs again from the
// branch's tip, alone, and is integrated as it is; the order depending
// on it, started from its first commit, is stale and runs again from the
// tip too. The branch still gets the orders in plan order.
func TestParallelBuildRerun(t *testing.T) {
	f := &parallelSteps{rerun: map[string]bool{"WO-02": true}, script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {pass("c01")}, "WO-02": {pass("c02"), pass("r02")}, "WO-03": {pass("c03")},
		"WO-04": {func(in WorkOrderInput) (WorkOrderResult, error) {
			if in.Parent != "base" {
				return pass("r04")(in)
			}
			return pass("c04")(in)
		}}}}
	res, err := f.run(t, 2)
	if err != nil || res.Verdict != builder.VerdictPass {
		t.Fatalf("%v: %+v", err, res)
	}
	// WO-04 starts once WO-02 passed: before WO-02's rerun (from c02, so
	// it is stale and runs again) or, if it came late, after it (from r02).
	var reruns []string
	stale := false
	for _, c := range f.calls {
		if c.Parent != "base" {
			reruns = append(reruns, c.WorkOrder.ID+"@"+c.Parent)
		}
		stale = stale || c.WorkOrder.ID == "WO-04" && slices.Equal(c.Chain, []string{"c02"})
	}
	wantReruns, wantCommits := "WO-02@ic01", "WO-01=ic01 WO-02=ir02 WO-03=ic03 WO-04=ic04"
	if stale {
		wantReruns, wantCommits = "WO-02@ic01 WO-04@ic03", "WO-01=ic01 WO-02=ir02 WO-03=ic03 WO-04=ir04"
	}
	if got := strings.Join(reruns, " "); got != wantReruns {
		t.Errorf("runs from the tip %s, want %s", got, wantReruns)
	}
	if got := strings.Join(commitsOf(res), " "); got != wantCommits {
		t.Errorf("commits %s, want %s", got, wantCommits)
	}
}

// A cancel while orders run: they are canceled (rolled back on their
// workers), no new one starts, the integrated order stays, and the
// workflow ends canceled.
func TestParallelBuildCanceled(t *testing.T) {
	f := &parallelSteps{block: map[string]bool{"WO-02": true, "WO-03": true}, script: map[string][]func(WorkOrderInput) (WorkOrderResult, error){
		"WO-01": {pass("c01")}, "WO-04": {pass("c04")}}}
	env := new(testsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	res, err := f.runIn(t, env, 2)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) || res.Verdict != VerdictCanceled {
		t.Fatalf("%v: verdict %s", err, res.Verdict)
	}
	// A canceled activity's goroutine may still be ending.
	f.mu.Lock()
	defer f.mu.Unlock()
	var ran []string
	for _, c := range f.calls {
		ran = append(ran, c.WorkOrder.ID)
	}
	slices.Sort(ran)
	if got := strings.Join(ran, " "); got != "WO-01 WO-02 WO-03" {
		t.Errorf("ran %s, want WO-01 WO-02 WO-03", got)
	}
	if len(f.merges) != 1 || res.Head != "ic01" || res.WorkOrders[0].Commit != "ic01" {
		t.Errorf("integrations %+v, head %s: want WO-01 alone", f.merges, res.Head)
	}
}
