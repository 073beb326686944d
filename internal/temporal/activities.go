package temporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
)

// Models are the model clients of one step, behind one Meter that holds
// the step's budget.
type Models struct {
	SE, Planner llm.Model
	Meter       *llm.Meter
}

// ModelsFunc connects the models of one step from the worker's own keys,
// base URLs and prices: model is the build's --llm-model, review the
// planner's reviewer, budget what is left of the build's. An error is a
// refusal (a missing key, an unpriced model under a cost budget).
type ModelsFunc func(model, review string, budget llm.Budget) (Models, error)

// Config is a worker's side of every build it works on.
type Config struct {
	WorkDir  string // repository caches, plans and artifacts
	Identity string // the worker's name in results
	// Attempt is the worker's part of every work order's factory options:
	// the sandbox, the Python interpreter of the verification commands,
	// the commands' environment policy. The build sets the model and
	// attempt settings.
	Attempt factory.Options
	Python  planner.PythonInspector
	Models  ModelsFunc
	// Log receives the worker's progress lines (every step's); nil is quiet.
	Log io.Writer
}

// Activities are the Plan and WorkOrder activities of a worker.
type Activities struct {
	cfg Config
	// stop ends the running steps when the worker shuts down: they roll
	// back and fail, to be retried elsewhere.
	stop <-chan struct{}
}

// cacheDir is the worker's clone of a build's remote: one per workflow,
// whose steps run one at a time; in a parallel build (BuildInput.Jobs > 1)
// one per work order (wo), whose run and integration run one at a time.
func (a *Activities) cacheDir(workflowID, wo string) string {
	if wo != "" {
		return filepath.Join(a.cfg.WorkDir, "repos", workflowID+"."+wo)
	}
	return filepath.Join(a.cfg.WorkDir, "repos", workflowID)
}

// session is what a step holds while it runs: the cache repository and
// its lock, the progress it collects, and the heartbeat.
type session struct {
	ctx   context.Context
	repo  *gitws.Repo
	lock  *gitws.Lock
	out   string // artifacts of this workflow on this worker
	log   *lineLog
	prior Spend // by earlier attempts of this step (their last heartbeat)
	base  Spend // by the workflow before this step

	mu      sync.Mutex
	meter   *llm.Meter
	carried llm.Tally // base and prior, carried into the meter

	stopHeartbeat func()
	cancel        context.CancelFunc
}

// begin opens, locks and recovers the cache repository and starts the
// heartbeat, whose details are this step's spend so far: a retry on
// another worker starts from them, so the budget counts a lost attempt's
// calls too.
func (a *Activities) begin(ctx context.Context, dir, workflowID string, spent Spend) (*session, error) {
	s := &session{base: spent, log: &lineLog{tee: a.cfg.Log}, out: filepath.Join(a.cfg.WorkDir, "out", workflowID)}
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &s.prior)
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	go func() {
		select {
		case <-a.stop:
			s.cancel()
		case <-s.ctx.Done():
		}
	}()
	s.startHeartbeat(ctx)
	repo, err := gitws.OpenCache(s.ctx, dir)
	if err != nil {
		s.end()
		return nil, err
	}
	s.repo = repo
	if s.lock, err = repo.Lock(); err != nil {
		s.end()
		return nil, fmt.Errorf("the worker's copy %s is busy (another attempt of this build still runs there?): %w", repo.Root, err)
	}
	if err := builder.Recover(s.ctx, repo, s.log); err != nil {
		s.end()
		return nil, err
	}
	return s, nil
}

func (s *session) end() {
	s.stopHeartbeat()
	s.cancel()
	if s.lock != nil {
		_ = s.lock.Unlock()
	}
}

// heartbeatEvery bounds the time between an activity's heartbeats.
const heartbeatEvery = 5 * time.Second

func (s *session) startHeartbeat(ctx context.Context) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 4
	if every <= 0 || every > heartbeatEvery {
		every = heartbeatEvery
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			activity.RecordHeartbeat(ctx, s.stepSpend())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	s.stopHeartbeat = func() {
		close(done)
		<-finished
	}
}

// stepSpend is what this step spent, its earlier attempts included.
func (s *session) stepSpend() Spend {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meter == nil {
		return s.prior
	}
	return s.prior.add(spendOf(s.meter.Snapshot().Sub(s.carried)))
}

