package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
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
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/temporal"
)

// temporalFlags say where the Temporal server is: --temporal,
// --namespace and --task-queue, for build, status, cancel and worker.
type temporalFlags struct {
	hostPort, namespace, taskQueue string
}

func (t *temporalFlags) add(f *pflag.FlagSet, what string) {
	f.StringVar(&t.hostPort, "temporal", "", what+" (HOST:PORT of the Temporal frontend); see docs/temporal.md")
	f.StringVar(&t.namespace, "namespace", temporal.DefaultNamespace, "Temporal namespace (with --temporal)")
	f.StringVar(&t.taskQueue, "task-queue", temporal.DefaultTaskQueue, "Temporal task queue the workers poll (with --temporal)")
}

func (t *temporalFlags) conn(env Env) temporal.Connection {
	return temporal.Connection{HostPort: t.hostPort, Namespace: t.namespace, TaskQueue: t.taskQueue, Log: env.Stderr}
}

// buildTemporalFlags are build's flags for a build on Temporal workers.
type buildTemporalFlags struct {
	temporalFlags
	repoURL, base    string
	detach           bool
	heartbeatTimeout time.Duration
}

func (t *buildTemporalFlags) add(f *pflag.FlagSet) {
	t.temporalFlags.add(f, "submit the build to Temporal workers ('factory worker') instead of building here")
	f.StringVar(&t.repoURL, "repo-url", "", "with --temporal: the git remote the workers fetch from and push the build branch to (required with --temporal)")
	f.StringVar(&t.base, "base", "", "with --temporal: branch of the remote (or commit) the build branch starts from (default: the remote's HEAD); with --pr: "+baseHelp)
	f.BoolVar(&t.detach, "detach", false, "with --temporal: print the workflow id and exit 0 instead of following the build")
	f.DurationVar(&t.heartbeatTimeout, "heartbeat-timeout", temporal.DefaultHeartbeatTimeout, "with --temporal: a work order whose worker is silent this long moves to another worker")
}

// workerSideFlags are build flags a Temporal build takes from each
// worker's own command line, never from the submitter: keys, endpoints,
// prices and the commands' confinement stay out of the workflow.
var workerSideFlags = []string{"repo", "out", "llm-base-url", "llm-timeout-seconds", "sandbox", "sandbox-home", "sandbox-hide", "sandbox-cache",
	"deps", "registry", "deps-allow-sdist",
	"python", "prices", "record", "replay", "env-policy", "pass-env", "max-wait-seconds", "poll-interval", "retry-backoff"}

