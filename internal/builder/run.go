package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/workorder"
)

// PlanInvalidError is a plan that failed validation: the given one, or the
// planner's after every attempt.
type PlanInvalidError struct {
	Issues []planner.Issue
	Where  string // the plan directory or the compile artifacts
}

func (e *PlanInvalidError) Error() string {
	return fmt.Sprintf("the plan is invalid (%d errors); see %s", len(e.Issues), e.Where)
}

// errWorkOrderFailed ends the build at a failed work order (verdict FAIL).
var errWorkOrderFailed = errors.New("a work order failed")

// runAll gets the plan, switches to the build branch and runs every work
// order without a commit, in order, stopping at the first that fails.
func (b *builder) runAll(ctx context.Context) error {
	if err := b.planStep(ctx); err != nil {
		b.sum.Verdict = verdictOf(err)
		return err
	}
	if err := b.loadRepairs(ctx); err != nil {
		b.sum.Verdict = verdictOf(err)
		return err
	}
	target, exists, err := b.repo.BranchCommit(ctx, b.sum.Branch)
	if err != nil {
		b.sum.Verdict = VerdictError
		return err
	}
	if !exists {
		target = b.base
	}
	if err := b.repo.DuringGitStep(gitws.GitStep{Step: gitws.StepSwitch, Branch: b.sum.Branch, Target: target}, func() error { return b.repo.SwitchBranch(ctx, b.sum.Branch, b.base) }); err != nil {
		b.sum.Verdict = VerdictError
		return err
	}
	for round := 0; ; round++ {
		passed, err := Passed(ctx, b.repo, "HEAD", b.sum.PlanHash, b.base)
		if err != nil {
			b.sum.Verdict = VerdictError
			return err
		}
		b.summaryLines(passed)
		if round == 0 {
			b.progress("build %s on branch %s: %d work orders, %d already committed", b.sum.PlanHash, b.sum.Branch, len(b.plan.WorkOrders), len(passed))
		}
		// A repair an earlier process was cut off in comes first; else the
		// orders run, and a FAIL may be repaired.
		job := b.takePending(passed)
		if job == nil {
			err := b.runOrders(ctx, passed)
			switch {
			case err == nil:
				b.sum.Verdict = VerdictPass
				b.progress("build %s: PASS%s, %d work orders committed on %s", b.sum.PlanHash, PassedAfter(b.repairs), len(b.plan.WorkOrders), b.sum.Branch)
				return nil
			case !errors.Is(err, errWorkOrderFailed):
				b.sum.Verdict = verdictOf(err)
				return err
			case !b.mayRepair():
				b.sum.Verdict = VerdictFail
				return nil
			}
			// The orders committed since the round started count too.
			if passed, err = Passed(ctx, b.repo, "HEAD", b.sum.PlanHash, b.base); err == nil {
				job, err = b.newRepair(ctx, passed)
			}
			if err != nil {
				b.sum.Verdict = VerdictError
				return err
			}
		}
		applied, err := b.repair(ctx, job)
		switch {
		case err != nil:
			b.sum.Verdict = verdictOf(err)
			return err
		case !applied:
			b.sum.Verdict = VerdictFail
			b.sum.Failed = job.req.Failed.ID
			for i := range b.sum.WorkOrders {
				if l := &b.sum.WorkOrders[i]; l.ID == b.sum.Failed && l.Outcome != OutcomeFailed {
					l.Outcome, l.Stage = OutcomeFailed, job.req.Failed.Stage // failed in the process the repair resumes
				}
			}
			return nil
		}
	}
}

// summaryLines sets the summary's work orders to the plan's, committed or
// not as passed says, keeping what this process recorded of each.
func (b *builder) summaryLines(passed map[string]string) {
	prev := map[string]WorkOrder{}
	for _, l := range b.sum.WorkOrders {
		prev[l.ID] = l
	}
	lines := make([]WorkOrder, 0, len(b.plan.WorkOrders))
	for _, wo := range b.plan.WorkOrders {
		line, ok := prev[wo.ID]
		if !ok {
			line = WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: OutcomePending}
		}
		if c, ok := passed[wo.ID]; ok {
			line.Outcome, line.Commit = OutcomePassed, c
		}
		lines = append(lines, line)
	}
	b.sum.WorkOrders = lines
}