func spendOf(t llm.Tally) Spend {
	return Spend{Tokens: t.TotalTokens, CostUSD: t.CostUSD, Unpriced: t.UnpricedCalls > 0,
		InputTokens: t.PromptTokens, CachedInputTokens: t.CachedInputTokens, CacheWriteTokens: t.CacheWriteTokens}
}

// tally is s as a Tally a Meter can carry.
func (s Spend) tally() llm.Tally {
	t := llm.Tally{TotalTokens: s.Tokens, CostUSD: s.CostUSD, PromptTokens: s.InputTokens,
		CachedInputTokens: s.CachedInputTokens, CacheWriteTokens: s.CacheWriteTokens}
	if s.Unpriced {
		t.UnpricedCalls = 1
	}
	return t
}

// models connects the step's models with the build's budget; their
// meter carries what the build spent before (earlier steps, and earlier
// attempts of this one), so the budget covers the whole build.
func (a *Activities) models(s *session, in BuildInput) (Models, error) {
	m, err := a.cfg.Models(in.Model, in.ReviewModel, llm.Budget{MaxTokens: in.MaxTokens, MaxCostUSD: in.MaxCostUSD})
	if err != nil {
		return Models{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("worker %s: %v", a.cfg.Identity, err), errTypeRefused, nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.carried = s.base.add(s.prior).tally()
	m.Meter.Resume(s.carried)
	s.meter = m.Meter
	return m, nil
}

// Plan fetches the remote, resolves the base and gets the plan: the
// given one validated, or the spec compiled (reusing the plan this worker
// compiled before for the same inputs).
func (a *Activities) Plan(ctx context.Context, in PlanInput) (PlanResult, error) {
	res := PlanResult{Worker: a.cfg.Identity}
	b := in.Build
	s, err := a.beginFetched(ctx, in.WorkflowID, b.RepoURL, in.Spent)
	if err != nil {
		return res, err
	}
	defer s.end()
	base := b.Base
	if base == "" {
		base = "HEAD"
	}
	if res.BaseCommit, err = s.repo.ResolveRemote(s.ctx, base); err != nil {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("--base %s: %v in %s", base, err, b.RepoURL), errTypeRefused, nil)
	}
	if b.Jobs > 1 {
		tip, exists, err := s.repo.RemoteBranch(s.ctx, b.Branch)
		if err != nil {
			return res, err
		}
		if exists {
			if res.Passed, err = builder.Passed(s.ctx, s.repo, tip, b.PlanHash, res.BaseCommit); err != nil {
				return res, err
			}
			res.BranchTip = tip
		}
	}
	m, err := a.models(s, b)
	if err != nil {
		return res, err
	}
	o := builder.Options{Out: s.out, PlannerModel: m.Planner, Template: b.Template, ReasoningEffort: b.ReasoningEffort,
		MaxOutputTokens: b.MaxOutputTokens, PlanMaxAttempts: b.PlanMaxAttempts, Review: b.Review, ReviewModelName: b.ReviewModel,
		Python: a.cfg.Python, Meter: m.Meter, Progress: s.log, CacheKey: b.CacheKey, MapTokens: b.MapTokens}
	if o.Template == "" {
		o.Template = planner.DefaultTemplate
	}
	o.Run.ModelName = b.ModelName
	if o.SpecPath, o.PlanDir, err = a.inputFiles(b); err != nil {
		return res, err
	}
	plan, err := builder.Step{Options: o, Repo: s.repo, PlanHash: b.PlanHash, Base: res.BaseCommit}.LoadPlan(s.ctx)
	res.Manifest, res.Source, res.Dir = plan.Manifest, plan.Source, plan.Dir
	res.Spend, res.Lines = s.stepSpend(), s.log.Lines()
	if err != nil {
		return res, s.classify(ctx, err, res, &res.Lines)
	}
	return res, nil
}

// inputFiles writes the build's spec, or its given plan, where the
// worker keeps its inputs, and returns its path.
func (a *Activities) inputFiles(b BuildInput) (spec, plan string, err error) {
	inputs := filepath.Join(a.cfg.WorkDir, "inputs", b.PlanHash)
	if err := os.MkdirAll(inputs, 0o755); err != nil {
		return "", "", err
	}
	if b.Spec != "" {
		spec = filepath.Join(inputs, "spec.md")
		return spec, "", os.WriteFile(spec, []byte(b.Spec), 0o644)
	}
	plan = filepath.Join(inputs, "plan.json")
	return "", plan, os.WriteFile(plan, b.Plan, 0o644)
}

// WorkOrder runs one work order on the worker's copy of the remote, at
// the commit the previous one pushed, exactly as a local build does, and
// pushes its commit with a lease. A retry first looks at the remote: a
// commit of this work order there (its trailers) is the result, with no
// model call.
func (a *Activities) WorkOrder(ctx context.Context, in WorkOrderInput) (WorkOrderResult, error) {
	wo := in.WorkOrder
	res := WorkOrderResult{WorkOrder: builder.WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: builder.OutcomePending}, Worker: a.cfg.Identity}
	if in.Parallel {
		return a.parallelWorkOrder(ctx, in, res)
	}
	b := in.Build
	s, err := a.beginFetched(ctx, in.WorkflowID, b.RepoURL, in.Spent)
	if err != nil {
		return res, err
	}
	defer s.end()
	tip, exists, c, err := onBranch(s, b, in.BaseCommit, wo.ID)
	if err != nil {
		return res, err
	}
	if c != "" {
		res.Outcome, res.Commit, res.Verdict, res.Reused = builder.OutcomePassed, c, builder.VerdictPass, true
		res.Spend = s.stepSpend()
		fmt.Fprintf(s.log, "%s: already committed as %s on %s (an earlier attempt pushed it); no model call\n", wo.ID, gitws.ShortHash(c), b.Branch)
		res.Lines = s.log.Lines()
		return res, nil
	}
	expected := ""
	if exists {
		expected = tip
	}
	if expected != in.Parent && (exists || in.Parent != in.BaseCommit) {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: branch %s of %s is at %s, not at %s where %s starts: someone else changed it",
			wo.ID, b.Branch, b.RepoURL, orNone(expected), gitws.ShortHash(in.Parent), wo.ID), errTypeRefused, nil)
	}
	if err := s.repo.CheckoutAt(s.ctx, b.Branch, in.Parent); err != nil {
		return res, err
	}
	if dirty, err := s.repo.Dirty(s.ctx); err != nil || len(dirty) > 0 {
		return res, fmt.Errorf("the worker's copy %s is not clean after checking out %s: %v %s", s.repo.Root, b.Branch, err, factory.Summarize(dirty, 5))
	}
	line, stopped, err := a.runWorkOrder(s, in)
	res.WorkOrder, res.StoppedEarly, res.Failure = line, stopped, failure(s, in, line, stopped, err)
	if err == nil {
		if err = s.repo.PushLease(s.ctx, b.RepoURL, b.Branch, line.Commit, expected); err == nil {
			res.Verdict = builder.VerdictPass
		}
	}
	res.Spend, res.Lines = s.stepSpend(), s.log.Lines()
	if err != nil {
		return res, s.classify(ctx, err, res, &res.Lines)
	}
	return res, nil
}