// runBuildTemporal submits the build as a workflow and follows it,
// printing what a local build prints, with the same exit codes.
func runBuildTemporal(cmd *cobra.Command, o *buildOptions, env Env) error {
	t := &o.temporal
	if err := requireFlags("build", required{"--repo-url", t.repoURL}, required{"--llm-model", o.run.model}); err != nil {
		return err
	}
	var given []string
	for _, name := range workerSideFlags {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	switch {
	case len(given) > 0:
		return usagef("with --temporal, %s belong on 'factory worker': each worker builds with its own keys, endpoints, prices and sandbox", strings.Join(given, ", "))
	case o.spec == "" && o.plan == "":
		return usagef("--spec FILE or --plan DIR is required (see 'factory build --help')")
	case o.spec != "" && o.plan != "":
		return usagef("--spec and --plan cannot be used together: --plan builds from an existing plan")
	case builder.IsProtectedBranch(o.branch):
		return usagef("--branch %s: factory build never works on main or master; give another branch (default factory/<plan hash>)", o.branch)
	case o.run.maxTokens < 0 || o.run.maxCostUSD < 0:
		return usagef("--max-tokens and --max-cost-usd cannot be negative")
	case t.heartbeatTimeout < time.Second:
		return usagef("--heartbeat-timeout must be at least 1s")
	}
	in, err := o.buildInput()
	if err != nil {
		return err
	}
	var fc *forgeConn
	if o.pr {
		// Before the workflow starts: a build whose publication cannot
		// work must not spend anything.
		o.forge.base = t.base
		if fc, err = connectForgeURL(env, t.repoURL, &o.forge); err != nil {
			return err
		}
	}
	conn := t.conn(env)
	id, err := temporal.Submit(cmd.Context(), conn, in)
	if err != nil {
		return &internalError{err: err}
	}
	if t.detach {
		fmt.Fprintln(env.Stdout, id)
		return nil
	}
	progress := env.Stderr
	if o.run.quiet {
		progress = nil
	} else {
		fmt.Fprintf(env.Stderr, "workflow %s on %s: building %s into branch %s\n", id, t.hostPort, in.RepoURL, in.Branch)
	}
	res, err := temporal.Follow(cmd.Context(), conn, id, progress)
	if err != nil {
		return &internalError{err: err}
	}
	printTemporalResult(env, o.run.jsonOut, res)
	verdictErr := temporalExit(res)
	if fc == nil || (res.Verdict != builder.VerdictPass && res.Verdict != builder.VerdictFail) {
		return verdictErr
	}
	rec, err := publishTemporal(cmd.Context(), env, fc, res, &o.forge, o.spec, o.plan, publication{rerun: temporalRerunHint(o, res)})
	return withPublication(env, verdictErr, reportAfterBuild(env, o.run.jsonOut, rec, err))
}

// temporalRerunHint is the command that resumes the build on the workers
// (or repeats it: a finished build's rerun changes nothing). A local
// remote is not named: the body is public, the user's directories are
// not.
func temporalRerunHint(o *buildOptions, res temporal.BuildResult) string {
	from := "--plan " + shellWord(filepath.Base(o.plan))
	if o.spec != "" {
		from = "--spec " + shellWord(filepath.Base(o.spec))
	}
	url := "REPO_URL"
	if u, err := neturl.Parse(res.RepoURL); err == nil && u.Scheme != "" && u.Scheme != "file" && u.Host != "" {
		url = shellWord(forge.Redact(res.RepoURL))
	}
	return fmt.Sprintf("factory build --temporal HOST:PORT --repo-url %s %s --branch %s --llm-model MODEL --pr", url, from, shellWord(res.Branch))
}

// buildInput is the workflow's input from the flags.
func (o *buildOptions) buildInput() (temporal.BuildInput, error) {
	tmpl, err := o.loadTemplate()
	if err != nil {
		return temporal.BuildInput{}, err
	}
	_, name, err := parseModelSpec(o.run.model)
	if err != nil {
		return temporal.BuildInput{}, err
	}
	review, err := reviewModelName(o.run.model, o.reviewModel)
	if err != nil {
		return temporal.BuildInput{}, err
	}
	hash, err := builder.PlanHash(builder.Options{SpecPath: o.spec, PlanDir: o.plan, Template: tmpl,
		ReasoningEffort: o.effort, Run: factory.Options{ModelName: name}})
	var refused *builder.RefusedError
	if errors.As(err, &refused) {
		return temporal.BuildInput{}, usagef("%s", refused.Msg)
	} else if err != nil {
		return temporal.BuildInput{}, err
	}
	in := temporal.BuildInput{
		RepoURL: o.temporal.repoURL, Base: o.temporal.base, Branch: o.branch, PlanHash: hash,
		Model: o.run.model, ModelName: name, Temperature: o.run.temperature, JSONSchema: o.run.jsonSchema,
		MaxAttempts: o.run.maxAttempts, TimeoutSeconds: o.run.timeoutSeconds, VerifyCommands: o.run.verifyCommands,
		ReasoningEffort: o.effort, MaxOutputTokens: o.maxOutputTokens, PlanMaxAttempts: o.planMaxAttempts,
		Review: o.review, ReviewModel: review, MaxTokens: o.run.maxTokens, MaxCostUSD: o.run.maxCostUSD, MapTokens: o.mapTokens,
		HeartbeatTimeout: o.temporal.heartbeatTimeout, Jobs: o.jobs, Repair: o.repair == "auto", MaxRepairs: o.maxRepairs,
	}
	if in.Branch == "" {
		in.Branch = "factory/" + hash
	}
	if tmpl != planner.DefaultTemplate {
		in.Template = tmpl
	}
	if o.spec != "" {
		spec, err := os.ReadFile(o.spec)
		if err != nil {
			return in, usagef("--spec: %v", err)
		}
		in.Spec = string(spec)
	} else {
		raw, _, err := planner.LoadPlan(o.plan)
		if err != nil {
			return in, usagef("--plan: %v", err)
		}
		in.Plan = raw
	}
	return in, nil
}

// printTemporalResult prints a distributed build's result as JSON, or the
// short account a local build prints, with the worker of each work order.
func printTemporalResult(env Env, asJSON bool, res temporal.BuildResult) {
	res.Lines = nil
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			fmt.Fprintf(env.Stdout, "%s\n", b)
		}
		return
	}
	verdict := res.Verdict
	if n := appliedRepairs(res.Repairs); n > 0 && res.Verdict == builder.VerdictPass {
		verdict += " (passed after " + plural(n, "repair") + ")"
	}
	fmt.Fprintf(env.Stdout, "verdict: %s\nworkflow: %s\nbranch: %s of %s", verdict, res.WorkflowID, res.Branch, res.RepoURL)
	if res.Head != "" {
		fmt.Fprintf(env.Stdout, " at %s", gitws.ShortHash(res.Head))
	}
	fmt.Fprintf(env.Stdout, "\nplan: %s (%s)\n", res.PlanHash, res.PlanSource)
	for _, w := range res.WorkOrders {
		line := workOrderLine(w.WorkOrder)
		if w.Worker != "" {
			first, rest, _ := strings.Cut(line, "\n")
			line = first + "  [" + w.Worker + "]"
			if rest != "" {
				line += "\n" + rest
			}
		}
		fmt.Fprintf(env.Stdout, "  %s\n", line)
	}
	printRepairs(env, res.Repairs)
}

