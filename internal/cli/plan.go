package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/repomap/gitsrc"
)

type planOptions struct {
	spec, out, template, artifactsDir, repo string
	overwrite, jsonOut                      bool

	model, effort, reviewModel string
	maxOutputTokens            int64
	maxAttempts                int
	review                     bool
	maxWaitSeconds             int
	pollInterval, retryBackoff time.Duration
	conn                       modelFlags
	quiet                      bool
	mapTokens                  int
}

func newPlanCmd(env Env) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:     "plan --spec FILE --out DIR",
		Aliases: []string{"compile"},
		Short:   "Compile a product spec into validated work orders WO-01.json … WO-NN.json",
		Long: `Compile a product specification into work orders for 'factory run'.

A model drafts the plan (OpenAI: Responses API, background mode with polling;
anthropic:NAME: the Messages API, streamed; see docs/providers.md); the deterministic validators check it (error codes E000-E007, E101-E108, warnings W101-W102; see
the README); on errors the model revises it against the exact error list, up to
--max-attempts times. A reviewer model then checks acceptance commands against the notes
and the APIs across work orders (--no-review to skip); its findings go back to the planner
for at most two revisions, each validated again. A revision that fails validation never
replaces a plan that passed.

With --repo, the planner and the reviewer also see a map of the repository's code:
definitions and signatures of its source files, ranked for the spec, within
--map-tokens (see 'factory map', which prints it).

Writes WO-NN.json files and then WORK_ORDERS_MANIFEST.json (with the compile hash, model,
template hash and validator version) to --out, atomically; artifacts of every attempt
and compile_summary.json go to --artifacts-dir. Prints the work orders written, or with
--json the content of compile_summary.json (also when the plan fails).

Exit codes: 0 plan written; 1 the plan is still invalid (or not JSON) after every
attempt; 2 refused before anything was created (usage, unreadable spec or template,
existing plan without --overwrite, the provider's API key not set); 3 error: the model
provider refused or could not be reached (bad key, unknown model, wrong URL, retries
exhausted), interrupted, replay mismatch, or an I/O error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd, o, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.spec, "spec", "", "product specification file (required)")
	f.StringVar(&o.out, "out", "", "directory for WO-NN.json and WORK_ORDERS_MANIFEST.json (required; --outdir is an alias)")
	aliasFlag(f, "out", "outdir")
	f.StringVar(&o.template, "template", "", "custom planner prompt template; must contain {{PRODUCT_SPEC}} (default: the built-in one)")
	f.StringVar(&o.artifactsDir, "artifacts-dir", "", "directory for prompts, raw replies, validation errors and compile_summary.json (default <out>/compile_artifacts)")
	f.StringVar(&o.repo, "repo", "", "target git repository: its tracked files are the state preconditions are checked against, and the planner sees a map of its code")
	f.IntVar(&o.mapTokens, "map-tokens", repomap.DefaultTokens, mapTokensHelp+"; needs --repo")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace a plan already in --out")
	f.BoolVar(&o.jsonOut, "json", false, "print compile_summary.json to stdout instead of the list of work orders (--print-summary is an alias)")
	aliasFlag(f, "json", "print-summary")
	f.StringVar(&o.model, "llm-model", "gpt-5.2-codex", "planner "+modelHelp)
	f.StringVar(&o.effort, "reasoning-effort", "medium", "reasoning effort sent to the model (e.g. low, medium, high; empty to omit)")
	f.Int64Var(&o.maxOutputTokens, "max-output-tokens", 64000, "output token budget per call (doubled once when a reply is incomplete)")
	f.IntVar(&o.maxAttempts, "max-attempts", 3, "planner calls per validation loop")
	f.BoolVar(&o.review, "review", true, "run the LLM reviewer pass (--no-review or --review=false to skip)")
	f.StringVar(&o.reviewModel, "review-model", "", "reviewer model, of the same provider as --llm-model (default: --llm-model)")
	f.IntVar(&o.maxWaitSeconds, "max-wait-seconds", 1800, "bound on waiting for one background response")
	f.DurationVar(&o.pollInterval, "poll-interval", llm.DefaultPollInterval, "how often to poll a background response")
	f.DurationVar(&o.retryBackoff, "retry-backoff", llm.DefaultRetryBase, "first wait before retrying HTTP 408/429/5xx, a timeout or a dropped connection (then doubled; Retry-After wins)")
	f.StringVar(&o.conn.baseURL, "llm-base-url", "", baseURLHelp)
	f.StringVar(&o.conn.record, "record", "", recordHelp)
	f.StringVar(&o.conn.replay, "replay", "", "answer model requests from this JSONL transcript (no network, no API key)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print progress to stderr")
	// --no-review is the spelling the seeds use.
	f.Bool("no-review", false, "skip the LLM reviewer pass")
	return cmd
}

func runPlan(cmd *cobra.Command, o *planOptions, env Env) error {
	if noReview, _ := cmd.Flags().GetBool("no-review"); noReview {
		o.review = false
	}
	for _, a := range [][2]string{{"out", "outdir"}, {"json", "print-summary"}} {
		if err := resolveAlias(cmd.Flags(), a[0], a[1]); err != nil {
			return err
		}
	}
	if err := requireFlags("plan", required{"--spec", o.spec}, required{"--out", o.out}); err != nil {
		return err
	}
	if o.mapTokens < 0 {
		return usagef("--map-tokens must not be negative")
	}
	if o.maxAttempts < 1 || o.maxOutputTokens < 1 || o.maxWaitSeconds < 1 || o.pollInterval <= 0 || o.retryBackoff <= 0 {
		return usagef("--max-attempts, --max-output-tokens, --max-wait-seconds, --poll-interval and --retry-backoff must be positive")
	}
	spec, err := os.ReadFile(o.spec)
	if err != nil {
		return usagef("read spec: %v", err)
	}
	if strings.TrimSpace(string(spec)) == "" {
		return usagef("spec %s is empty", o.spec)
	}
	tmpl := planner.DefaultTemplate
	if o.template != "" {
		b, err := os.ReadFile(o.template)
		if err != nil {
			return usagef("read template: %v", err)
		}
		tmpl = string(b)
	}
	if err := planner.CheckTemplate(tmpl); err != nil {
		return usagef("template %s: %v", o.template, err)
	}
	if err := planner.CheckOutdir(o.out, o.overwrite); err != nil {
		return usagef("%v", err)
	}
	repoFiles, err := trackedFiles(cmd.Context(), o.repo)
	if err != nil {
		return err
	}
	progress := env.Stderr
	if o.quiet {
		progress = nil
	}
	repoMap, err := plannerMap(cmd.Context(), o.repo, string(spec), o.mapTokens, progress)
	if err != nil {
		return err
	}
	// Before any directory is created: a missing key is a refusal (exit 2)
	// that must leave nothing behind.
	o.conn.timeout, o.conn.pollInterval, o.conn.retryBase = time.Duration(o.maxWaitSeconds)*time.Second, o.pollInterval, o.retryBackoff
	o.conn.progress = progress
	model, modelName, err := newModel(env, o.model, rolePlanner, o.conn)
	if err != nil {
		return err
	}
	reviewModel, err := reviewModelName(o.model, o.reviewModel)
	if err != nil {
		return err
	}
	artifacts := o.artifactsDir
	if artifacts == "" {
		artifacts = filepath.Join(o.out, "compile_artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return usagef("create artifacts directory: %v", err)
	}
	out, err := planner.Compile(cmd.Context(), planner.Options{
		Spec: string(spec), Template: tmpl,
		Model: model, ModelName: modelName, ReasoningEffort: o.effort, MaxOutputTokens: o.maxOutputTokens,
		MaxAttempts: o.maxAttempts, Review: o.review, ReviewModelName: reviewModel, MaxReviewCycles: 2,
		Env:          planner.Env{RepoFiles: repoFiles, Python: planner.NewPython3Inspector()},
		ArtifactsDir: artifacts, Progress: progress, RepoMap: repoMap,
	})
	if o.jsonOut {
		printSummaryFile(env, filepath.Join(artifacts, "compile_summary.json"))
	}
	if err != nil {
		return planError(err, o.out, artifacts, env)
	}
	written, err := planner.WritePlan(o.out, out.Manifest, planner.CompileInfo{
		CompileHash: out.Summary.CompileHash, Model: modelName, ReasoningEffort: o.effort,
		TemplateSHA256: out.Summary.TemplateSHA256, ValidatorVersion: planner.ValidatorVersion,
		SpecSHA256: canon.SHA256Hex(spec),
	})
	if err != nil {
		return &exitError{code: ExitInternal, err: fmt.Errorf("write plan: %w", err)}
	}
	for _, w := range out.Summary.Warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	if o.jsonOut {
		return nil
	}
	fmt.Fprintf(env.Stdout, "plan: %d work orders in %s (compile %s)\n", len(out.Manifest.WorkOrders), o.out, out.Summary.CompileHash)
	for _, name := range written {
		fmt.Fprintf(env.Stdout, "  %s\n", filepath.Join(o.out, name))
	}
	return nil
}

// planError maps a compile failure to its exit code: 1 for a plan that is
// still invalid (which also leaves validation_errors.json in the output
// directory), 3 for everything else — a provider or model failure, an
// interruption, an I/O error.
func planError(err error, outdir, artifacts string, env Env) error {
	var invalid *planner.InvalidPlanError
	if errors.As(err, &invalid) {
		for _, e := range invalid.Issues {
			fmt.Fprintf(env.Stderr, "%s\n", e)
		}
		if werr := planner.WriteValidationErrors(outdir, invalid.Issues); werr != nil {
			return &exitError{code: ExitInternal, err: errors.Join(err, werr)}
		}
		return &exitError{code: ExitFail, err: fmt.Errorf("%w; see %s", err, artifacts)}
	}
	return &exitError{code: ExitInternal, err: err}
}

// printSummaryFile copies a summary file (run_summary.json,
// compile_summary.json) to stdout, ending it with a newline.
func printSummaryFile(env Env, path string) {
	if data, err := os.ReadFile(path); err == nil {
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		env.Stdout.Write(data)
	}
}

// plannerMap is the repository map of HEAD of dir ranked for spec, within
// tokens; "" without a repository or budget.
func plannerMap(ctx context.Context, dir, spec string, tokens int, progress io.Writer) (string, error) {
	if dir == "" || tokens == 0 {
		return "", nil
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return "", usagef("--repo: %v", err)
	}
	start := time.Now()
	v, m, err := gitsrc.ForSpec(ctx, repo, spec, tokens)
	if err != nil {
		return "", &exitError{code: ExitInternal, err: err}
	}
	reportMap(progress, m, start)
	return v.Text, nil
}

// trackedFiles is the starting file state for plan validation: the tracked
// files of --repo, or none without it.
func trackedFiles(ctx context.Context, dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return nil, usagef("--repo: %v", err)
	}
	files, err := repo.Files(ctx)
	if err != nil {
		return nil, usagef("--repo: %v", err)
	}
	return files, nil
}