// runWorkOrder runs in's work order on s's copy, checked out where it
// starts, as a local build does.
func (a *Activities) runWorkOrder(s *session, in WorkOrderInput) (builder.WorkOrder, string, error) {
	b := in.Build
	m, err := a.models(s, b)
	if err != nil {
		return builder.WorkOrder{ID: in.WorkOrder.ID, Title: in.WorkOrder.Title, Outcome: builder.OutcomePending}, "", err
	}
	step := a.step(s, b)
	step.Run.Model, step.Run.Prices, step.Meter, step.CacheLayout = m.SE, m.Meter.Prices(), m.Meter, &in.CacheLayout
	step.OrderRepair = in.Repair
	return step.RunWorkOrder(s.ctx, in.WorkOrder)
}

// failure is the evidence of a work order that ended FAIL in a build
// that repairs its plan, read here, where its run directory is, for a
// Repair activity on any worker; nil otherwise.
func failure(s *session, in WorkOrderInput, line builder.WorkOrder, stopped string, err error) *planner.FailedOrder {
	if !in.Build.Repair || !errors.Is(err, builder.ErrWorkOrderFailed) {
		return nil
	}
	f, ferr := builder.FailedOrder(in.WorkOrder, line, stopped)
	if ferr != nil {
		fmt.Fprintf(s.log, "build: warning: %v; a repair is asked for without them\n", ferr)
	}
	return &f
}