// temporalExit maps a distributed build's verdict to the local build's
// exit codes; a canceled build is an interrupted one (3).
func temporalExit(res temporal.BuildResult) error {
	msg := errors.New(res.Error)
	switch res.Verdict {
	case builder.VerdictPass:
		return nil
	case builder.VerdictFail:
		return failError{}
	case builder.VerdictPlanInvalid:
		return &exitError{code: ExitFail, err: msg}
	case builder.VerdictBudget:
		return &exitError{code: ExitBudget, err: msg}
	case temporal.VerdictCanceled:
		return &internalError{err: fmt.Errorf("workflow %s was canceled; the branch keeps the work orders committed before", res.WorkflowID)}
	}
	if res.Error == "" {
		msg = errors.New("the build ended without a verdict")
	}
	return &internalError{err: msg}
}

// statusTemporalFlags are status's flags for a build on Temporal.
type statusTemporalFlags struct {
	temporalFlags
	workflow string
}

func (t *statusTemporalFlags) add(f *pflag.FlagSet) {
	t.temporalFlags.add(f, "show a build submitted with 'factory build --temporal'")
	f.StringVar(&t.workflow, "workflow", "", "with --temporal: the workflow id 'factory build --temporal' printed")
}

func runStatusTemporal(cmd *cobra.Command, t *statusTemporalFlags, jsonOut bool, env Env) error {
	if err := requireFlags("status", required{"--workflow", t.workflow}); err != nil {
		return err
	}
	res, err := temporal.Status(cmd.Context(), t.conn(env), t.workflow)
	switch {
	case errors.Is(err, temporal.ErrNoWorkflow):
		return usagef("%v", err)
	case err != nil:
		return &internalError{err: err}
	}
	printTemporalResult(env, jsonOut, res)
	return nil
}

type cancelOptions struct {
	temporalFlags
	workflow string
}

func newCancelCmd(env Env) *cobra.Command {
	o := &cancelOptions{}
	cmd := &cobra.Command{
		Use:   "cancel --temporal HOST:PORT --workflow ID",
		Short: "Cancel a build running on Temporal workers",
		Long: `Ask a build submitted with 'factory build --temporal' to stop. The work order that
runs is rolled back on its worker; the build branch keeps the work orders already
committed and pushed. The submitting 'factory build' exits with 3.

Exit codes: 0 cancel requested, 2 usage or no such workflow, 3 the server is unreachable.`,
		Args: noArgs("cancel"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("cancel", required{"--temporal", o.hostPort}, required{"--workflow", o.workflow}); err != nil {
				return err
			}
			err := temporal.Cancel(cmd.Context(), o.conn(env), o.workflow)
			switch {
			case errors.Is(err, temporal.ErrNoWorkflow):
				return usagef("%v", err)
			case err != nil:
				return &internalError{err: err}
			}
			fmt.Fprintf(env.Stdout, "cancel requested for workflow %s\n", o.workflow)
			return nil
		},
	}
	o.temporalFlags.add(cmd.Flags(), "the Temporal server the build runs on")
	cmd.Flags().StringVar(&o.workflow, "workflow", "", "the workflow id 'factory build --temporal' printed (required)")
	return cmd
}