// runOrders runs every order of the plan without a commit: in parallel
// (runParallel) or one after the other, stopping at the first that fails.
// A FAIL is errWorkOrderFailed, with b.sum.Failed naming the order.
func (b *builder) runOrders(ctx context.Context, passed map[string]string) error {
	if deps := b.parallelDeps(); deps != nil {
		return b.runParallel(ctx, deps, passed)
	}
	for i := range b.plan.WorkOrders {
		if b.sum.WorkOrders[i].Outcome == OutcomePassed {
			continue
		}
		if err := b.runOne(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// parallelDeps is the plan's dependency graph when the build runs its
// work orders in parallel: with Jobs above 1 and two orders that can run
// at once; else nil, and the build runs them one after the other.
func (b *builder) parallelDeps() [][]int {
	if b.o.Jobs <= 1 {
		return nil
	}
	if deps := Dependencies(b.plan); Concurrent(deps) {
		return deps
	}
	return nil
}

// planStep gets the plan (loadPlan) and prints the issues of an invalid
// one.
func (b *builder) planStep(ctx context.Context) error {
	err := b.loadPlan(ctx)
	var invalid *PlanInvalidError
	if errors.As(err, &invalid) {
		for _, i := range invalid.Issues {
			b.progress("%s", i)
		}
	}
	return err
}

func verdictOf(err error) string {
	var invalid *PlanInvalidError
	var budget *llm.BudgetError
	switch {
	case errors.Is(err, errWorkOrderFailed):
		return VerdictFail
	case errors.As(err, &invalid):
		return VerdictPlanInvalid
	case errors.As(err, &budget):
		return VerdictBudget
	}
	return VerdictError
}

// loadPlan validates the given plan, reuses the one compiled for the same
// inputs, or compiles one — always against the files of the base commit,
// the state the plan was written for.
func (b *builder) loadPlan(ctx context.Context) error {
	files, err := b.repo.FilesAt(ctx, b.base)
	if err != nil {
		return err
	}
	env := planner.Env{RepoFiles: files, Python: b.o.Python}
	if b.o.PlanDir != "" {
		b.sum.PlanSource, b.sum.PlanDir = PlanGiven, absOrSame(b.o.PlanDir)
		m, err := validPlan(ctx, b.o.PlanDir, env)
		if err != nil {
			return err
		}
		b.plan = m
		b.progress("plan: %d work orders from %s", len(m.WorkOrders), b.o.PlanDir)
		b.event(map[string]any{"event": "plan", "source": PlanGiven, "work_orders": len(m.WorkOrders)})
		return nil
	}
	dir := b.compiledPlanDir()
	b.sum.PlanDir = dir
	if _, err := os.Stat(filepath.Join(dir, planner.ManifestName)); err == nil {
		m, err := validPlan(ctx, dir, env)
		if err == nil {
			b.plan, b.sum.PlanSource = m, PlanReused
			b.progress("plan: reusing %s (%d work orders, no model call)", dir, len(m.WorkOrders))
			b.event(map[string]any{"event": "plan", "source": PlanReused, "work_orders": len(m.WorkOrders)})
			return nil
		}
		if b.earlier {
			// Recompiling under the earlier build's hash would put a new
			// plan under orders committed from the old one.
			return fmt.Errorf("%w; to plan the spec again with this release, rerun with --earlier-plan replan", err)
		}
		b.progress("plan: the plan in %s no longer validates (%v); compiling a new one", dir, err)
	}
	return b.compile(ctx, dir, env)
}

// validPlan loads the plan in dir and validates it as `factory validate`
// does; a plan with errors is a *PlanInvalidError.
func validPlan(ctx context.Context, dir string, env planner.Env) (*workorder.Manifest, error) {
	raw, _, err := planner.LoadPlan(dir)
	if err != nil {
		return nil, &PlanInvalidError{Issues: []planner.Issue{{Code: "E000", Message: err.Error()}}, Where: dir}
	}
	res := planner.Validate(ctx, raw, env)
	if res.PythonErr != nil {
		return nil, fmt.Errorf("check the plan's python -c commands: %w", res.PythonErr)
	}
	if errs := res.Errors(); len(errs) > 0 {
		return nil, &PlanInvalidError{Issues: errs, Where: dir}
	}
	return res.Manifest, nil
}

func (b *builder) compile(ctx context.Context, dir string, env planner.Env) error {
	spec, err := os.ReadFile(b.o.SpecPath)
	if err != nil {
		return fmt.Errorf("read the spec: %w", err)
	}
	artifacts := filepath.Join(dir, "compile_artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return fmt.Errorf("create the plan directory: %w", err)
	}
	b.progress("plan: compiling %s with %s into %s", b.o.SpecPath, b.o.Run.ModelName, dir)
	b.update(Update{Planning: true})
	b.event(map[string]any{"event": "plan_compile_start"})
	reviewModel := b.o.ReviewModelName
	if reviewModel == "" {
		reviewModel = b.o.Run.ModelName
	}
	repoMap, err := b.repoMap(ctx, b.base, func(m *repomap.Map) repomap.Focus { return m.FocusFromText(string(spec)) })
	if err != nil {
		return err
	}
	out, err := planner.Compile(ctx, planner.Options{
		Spec: string(spec), Template: b.o.Template,
		Model: b.o.PlannerModel, ModelName: b.o.Run.ModelName, ReasoningEffort: b.o.ReasoningEffort,
		MaxOutputTokens: b.o.MaxOutputTokens, MaxAttempts: b.o.PlanMaxAttempts,
		Review: b.o.Review, ReviewModelName: reviewModel, MaxReviewCycles: 2,
		Env: env, ArtifactsDir: artifacts, Progress: b.o.Progress, CacheKey: b.cacheKey(), RepoMap: repoMap,
	})
	if err != nil {
		var invalid *planner.InvalidPlanError
		if errors.As(err, &invalid) {
			return &PlanInvalidError{Issues: invalid.Issues, Where: artifacts}
		}
		return fmt.Errorf("plan: %w", err)
	}
	if _, err := planner.WritePlan(dir, out.Manifest, planner.CompileInfo{
		CompileHash: out.Summary.CompileHash, Model: b.o.Run.ModelName, ReasoningEffort: b.o.ReasoningEffort,
		TemplateSHA256: out.Summary.TemplateSHA256, ValidatorVersion: planner.ValidatorVersion,
		SpecSHA256: canon.SHA256Hex(spec),
	}); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	b.plan, b.sum.PlanSource = out.Manifest, PlanCompiled
	b.progress("plan: %d work orders written to %s", len(out.Manifest.WorkOrders), dir)
	if b.o.Meter == nil {
		b.usage = b.usage.Add(out.Summary.Usage)
	}
	b.event(map[string]any{"event": "plan", "source": PlanCompiled, "work_orders": len(out.Manifest.WorkOrders),
		"tokens": out.Summary.Usage.TotalTokens})
	return nil
}

// Passed maps each work order of plan planHash committed on tip since
// base to its commit, read from the commits' trailers.
func Passed(ctx context.Context, repo *gitws.Repo, tip, planHash, base string) (map[string]string, error) {
	commits, err := repo.Log(ctx, tip, 0)
	if err != nil {
		return nil, err
	}
	passed := map[string]string{}
	for _, c := range commits {
		if c.Hash == base {
			break
		}
		if id := c.Trailers[TrailerWorkOrder]; id != "" && c.Trailers[TrailerPlan] == planHash {
			if _, seen := passed[id]; !seen {
				passed[id] = c.Hash
			}
		}
	}
	return passed, nil
}

// runOne runs work order i through the factory and commits it on PASS.
func (b *builder) runOne(ctx context.Context, i int) error {
	wo := b.plan.WorkOrders[i]
	line := &b.sum.WorkOrders[i]
	b.progress("%s: %s", wo.ID, wo.Title)
	b.event(map[string]any{"event": "wo_start", "wo": wo.ID})
	b.update(Update{WO: wo.ID, Attempt: 1, Node: "se"})
	err := b.runWorkOrder(ctx, i)
	u := Update{WO: wo.ID, Done: true, Verdict: verdictOf(err), Commit: line.Commit, Stage: line.Stage}
	if err == nil {
		u.Verdict = VerdictPass
	}
	b.update(u)
	return err
}

// runWorkOrder is runOne's work: the run and, on PASS, the commit.
func (b *builder) runWorkOrder(ctx context.Context, i int) error {
	wo := b.plan.WorkOrders[i]
	line := &b.sum.WorkOrders[i]
	before := b.orderSpent()
	opts := b.o.Run
	opts.Repo, opts.WorkOrder, opts.Out, opts.Tool = b.repo.Root, &wo, filepath.Join(b.sum.BuildDir, wo.ID), Tool
	opts.KeepJournal = true // until the commit is made: see commit
	opts.CacheKey = b.cacheKey()
	l := b.cacheLayout()
	opts.SharedContext, opts.StableContext, opts.LongCache = l.Shared, l.Stable, l.Long
	// The map of the commit the order starts from: the attempts of the
	// order all start there, so their prompts repeat it byte for byte.
	if b.o.MapTokens > 0 {
		opts.RepoMap = func(ctx context.Context, _ *gitws.Repo, commit string) (string, error) {
			return b.repoMap(ctx, commit, func(m *repomap.Map) repomap.Focus { return WorkOrderFocus(m, &wo) })
		}
	}
	// Clean since the start's check or the last commit's; from here on,
	// only until the attempt changes the tree.
	opts.Clean, b.clean = b.clean, false
	if b.o.Progress != nil {
		opts.Progress = indented{b.o.Progress}
	}
	opts.OnEvent = func(ev factory.Event) { b.onEvent(wo.ID, ev) }
	run, err := factory.Preflight(ctx, opts)
	if err != nil {
		var pre *factory.PreflightError
		if errors.As(err, &pre) {
			line.Outcome, line.Stage, line.Error = OutcomeFailed, factory.StagePreflight, err.Error()
			b.sum.Failed = wo.ID
			b.progress("%s: FAIL (preflight: %v)", wo.ID, err)
			b.event(map[string]any{"event": "wo_end", "wo": wo.ID, "verdict": "FAIL", "stage": factory.StagePreflight})
			return errWorkOrderFailed
		}
		return err
	}
	res, runErr := run.Execute(ctx)
	line.Attempts, line.RunDir = res.Attempts, res.RunDir
	after := b.orderSpent()
	line.Tokens, line.CostUSD = delta(before, after)
	line.CachedInputTokens = after.CachedInputTokens - before.CachedInputTokens
	line.CacheWriteTokens = after.CacheWriteTokens - before.CacheWriteTokens
	if res.StoppedEarly != "" {
		b.sum.StoppedEarly = res.StoppedEarly
	}
	var budget *llm.BudgetError
	if runErr != nil && errors.As(runErr, &budget) {
		// Stopped before a call: it stays pending, for a resume with a
		// larger budget.
		b.progress("%s: stopped: %v", wo.ID, budget)
		b.event(map[string]any{"event": "wo_end", "wo": wo.ID, "verdict": VerdictBudget})
		return budget
	}
	if runErr != nil {
		line.Outcome = OutcomeFailed
		b.sum.Failed = wo.ID
		b.event(map[string]any{"event": "wo_end", "wo": wo.ID, "verdict": res.Verdict, "error": runErr.Error()})
		if pe, ok := llm.AsProviderError(runErr); ok {
			return pe
		}
		return runErr
	}
	if res.Verdict != factory.VerdictPass {
		line.Outcome, line.Stage, line.BriefPath = OutcomeFailed, res.Stage, res.BriefPath
		b.sum.Failed = wo.ID
		b.progress("%s: FAIL at %s after %d attempt(s); the repository is back at %s; failure brief: %s",
			wo.ID, res.Stage, res.Attempts, gitws.ShortHash(res.Baseline.Commit), res.BriefPath)
		b.event(map[string]any{"event": "wo_end", "wo": wo.ID, "verdict": res.Verdict, "stage": res.Stage})
		return errWorkOrderFailed
	}
	commit, err := b.commit(ctx, wo, res)
	if err != nil {
		line.Outcome = OutcomeFailed
		b.sum.Failed = wo.ID
		return err
	}
	line.Outcome, line.Commit = OutcomePassed, commit
	b.progress("%s: PASS, committed %s (%s)", wo.ID, gitws.ShortHash(commit), strings.Join(res.Touched, ", "))
	b.event(map[string]any{"event": "wo_end", "wo": wo.ID, "verdict": res.Verdict, "commit": commit})
	return nil
}

// commit commits exactly the files the passing attempt wrote, then removes
// what the commands left behind that is neither committed nor a baseline
// ignored file, so the next work order starts from a clean tree, and last
// removes the attempt's journal. Its git steps run under a note in the git
// directory (gitws.Repo.DuringGitStep): a build killed inside them leaves
// git's lock files, which the next build then removes before it undoes the
// attempt.
func (b *builder) commit(ctx context.Context, wo workorder.WorkOrder, res factory.Result) (commit string, err error) {
	err = b.repo.DuringGitStep(gitws.GitStep{Step: "commit " + wo.ID}, func() error {
		commit, err = b.commitNoted(ctx, wo, res)
		return err
	})
	return commit, err
}

// commitNoted is commit, under its note.
func (b *builder) commitNoted(ctx context.Context, wo workorder.WorkOrder, res factory.Result) (string, error) {
	msg := fmt.Sprintf("factory: %s %s\n\n%s: %s\n%s: %s\n%s: %s\n%s", wo.ID, oneLine(wo.Title),
		TrailerWorkOrder, wo.ID, TrailerRunID, res.RunID, TrailerPlan, b.sum.PlanHash, b.repairTrailer(wo.ID))
	commit, err := b.repo.CommitStaged(ctx, res.Baseline, res.Touched, msg)
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", wo.ID, err)
	}
	// Usually the commands left only untracked or ignored files: Tidy then
	// removes them from one listing and the tree is clean by construction;
	// otherwise it rolls back to the commit and Dirty checks the result.
	rep, clean, err := b.repo.Tidy(ctx, res.Baseline.Rebased(commit), deps.InstalledTrees)
	if err != nil {
		return commit, fmt.Errorf("clean up after %s: %w", wo.ID, err)
	}
	if len(rep.Removed) > 0 {
		b.progress("%s: removed what the commands left behind: %s", wo.ID, factory.Summarize(rep.Removed, 5))
	}
	if !clean {
		if dirty, err := b.repo.Dirty(ctx); err != nil || len(dirty) > 0 {
			return commit, fmt.Errorf("after committing %s the tree is not clean: %v %s", wo.ID, err, factory.Summarize(dirty, 5))
		}
	}
	// Until here a crash left the journal, and the next build undid the
	// attempt (and the commit) and ran the work order again.
	if err := b.repo.RemoveJournal(); err != nil {
		return commit, err
	}
	b.clean = true
	return commit, nil
}

// indented sets the factory's own lines of a work order off from the
// build's transitions.
type indented struct{ w io.Writer }

func (i indented) Write(p []byte) (int, error) {
	text := strings.TrimSuffix(string(p), "\n")
	if _, err := io.WriteString(i.w, "    "+strings.ReplaceAll(text, "\n", "\n    ")+"\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