// Repair asks the planner to repair the plan after a work order ended
// FAIL, with the local build's code (builder.Step.RepairPlan): on the
// worker's copy of the remote checked out at the branch's tip, the orders
// on the branch committed, recorded under this workflow's build directory
// on the worker (repairs/<N>/). The result is the record and, applied, the
// repaired plan; the workflow goes on with it.
func (a *Activities) Repair(ctx context.Context, in RepairInput) (RepairResult, error) {
	res := RepairResult{Worker: a.cfg.Identity}
	b := in.Build
	s, err := a.beginFetched(ctx, in.WorkflowID, b.RepoURL, in.Spent)
	if err != nil {
		return res, err
	}
	defer s.end()
	passed := map[string]string{}
	if in.Tip != "" {
		if passed, err = builder.Passed(s.ctx, s.repo, in.Tip, b.PlanHash, in.BaseCommit); err != nil {
			return res, err
		}
	}
	tip := cmp.Or(in.Tip, in.BaseCommit)
	if err := s.repo.CheckoutAt(s.ctx, b.Branch, tip); err != nil {
		return res, err
	}
	m, err := a.models(s, b)
	if err != nil {
		return res, err
	}
	step := a.step(s, b)
	step.Base, step.PlannerModel, step.Meter, step.Python = in.BaseCommit, m.Planner, m.Meter, a.cfg.Python
	step.ReasoningEffort, step.MaxOutputTokens, step.PlanMaxAttempts, step.MaxRepairs = b.ReasoningEffort, b.MaxOutputTokens, b.PlanMaxAttempts, b.MaxRepairs
	if step.SpecPath, _, err = a.inputFiles(b); err != nil {
		return res, err
	}
	res.Record, res.Manifest, err = step.RepairPlan(s.ctx, builder.RepairJob{Plan: in.Plan, Failed: in.Failed, Passed: passed, Earlier: in.Earlier, Used: in.Used})
	res.Spend, res.Lines = s.stepSpend(), s.log.Lines()
	if err != nil {
		return res, s.classify(ctx, err, res, &res.Lines)
	}
	return res, nil
}

// step is the local build's Step for b on s's copy, without models.
func (a *Activities) step(s *session, b BuildInput) builder.Step {
	run := a.cfg.Attempt
	run.ModelName = b.ModelName
	run.Temperature, run.JSONSchema, run.MaxAttempts = b.Temperature, b.JSONSchema, b.MaxAttempts
	run.CommandTimeout, run.VerifyCommands = time.Duration(b.TimeoutSeconds)*time.Second, b.VerifyCommands
	run.Lock = s.lock
	return builder.Step{Options: builder.Options{Run: run, Progress: s.log, CacheKey: b.CacheKey, MapTokens: b.MapTokens}, Repo: s.repo,
		PlanHash: b.PlanHash, BuildDir: filepath.Join(s.out, "builds", b.PlanHash)}
}

// parallelWorkOrder runs a work order of a parallel build on a copy of
// its own: from in.Parent with the commits of in.Chain replayed onto it,
// its commit pushed to its orderRef for that start. When that ref already
// holds a commit (an earlier attempt, or an earlier build, pushed it), it
// is the result, with no model call.
func (a *Activities) parallelWorkOrder(ctx context.Context, in WorkOrderInput, res WorkOrderResult) (WorkOrderResult, error) {
	wo, b := in.WorkOrder, in.Build
	s, err := a.begin(ctx, a.cacheDir(in.WorkflowID, wo.ID), in.WorkflowID, in.Spent)
	if err != nil {
		return res, err
	}
	defer s.end()
	if err := a.fetchBuild(s, b); err != nil {
		return res, err
	}
	start := in.Parent
	for _, c := range in.Chain {
		if start, err = s.repo.Replay(s.ctx, c, start); err != nil {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the base of %s: %v", wo.ID, err), errTypeRefused, nil)
		}
	}
	ref := orderRef(b.PlanHash, wo.ID, start)
	if c, ok, err := s.repo.LookupCommit(s.ctx, ref); err != nil {
		return res, err
	} else if ok {
		res.Outcome, res.Commit, res.Verdict, res.Reused = builder.OutcomePassed, c, builder.VerdictPass, true
		res.Spend = s.stepSpend()
		fmt.Fprintf(s.log, "%s: already committed as %s at %s (an earlier attempt or build pushed it); no model call\n", wo.ID, gitws.ShortHash(c), ref)
		res.Lines = s.log.Lines()
		return res, nil
	}
	if err := s.repo.CheckoutAt(s.ctx, b.Branch, start); err != nil {
		return res, err
	}
	if dirty, err := s.repo.Dirty(s.ctx); err != nil || len(dirty) > 0 {
		return res, fmt.Errorf("the worker's copy %s is not clean after checking out %s: %v %s", s.repo.Root, gitws.ShortHash(start), err, factory.Summarize(dirty, 5))
	}
	line, stopped, err := a.runWorkOrder(s, in)
	res.WorkOrder, res.StoppedEarly, res.Failure = line, stopped, failure(s, in, line, stopped, err)
	if err == nil {
		if err = s.repo.PushRef(s.ctx, b.RepoURL, ref, line.Commit); err == nil {
			res.Verdict = builder.VerdictPass
		}
	}
	res.Spend, res.Lines = s.stepSpend(), s.log.Lines()
	if err != nil {
		return res, s.classify(ctx, err, res, &res.Lines)
	}
	return res, nil
}

