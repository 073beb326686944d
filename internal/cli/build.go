package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/forge"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/repomap"
)

// buildOptions are the flags of `factory build`: those of run that shape
// attempts, and those of plan that shape the planner.
type buildOptions struct {
	run                   runOptions
	spec, plan, branch    string
	template, effort      string
	reviewModel           string
	maxOutputTokens       int64
	planMaxAttempts       int
	review, resetBudget   bool
	verbose               bool
	jobs                  int
	repair                string // auto or off
	earlierPlan           string // keep, replan or ""
	maxRepairs            int
	maxWaitSeconds        int
	mapTokens             int
	pollInterval, backoff time.Duration
	temporal              buildTemporalFlags // --temporal: on workers (temporal.go)
	// --pr: publish the build as a pull request afterwards (pr.go).
	pr    bool
	forge forgeFlags
	// pub and conn are what factory issue adds to the publication.
	pub  publication
	conn *forgeConn
}

func newBuildCmd(env Env) *cobra.Command {
	o := &buildOptions{}
	cmd := &cobra.Command{
		Use:   "build --spec FILE --repo DIR --out DIR --llm-model NAME",
		Short: "Spec → plan → every work order → one commit each: the whole job, resumable",
		Long: `Build a repository from a product specification.

The spec is compiled into a plan once (into <out>/plans/<compile hash>/, reused
without a model call when the same command runs again), or --plan DIR gives one
(validated first, as 'factory validate' does). The plan is always validated against
the commit the build branch started from.

--repo is created (git init and one empty commit) when it does not exist; otherwise
it must be clean. The work happens on --branch (default factory/<plan hash>), created
from the current HEAD or checked out if it exists; main and master are refused. Each
work order runs as 'factory run' would; on PASS the files it wrote are committed
("factory: WO-NN <title>" with Factory-Work-Order, Factory-Run-Id and Factory-Plan
trailers) and what the commands left behind is removed.

When a work order fails every attempt (FAIL, not an error or a budget stop), --repair
auto (the default) asks the planner to repair the rest of the plan from the evidence
(the failure briefs, the committed orders, the repository at the branch's tip): the
failed order revised under a new id (WO-03r1), split, or given a prerequisite, orders
not yet run adjusted, committed orders untouched; the repaired plan is validated like
the first and the build goes on, at most --max-repairs times per build. Each repair is
recorded in <out>/builds/<plan hash>/repairs/<N>/. With --repair off, or when repairs
run out or the planner gives up, the build stops at the FAIL with the repository back
at the last commit.

-j N runs up to N work orders at once, each in a worktree of its own under the git
directory, started from the commit holding the earlier orders it depends on (derived
from the plan's files and commands; 'factory status' shows them), and puts their
commits on the branch in plan order: the history, and commit by commit the trees, of
a serial build. An order whose commit is applied on top of orders it did not see is
checked again there, and run again if the checks fail (see docs/build.md).

Running the same command again resumes at the first work order without a commit on
the branch (progress is read from the commits, never from a side file). The
repository lock is held for the whole build; a build killed in the middle of an
attempt is recovered by the next build. 'factory status --repo DIR' shows progress.

Budgets (--max-tokens, --max-cost-usd) cover the whole build across processes: what
each model call spent is recorded in the git directory before the call is sent and
after it returns, and a resumed build counts it (a call cut off by a crash counts as
its estimate). --reset-budget starts counting again on purpose.

The planner and every work order's SE also see a map of the repository's code (see
'factory map'), ranked for the spec and for the work order, within --map-tokens.

Artifacts: <out>/builds/<plan hash>/ holds events.jsonl, build_summary.json and one
directory of run artifacts per work order.

Exit codes: 0 every work order passed; 1 a work order failed, or planning failed;
2 refused before anything was modified (usage, dirty repo, lock held, main/master);
3 error (provider, interrupted; rolled back, summary written); 5 budget reached.`,
		Args: noArgs("build"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBuild(cmd, o, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.spec, "spec", "", "product specification file (this or --plan is required)")
	f.StringVar(&o.plan, "plan", "", "build from this plan directory (WO-NN.json files and WORK_ORDERS_MANIFEST.json, as 'factory plan' writes) instead of a spec")
	addBuildFlags(f, o)
	f.StringVar(&o.branch, "branch", "", "branch to build on (default factory/<plan hash>; never main or master)")
	o.temporal.add(f)
	f.BoolVar(&o.pr, "pr", false, "afterwards push the branch and open or update its pull request with the evidence, as 'factory pr' does (a build that fails is published as a draft with what passed); the token is checked before anything starts; with --temporal the workers push and the pull request goes to --repo-url's forge")
	o.forge.add(f, false)
	return cmd
}

// addBuildFlags registers the flags of a local build (build and issue).
func addBuildFlags(f *pflag.FlagSet, o *buildOptions) {
	f.StringVar(&o.run.repo, "repo", "", "the git repository to build in (required; created when it does not exist, else it must be clean)")
	f.StringVar(&o.run.out, "out", "", "directory for plans and build artifacts, outside the repository (required)")
	addAttemptFlags(f, &o.run)
	f.Lookup("max-attempts").Usage = "attempts per work order before the build stops (two identical failures in a row stop it earlier)"
	f.Lookup("json").Usage = "print the build summary as JSON to stdout"
	f.BoolVarP(&o.verbose, "verbose", "v", false, "on a terminal, print every step instead of one live line per work order")
	f.IntVarP(&o.jobs, "jobs", "j", 1, "work orders run at the same time, each in a worktree of its own (with --temporal: on any workers), integrated in plan order (see docs/build.md); 1 runs them one after the other")
	f.StringVar(&o.repair, "repair", "auto", "when a work order fails every attempt: auto asks the planner to repair the rest of the plan and goes on, off stops the build (see docs/build.md)")
	f.IntVar(&o.maxRepairs, "max-repairs", 2, "repairs of the plan per build, across resumes, with --repair auto")
	f.StringVar(&o.earlierPlan, "earlier-plan", "", "when the last build planned this spec with an earlier factory release (another template or validation rules): keep goes on with that build and its plan, checked against this release's rules; replan plans the spec again as a new build (default: go on when the plan recorded the spec's hash and it matches, else stop and ask)")
	f.BoolVar(&o.resetBudget, "reset-budget", false, "do not count what earlier runs of this build spent against --max-tokens / --max-cost-usd (by default a resumed build counts it)")
	addPlannerFlags(f, o)
}

// addPlannerFlags registers the flags that shape the planner of a build
// (build and eval).
func addPlannerFlags(f *pflag.FlagSet, o *buildOptions) {
	f.IntVar(&o.planMaxAttempts, "plan-max-attempts", 3, "planner calls per validation loop")
	f.IntVar(&o.mapTokens, "map-tokens", repomap.DefaultTokens, mapTokensHelp+", for the planner (ranked for the spec) and for each work order (ranked for its files)")
	f.StringVar(&o.template, "template", "", "custom planner prompt template; must contain {{PRODUCT_SPEC}} (default: the built-in one)")
	f.StringVar(&o.effort, "reasoning-effort", "medium", "planner reasoning effort (e.g. low, medium, high; empty to omit)")
	f.Int64Var(&o.maxOutputTokens, "max-output-tokens", 64000, "planner output token budget per call")
	f.BoolVar(&o.review, "review", true, "run the planner's LLM reviewer pass (--no-review to skip)")
	f.Bool("no-review", false, "skip the planner's LLM reviewer pass")
	f.StringVar(&o.reviewModel, "review-model", "", "reviewer model (default: --llm-model)")
	f.IntVar(&o.maxWaitSeconds, "max-wait-seconds", 1800, "bound on waiting for one background planner response")
	f.DurationVar(&o.pollInterval, "poll-interval", llm.DefaultPollInterval, "how often to poll a background planner response")
	f.DurationVar(&o.backoff, "retry-backoff", llm.DefaultRetryBase, "first wait before retrying a planner request that failed in transit")
}

// checkPlannerFlags applies --no-review and checks the planner flags.
func (o *buildOptions) checkPlannerFlags(cmd *cobra.Command) error {
	if noReview, _ := cmd.Flags().GetBool("no-review"); noReview {
		o.review = false
	}
	if o.planMaxAttempts < 1 || o.maxOutputTokens < 1 || o.maxWaitSeconds < 1 || o.pollInterval <= 0 || o.backoff <= 0 {
		return usagef("--plan-max-attempts, --max-output-tokens, --max-wait-seconds, --poll-interval and --retry-backoff must be positive")
	}
	if o.mapTokens < 0 {
		return usagef("--map-tokens must not be negative")
	}
	return nil
}

func runBuild(cmd *cobra.Command, o *buildOptions, env Env) error {
	switch {
	case o.jobs < 1:
		return usagef("--jobs must be at least 1, got %d", o.jobs)
	case o.repair != "auto" && o.repair != "off":
		return usagef("--repair must be auto or off, got %q", o.repair)
	case o.earlierPlan != "" && o.earlierPlan != builder.EarlierKeep && o.earlierPlan != builder.EarlierReplan:
		return usagef("--earlier-plan must be keep or replan, got %q", o.earlierPlan)
	case o.maxRepairs < 0:
		return usagef("--max-repairs must not be negative, got %d", o.maxRepairs)
	case o.jobs > 1 && (o.run.record != "" || o.run.replay != ""):
		// A transcript holds the calls in the order they were made, and
		// the work orders of a parallel build call in no fixed order.
		return usagef("--jobs %d with --record or --replay: a transcript is replayed in the order its calls were made, which a parallel build does not fix; record and replay with --jobs 1", o.jobs)
	}
	if o.temporal.hostPort != "" {
		if o.pr && cmd.Flags().Changed("remote") {
			return usagef("--remote does not apply with --temporal: the workers push the build's branch to --repo-url, and its pull request goes to that repository's forge")
		}
		if err := o.checkPlannerFlags(cmd); err != nil {
			return err
		}
		return runBuildTemporal(cmd, o, env)
	}
	if err := requireFlags("build", required{"--repo", o.run.repo}, required{"--out", o.run.out},
		required{"--llm-model", o.run.model}); err != nil {
		return err
	}
	switch {
	case o.spec == "" && o.plan == "":
		return usagef("--spec FILE or --plan DIR is required (see 'factory build --help')")
	case o.spec != "" && o.plan != "":
		return usagef("--spec and --plan cannot be used together: --plan builds from an existing plan")
	case builder.IsProtectedBranch(o.branch):
		return usagef("--branch %s: factory build never works on main or master; give another branch (default factory/<plan hash>)", o.branch)
	}
	if err := o.checkPlannerFlags(cmd); err != nil {
		return err
	}
	conn := o.conn
	if o.pr && conn == nil {
		o.forge.base = o.temporal.base // build's --base: see temporal.go
		// Before any model call: a build whose publication cannot work
		// must not spend anything.
		repo, err := gitws.Open(cmd.Context(), o.run.repo)
		if err != nil {
			return usagef("--pr needs an existing repository with a remote: %v", err)
		}
		if conn, err = connectForge(cmd.Context(), env, repo, &o.forge); err != nil {
			return err
		}
	}
	tmpl, err := o.loadTemplate()
	if err != nil {
		return err
	}
	attempt, err := attemptOptions(&o.run, env)
	if err != nil {
		return err
	}
	seModel, plannerModel, meter, err := o.models(env, attempt.Progress)
	if err != nil {
		return err
	}
	bo := o.builderOptions(tmpl, attempt, seModel, plannerModel, meter)
	bo.SpecPath, bo.PlanDir, bo.Repo, bo.Out, bo.Branch = o.spec, o.plan, o.run.repo, o.run.out, o.branch
	bo.ResetBudget, bo.Jobs = o.resetBudget, o.jobs
	bo.Repair, bo.MaxRepairs = o.repair == "auto", o.maxRepairs
	bo.EarlierPlan = o.earlierPlan
	var view *liveView
	if width, ok := o.liveTerminal(env); ok {
		view = newLiveView(env.Stderr, width)
		defer view.Close()
		bo.OnUpdate = view.Update
		bo.Progress = &noteFilter{w: view}
		bo.Run.Progress = bo.Progress
	}
	sum, err := builder.Run(cmd.Context(), bo)
	view.Close() // before the summary and any error
	var refused *builder.RefusedError
	if errors.As(err, &refused) {
		return usagef("%s", refused.Msg)
	}
	printBuildSummary(env, o.run.jsonOut, sum)
	verdictErr := buildVerdictError(sum, err)
	if conn == nil || (sum.Verdict != builder.VerdictPass && sum.Verdict != builder.VerdictFail) {
		return verdictErr
	}
	return withPublication(env, verdictErr, publishAfterBuild(cmd.Context(), env, o, conn))
}

// withPublication is a build's error once it was published: the build's
// verdict decides the exit code, and a publication that failed after a
// failed build is said on stderr.
func withPublication(env Env, verdictErr, pubErr error) error {
	if verdictErr != nil {
		if pubErr != nil {
			fmt.Fprintf(env.Stderr, "factory: %v\n", pubErr)
		}
		return verdictErr
	}
	return pubErr
}

// reportAfterBuild reports a publication after a build: on stderr when
// stdout holds the build's JSON.
func reportAfterBuild(env Env, jsonOut bool, rec *forge.Record, err error) error {
	if jsonOut {
		env.Stdout = env.Stderr
	}
	return reportPR(env, false, rec, err)
}

// publishAfterBuild publishes the build that just ran (--pr); the pull
// request's line goes to stderr when stdout holds the JSON summary.
func publishAfterBuild(ctx context.Context, env Env, o *buildOptions, conn *forgeConn) error {
	repo, err := gitws.Open(ctx, o.run.repo)
	if err != nil {
		return &internalError{err: err}
	}
	st, err := builder.ReadStatus(ctx, repo.Root)
	if err != nil {
		return &internalError{err: err}
	}
	pub := o.pub
	if pub.rerun == "" {
		pub.rerun = rerunHint(st)
	}
	rec, err := publish(ctx, env, conn, repo, st, &o.forge, pub)
	return reportAfterBuild(env, o.run.jsonOut, rec, err)
}

// buildVerdictError maps a build's verdict to the command's error.
func buildVerdictError(sum *builder.Summary, err error) error {
	switch sum.Verdict {
	case builder.VerdictPass:
		return nil
	case builder.VerdictFail:
		return failError{}
	case builder.VerdictPlanInvalid:
		return &exitError{code: ExitFail, err: err}
	case builder.VerdictBudget:
		var budget *llm.BudgetError
		if errors.As(err, &budget) {
			err = budget // the limit and what was spent, without the wrapping
		}
		return &exitError{code: ExitBudget, err: err}
	}
	if err == nil {
		err = errors.New("the build ended without a verdict")
	}
	if pe, ok := llm.AsProviderError(err); ok {
		return &internalError{err: pe}
	}
	return &internalError{err: err}
}

// liveTerminal reports whether the build is drawn as live lines, and the
// terminal's width: on a terminal, unless -v, -q or --json asks otherwise.
func (o *buildOptions) liveTerminal(env Env) (width func() int, ok bool) {
	if env.Terminal == nil || o.verbose || o.run.quiet || o.run.jsonOut {
		return nil, false
	}
	if _, ok := env.Terminal(); !ok {
		return nil, false
	}
	return func() int { w, _ := env.Terminal(); return w }, true
}

// builderOptions are the options of a build with its models connected
// (see models), but for what to build and where.
func (o *buildOptions) builderOptions(tmpl string, attempt factory.Options, se, plan llm.Model, meter *llm.Meter) builder.Options {
	attempt.Model, attempt.Prices = se, meter.Prices()
	_, attempt.ModelName, _ = parseModelSpec(o.run.model)
	review, _ := reviewModelName(o.run.model, o.reviewModel)
	return builder.Options{
		PlannerModel: plan, Template: tmpl, ReasoningEffort: o.effort, MaxOutputTokens: o.maxOutputTokens,
		PlanMaxAttempts: o.planMaxAttempts, Review: o.review, ReviewModelName: review,
		Run: attempt, Python: planner.NewPython3Inspector(), Progress: attempt.Progress,
		Meter: meter, MapTokens: o.mapTokens,
	}
}

func (o *buildOptions) loadTemplate() (string, error) {
	if o.template == "" {
		return planner.DefaultTemplate, nil
	}
	b, err := os.ReadFile(o.template)
	if err != nil {
		return "", usagef("read template: %v", err)
	}
	if err := planner.CheckTemplate(string(b)); err != nil {
		return "", usagef("template %s: %v", o.template, err)
	}
	return string(b), nil
}

// models connects the work orders' model (OpenAI: Chat Completions) and
// the planner's (OpenAI: Responses), both behind one Meter so that one
// budget covers the whole build. Under --replay both answer from the one
// transcript, and under --record both go to it, in the order the build
// asks.
func (o *buildOptions) models(env Env, progress io.Writer) (se, plan llm.Model, meter *llm.Meter, err error) {
	se, name, err := seModel(&o.run, env)
	if err != nil {
		return nil, nil, nil, err
	}
	plan = se
	if o.run.replay == "" {
		plan, _, err = newModel(env, o.run.model, rolePlanner, modelFlags{
			baseURL: o.run.baseURL, timeout: time.Duration(o.maxWaitSeconds) * time.Second,
			pollInterval: o.pollInterval, retryBase: o.backoff, progress: progress,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		if rec, ok := se.(*llm.Recorder); ok {
			plan = rec.Wrap(plan)
		}
	}
	names := []string{name}
	if o.reviewModel != "" {
		review, err := reviewModelName(o.run.model, o.reviewModel)
		if err != nil {
			return nil, nil, nil, err
		}
		names = append(names, review)
	}
	if meter, err = budgetMeter(&o.run, se, names...); err != nil {
		return nil, nil, nil, err
	}
	return meter, meter.Wrap(plan), meter, nil
}

// printBuildSummary prints the summary as JSON, or a short account.
func printBuildSummary(env Env, asJSON bool, sum *builder.Summary) {
	if asJSON {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err == nil {
			fmt.Fprintf(env.Stdout, "%s\n", b)
		}
		return
	}
	verdict := sum.Verdict
	if n := appliedRepairs(sum.Repairs); n > 0 && sum.Verdict == builder.VerdictPass {
		verdict += " (passed after " + plural(n, "repair") + ")"
	}
	fmt.Fprintf(env.Stdout, "verdict: %s\nbranch: %s\nplan: %s (%s)\n", verdict, sum.Branch, sum.PlanDir, sum.PlanSource)
	for _, w := range sum.WorkOrders {
		fmt.Fprintf(env.Stdout, "  %s\n", workOrderLine(w))
	}
	printRepairs(env, sum.Repairs)
	if sum.BuildDir != "" {
		fmt.Fprintf(env.Stdout, "build summary: %s/build_summary.json\n", sum.BuildDir)
	}
}

// workOrderLine is one work order in build and status output.
func workOrderLine(w builder.WorkOrder) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-6s %-8s", w.ID, w.Outcome)
	switch w.Outcome {
	case builder.OutcomePassed:
		fmt.Fprintf(&sb, " %s", gitws.ShortHash(w.Commit))
	case builder.OutcomeFailed:
		if w.Stage != "" {
			fmt.Fprintf(&sb, " %s", w.Stage)
		}
	}
	fmt.Fprintf(&sb, "  %s", w.Title)
	if w.Outcome == builder.OutcomeFailed && w.BriefPath != "" {
		fmt.Fprintf(&sb, "\n         failure brief: %s", w.BriefPath)
	}
	return sb.String()
}

// printRepairs lists what each repair of the plan did.
func printRepairs(env Env, repairs []builder.RepairRecord) {
	if len(repairs) == 0 {
		return
	}
	fmt.Fprintf(env.Stdout, "repairs: %d\n", len(repairs))
	for _, r := range repairs {
		fmt.Fprintf(env.Stdout, "  %s\n", r.Describe())
		if r.Outcome == builder.RepairApplied {
			fmt.Fprintf(env.Stdout, "         diff: %s\n", filepath.Join(r.Dir, "diff.txt"))
		}
	}
}

func appliedRepairs(repairs []builder.RepairRecord) int {
	n := 0
	for _, r := range repairs {
		if r.Outcome == builder.RepairApplied {
			n++
		}
	}
	return n
}