// beginFetched begins a step in the build's shared copy of the remote,
// fetched.
func (a *Activities) beginFetched(ctx context.Context, workflowID, repoURL string, spent Spend) (*session, error) {
	s, err := a.begin(ctx, a.cacheDir(workflowID, ""), workflowID, spent)
	if err != nil {
		return nil, err
	}
	if err := s.repo.Fetch(s.ctx, repoURL); err != nil {
		s.end()
		return nil, err
	}
	return s, nil
}

// fetchBuild brings the remote's branches and the build's order refs into
// s's copy.
func (a *Activities) fetchBuild(s *session, b BuildInput) error {
	if err := s.repo.Fetch(s.ctx, b.RepoURL); err != nil {
		return err
	}
	return s.repo.FetchRefs(s.ctx, b.RepoURL, orderRefs(b.PlanHash))
}

// onBranch reads the fetched build branch: its tip, whether it exists, and
// the commit of work order id on it ("" when it is not there yet), as an
// earlier attempt of a step may have pushed it.
func onBranch(s *session, b BuildInput, base, id string) (tip string, exists bool, commit string, err error) {
	if tip, exists, err = s.repo.RemoteBranch(s.ctx, b.Branch); err != nil || !exists {
		return tip, exists, "", err
	}
	passed, err := builder.Passed(s.ctx, s.repo, gitws.RemoteRef(b.Branch), b.PlanHash, base)
	return tip, exists, passed[id], err
}

// Integrate puts a parallel build's passed work order onto the build
// branch, the workflow running one integration at a time in plan order:
// its own commit when it ran from the branch's tip, else its change
// replayed onto the tip (gitws.Repo.Replay) and rechecked there, as a
// local parallel build does. A failing recheck is a Rerun: the workflow
// runs the order again from the tip. The branch moves by a push with a
// lease on in.Tip; a retry that finds the order on the branch returns
// its commit.
func (a *Activities) Integrate(ctx context.Context, in IntegrateInput) (IntegrateResult, error) {
	wo, b := in.WorkOrder, in.Build
	res := IntegrateResult{Worker: a.cfg.Identity}
	s, err := a.begin(ctx, a.cacheDir(in.WorkflowID, wo.ID), in.WorkflowID, Spend{})
	if err != nil {
		return res, err
	}
	defer s.end()
	if err := a.fetchBuild(s, b); err != nil {
		return res, err
	}
	tip, exists, c, err := onBranch(s, b, in.BaseCommit, wo.ID)
	if err != nil {
		return res, err
	}
	if c != "" {
		res.Commit = c
		fmt.Fprintf(s.log, "%s: already integrated as %s on %s (an earlier attempt pushed it)\n", wo.ID, gitws.ShortHash(c), b.Branch)
		res.Lines = s.log.Lines()
		return res, nil
	}
	if !exists {
		tip = ""
	}
	if tip != in.Tip {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("integrate %s: branch %s of %s is at %s, not at %s: someone else changed it",
			wo.ID, b.Branch, b.RepoURL, orNone(tip), orNone(in.Tip)), errTypeRefused, nil)
	}
	onto := cmp.Or(in.Tip, in.BaseCommit)
	from, ok, err := s.repo.LookupCommit(s.ctx, in.Commit+"^")
	if err != nil {
		return res, fmt.Errorf("integrate %s: %w", wo.ID, err)
	} else if !ok {
		return res, fmt.Errorf("integrate %s: its commit %s is not in %s after fetching %s* of %s", wo.ID, gitws.ShortHash(in.Commit), s.repo.Root, orderRefs(b.PlanHash), b.RepoURL)
	}
	res.Commit = in.Commit
	if from != onto {
		if res.Commit, err = s.repo.Replay(s.ctx, in.Commit, onto); err != nil {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("integrate %s: %v", wo.ID, err), errTypeRefused, nil)
		}
		stage, err := a.step(s, b).Recheck(s.ctx, wo, res.Commit)
		if err != nil {
			res.Lines = s.log.Lines()
			return res, s.classify(ctx, fmt.Errorf("recheck %s on the build branch: %w", wo.ID, err), res, &res.Lines)
		}
		if stage != "" {
			res.Commit, res.Rerun = "", "its checks fail ("+stage+") on the branch with the earlier work orders"
			res.Lines = s.log.Lines()
			return res, nil
		}
	}
	if err := s.repo.PushLease(s.ctx, b.RepoURL, b.Branch, res.Commit, tip); err != nil {
		return res, err
	}
	fmt.Fprintf(s.log, "%s: integrated as %s\n", wo.ID, gitws.ShortHash(res.Commit))
	res.Lines = s.log.Lines()
	return res, nil
}

// classify turns a step's error into what Temporal should do with it:
// outcomes of the build (FAIL, an invalid plan, a budget stop, a provider
// error no retry fixes) are non-retryable and carry result as details;
// a cancel of the workflow is a cancel; the rest (the worker stopping, a
// push race, a transient provider error, git) is retried by the policy.
func (s *session) classify(ctx context.Context, err error, result any, lines *[]string) error {
	var budget *llm.BudgetError
	var invalid *builder.PlanInvalidError
	pe, isProvider := llm.AsProviderError(err)
	wo, _ := result.(WorkOrderResult)
	switch {
	case ctx.Err() != nil:
		return temporal.NewCanceledError(result)
	case s.ctx.Err() != nil:
		return fmt.Errorf("the worker stopped during the step (rolled back): %w", err)
	case errors.Is(err, builder.ErrWorkOrderFailed):
		wo.Verdict = builder.VerdictFail
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s failed", wo.ID), errTypeFail, nil, wo)
	case errors.As(err, &invalid):
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypePlanInvalid, nil, result)
	case errors.As(err, &budget):
		wo.Verdict = builder.VerdictBudget
		if wo.ID == "" {
			return temporal.NewNonRetryableApplicationError(budget.Error(), errTypeBudget, nil, result)
		}
		return temporal.NewNonRetryableApplicationError(budget.Error(), errTypeBudget, nil, wo)
	case isProvider && transient(pe):
		return temporal.NewApplicationError(pe.Error(), "PROVIDER_TRANSIENT")
	case isProvider:
		wo.Verdict = builder.VerdictError
		if wo.ID == "" {
			return temporal.NewNonRetryableApplicationError(pe.Error(), errTypeProvider, nil, result)
		}
		return temporal.NewNonRetryableApplicationError(pe.Error(), errTypeProvider, nil, wo)
	}
	var refused *builder.RefusedError
	if errors.As(err, &refused) {
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypeRefused, nil)
	}
	return err
}

// transient reports whether a provider error may go away by itself.
func transient(pe *llm.ProviderError) bool {
	switch pe.Kind {
	case llm.KindRateLimited, llm.KindServerError, llm.KindTimeout, llm.KindConnectionLost:
		return true
	}
	return false
}

func orNone(commit string) string {
	if commit == "" {
		return "(no branch)"
	}
	return gitws.ShortHash(commit)
}

// lineLog collects a step's progress lines for the workflow and copies
// them to the worker's log.
type lineLog struct {
	tee   io.Writer
	mu    sync.Mutex
	lines []string
	part  string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		_, _ = l.tee.Write(p)
	}
	text := l.part + string(p)
	parts := strings.Split(text, "\n")
	l.part = parts[len(parts)-1]
	l.lines = append(l.lines, parts[:len(parts)-1]...)
	return len(p), nil
}

// Lines are the complete lines so far.
func (l *lineLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
