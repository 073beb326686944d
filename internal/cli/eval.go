package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/eval"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// evalOptions are the flags of `factory eval`: those of build (but one
// --llm-model per model, and --record/--replay naming directories) and the
// eval's own.
type evalOptions struct {
	build                buildOptions
	suite                string
	models, cases        []string
	runs, jobs           int
	minSolveRate         float64
	recordDir, replayDir string
	remoteRoot           string // --temporal: bare repositories for the workers (eval_temporal.go)
}

func newEvalCmd(env Env) *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval --suite DIR --llm-model NAME [--llm-model NAME ...] --out DIR",
		Short: "Build every case of a suite with each model, N times, in fresh repos; check with hidden tests; report solve rates",
		Long: `Measure how often a model turns a spec into software that passes tests it never saw.

A suite is a directory of cases, SUITE/<case>/case.toml (format: docs/eval.md): a spec
(or a plan), optional start files, optional hidden files and the checks. Every case ×
model × run is built as 'factory build' would, each in its own fresh repository under
<out>/evals/<eval id>/runs/<case>/<model>/<run>/ (repo/, out/, build.log). After the
build the built tree is copied, the hidden files are added and the checks run there,
confined like verification commands. The hidden files are never in the repository, in
a prompt, or readable by the build's commands: the suite, the check trees and the
result files are hidden from them by the sandbox.

A run is solved when its build passed and every check exited 0; a run whose build
could not finish (the provider down, a replay mismatch) is an error, counted apart and
done again by the next invocation. The eval id is the hash of the suite's files, the
models, --runs and the flags that shape builds: the same command resumes (finished runs
are not done again) and Ctrl-C keeps what finished.

Results: <out>/evals/<eval id>/results.jsonl (one line per run, sorted) and
summary.json (per model: solve rate with its 95% Wilson interval, first-try solves,
tokens and cost per run and per solved run, repairs of the plan per run and per solved
run, median wall time; per case: solved runs per model), printed as a table (or as JSON
with --json). --repair and --max-repairs are factory build's, for every run's build.

--max-tokens and --max-cost-usd bound the whole eval: at the limit no new run starts
and the runs in flight stop; they are done by the next invocation.

--temporal HOST:PORT --remote-root DIR builds every run as a Build workflow on Temporal
workers ('factory worker') instead: a bare repository per run is created under DIR (a
directory the workers reach at the same path) with the run's start commit; the built
branch is fetched back and the checks run here. The hidden files never leave this
machine. The workflow ids come from the eval id and the run, so the same command
follows the workflows still running and collects those that ended; Ctrl-C stops
following, and the workflows go on. Worker-side flags (--llm-base-url, --python,
--prices, --record, --replay, ...) and the eval-wide budget are refused with --temporal.
See docs/eval.md.

Exit codes: 0 the eval ran; 1 --min-solve-rate given and a model is below it (or has
no judged run); 2 usage (nothing created); 3 interrupted or internal error (results so
far kept); 5 budget reached.`,
		Args: noArgs("eval"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, o, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.suite, "suite", "", "the suite: a directory of cases, each a directory with case.toml (required)")
	f.StringArrayVar(&o.models, "llm-model", nil, "a model to evaluate (repeatable; required): "+modelHelp)
	f.StringVar(&o.build.run.out, "out", "", "directory for the eval's runs and results, outside the suite (required)")
	f.IntVar(&o.runs, "runs", 1, "runs of each case per model")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "runs built at once (0: half the CPUs, at least 1)")
	f.StringArrayVar(&o.cases, "case", nil, "run only this case (repeatable)")
	f.Float64Var(&o.minSolveRate, "min-solve-rate", 0, "exit 1 when a model's solve rate (0 to 1) is below this: a CI gate")
	f.StringVar(&o.build.repair, "repair", "off", "when a work order of a run's build fails every attempt: auto repairs the plan and goes on, off (the default here, so that results compare with evals made before repairs and their transcripts replay) stops the build, as factory build --repair (with --temporal too)")
	f.IntVar(&o.build.maxRepairs, "max-repairs", 2, "repairs of the plan per run's build, with --repair auto")
	// The attempt flags of run and build, but for --llm-model (repeatable
	// here) and --record/--replay (one transcript per run).
	attempt := pflag.NewFlagSet("attempt", pflag.ContinueOnError)
	addAttemptFlags(attempt, &o.build.run)
	attempt.VisitAll(func(fl *pflag.Flag) {
		if fl.Name != "llm-model" && fl.Name != "record" && fl.Name != "replay" {
			f.AddFlag(fl)
		}
	})
	f.StringVar(&o.recordDir, "record", "", "record every run's model exchanges to DIR/<case>/<model>/<run>.jsonl")
	f.StringVar(&o.replayDir, "replay", "", "answer every run from DIR/<case>/<model>/<run>.jsonl, as --record wrote them (no network, no API key)")
	f.Lookup("json").Usage = "print summary.json to stdout instead of the table"
	f.Lookup("quiet").Usage = "do not print a line per finished run on stderr"
	f.Lookup("max-tokens").Usage = "stop the eval before a model call that could take the tokens used by all runs past this (0: no limit); exit 5"
	f.Lookup("max-cost-usd").Usage = "stop the eval before a model call that could take the estimated cost of all runs past this many US dollars (0: no limit; needs known prices); exit 5"
	addPlannerFlags(f, &o.build)
	o.addTemporalFlags(f)
	return cmd
}

func runEval(cmd *cobra.Command, o *evalOptions, env Env) error {
	var model string
	if len(o.models) > 0 {
		model = o.models[0]
	}
	if err := requireFlags("eval", required{"--suite", o.suite}, required{"--out", o.build.run.out},
		required{"--llm-model", model}); err != nil {
		return err
	}
	if err := o.build.checkPlannerFlags(cmd); err != nil {
		return err
	}
	switch {
	case o.runs < 1 || o.jobs < 0:
		return usagef("--runs must be at least 1 and --jobs cannot be negative")
	case o.minSolveRate < 0 || o.minSolveRate > 1:
		return usagef("--min-solve-rate %v: give a rate between 0 and 1, e.g. 0.6", o.minSolveRate)
	case o.recordDir != "" && o.replayDir != "":
		return usagef("--record and --replay cannot be used together")
	case o.build.repair != "auto" && o.build.repair != "off":
		return usagef("--repair must be auto or off, got %q", o.build.repair)
	case o.build.maxRepairs < 0:
		return usagef("--max-repairs must not be negative, got %d", o.build.maxRepairs)
	}
	if o.jobs == 0 {
		o.jobs = max(runtime.NumCPU()/2, 1)
	}
	names, err := o.modelNames()
	if err != nil {
		return err
	}
	tmpl, err := o.build.loadTemplate()
	if err != nil {
		return err
	}
	attempt, err := attemptOptions(&o.build.run, env)
	if err != nil {
		return err
	}
	suite, err := eval.Load(o.suite)
	if err != nil {
		return usagef("--suite: %v", err)
	}
	root, err := o.checkTemporal(cmd, env, suite.Dir)
	if err != nil {
		return err
	}
	checkEnv, _ := attempt.Env.Environ(os.Environ())
	opts := eval.Options{
		Suite: suite, Cases: o.cases, Models: o.models, Runs: o.runs, Jobs: o.jobs, Out: o.build.run.out,
		Flags:   o.fingerprint(tmpl, attempt.Python),
		Sandbox: attempt.Sandbox, Env: checkEnv, Progress: attempt.Progress,
	}
	if root != "" {
		// The builds run on the workers, with their keys and sandbox.
		t := o.build.temporal.conn(env)
		opts.Flags["python"], opts.Flags["temporal"] = "(the workers')", t.Namespace+"/"+t.TaskQueue
		var mu sync.Mutex
		opts.Build = o.temporalBuild(env, root, func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if attempt.Progress != nil {
				fmt.Fprintf(attempt.Progress, format+"\n", args...)
			}
		})
	} else {
		// One meter bounds the whole eval; each run counts its own spending.
		shared, err := budgetMeter(&o.build.run, nil, names...)
		if err != nil {
			return err
		}
		if err := o.checkConnections(env); err != nil {
			return err
		}
		if err := o.checkHiding(env, attempt.Sandbox, suite.Dir); err != nil {
			return err
		}
		if o.build.repair == "auto" {
			// Builds that repair their plan are other builds: another
			// eval id. Without repairs the id stays that of evals made
			// before repairs existed.
			opts.Flags["repair"], opts.Flags["max_repairs"] = o.build.repair, o.build.maxRepairs
		}
		opts.Prepare = func(_ context.Context, k eval.RunKey, progress io.Writer) (builder.Options, error) {
			b := o.build // a copy per run: its model and transcript
			b.run.model, b.run.maxTokens, b.run.maxCostUSD = k.Model, 0, 0
			record, replay, err := o.transcript(k)
			if err != nil {
				return builder.Options{}, err
			}
			b.run.record, b.run.replay = record, replay
			se, plan, meter, err := b.models(env, progress)
			if err != nil {
				return builder.Options{}, err
			}
			bo := b.builderOptions(tmpl, attempt, shared.Wrap(se), shared.Wrap(plan), meter)
			bo.Repair, bo.MaxRepairs = b.repair == "auto", b.maxRepairs
			return bo, nil
		}
	}
	sum, err := eval.Run(cmd.Context(), opts)
	var refused *eval.RefusedError
	if errors.As(err, &refused) {
		return usagef("%s", refused.Msg)
	}
	if sum != nil {
		if o.build.run.jsonOut {
			b, merr := json.MarshalIndent(sum, "", "  ")
			if merr == nil {
				fmt.Fprintf(env.Stdout, "%s\n", b)
			}
		} else {
			eval.PrintTable(env.Stdout, *sum)
			fmt.Fprintf(env.Stdout, "results: %s\n", sum.Results)
		}
	}
	var budget *eval.BudgetError
	switch {
	case errors.As(err, &budget):
		return &exitError{code: ExitBudget, err: budget}
	case err != nil:
		return &internalError{err: err}
	}
	if cmd.Flags().Changed("min-solve-rate") {
		return belowMinSolveRate(sum, o.minSolveRate)
	}
	return nil
}

// modelNames checks the --llm-model values and returns the model names a
// price is needed for (the review model's too).
func (o *evalOptions) modelNames() ([]string, error) {
	var names []string
	dirs := map[string]string{}
	for _, m := range o.models {
		_, name, err := parseModelSpec(m)
		if err != nil {
			return nil, err
		}
		if other, dup := dirs[eval.ModelDir(m)]; dup {
			if other == m {
				return nil, usagef("--llm-model %s is given twice", m)
			}
			return nil, usagef("--llm-model %s and %s would share the directory %s; rename one", other, m, eval.ModelDir(m))
		}
		dirs[eval.ModelDir(m)] = m
		names = append(names, name)
		if o.build.reviewModel != "" {
			review, err := reviewModelName(m, o.build.reviewModel)
			if err != nil {
				return nil, err
			}
			names = append(names, review)
		}
	}
	return names, nil
}

// checkConnections refuses, before anything is created, what would fail
// every run: a missing key or replay directory.
func (o *evalOptions) checkConnections(env Env) error {
	if o.replayDir != "" {
		if info, err := os.Stat(o.replayDir); err != nil || !info.IsDir() {
			return usagef("--replay %s: not a directory of transcripts (DIR/<case>/<model>/<run>.jsonl)", o.replayDir)
		}
		return nil
	}
	for _, m := range o.models {
		if _, _, err := newModel(env, m, roleSE, modelFlags{baseURL: o.build.run.baseURL}); err != nil {
			return err
		}
	}
	return nil
}

// transcript is the record or replay file of run k, if any. A run is done
// from scratch, so its old recording is removed.
func (o *evalOptions) transcript(k eval.RunKey) (record, replay string, err error) {
	switch {
	case o.replayDir != "":
		return "", filepath.Join(o.replayDir, k.Path()+".jsonl"), nil
	case o.recordDir != "":
		dir, err := filepath.Abs(o.recordDir)
		if err != nil {
			return "", "", err
		}
		path := filepath.Join(dir, k.Path()+".jsonl")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", "", fmt.Errorf("--record: %w", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", "", fmt.Errorf("--record: %w", err)
		}
		return path, "", nil
	}
	return "", "", nil
}

// checkHiding says, once, when the sandbox cannot hide the suite from the
// builds' commands; --sandbox required refuses then.
func (o *evalOptions) checkHiding(env Env, req sandbox.Request, suite string) error {
	req.WorkTree, req.Hide = suite, append(append([]string(nil), req.Hide...), suite)
	box, err := sandbox.Prepare(req)
	if err != nil {
		return usagef("%v", err)
	}
	if box.Mechanism() != sandbox.MechanismNamespaces {
		fmt.Fprintf(env.Stderr, "warning: the sandbox (%s) cannot hide paths here: the builds' commands could read the suite's hidden files\n", box.Describe())
	}
	return nil
}

// fingerprint holds the flags that shape builds: part of the eval id.
func (o *evalOptions) fingerprint(tmpl, python string) map[string]any {
	r := o.build.run
	verify := r.verifyCommands
	if verify == nil {
		verify = []string{}
	}
	pass := r.passEnv
	if pass == nil {
		pass = []string{}
	}
	return map[string]any{
		"llm_temperature": r.temperature, "llm_json_schema": r.jsonSchema, "max_attempts": r.maxAttempts,
		"timeout_seconds": r.timeoutSeconds, "verify_commands": verify, "python": python,
		"env_policy": r.envPolicy, "pass_env": pass, "sandbox": r.sandbox.mode,
		"template_sha256": canon.SHA256Hex([]byte(tmpl)), "reasoning_effort": o.build.effort,
		"max_output_tokens": o.build.maxOutputTokens, "plan_max_attempts": o.build.planMaxAttempts,
		"review": o.build.review, "review_model": o.build.reviewModel,
	}
}

// belowMinSolveRate fails (exit 1) when a model's solve rate is below min
// or unknown (no judged run).
func belowMinSolveRate(sum *eval.Summary, min float64) error {
	var below []string
	for _, m := range sum.PerModel {
		switch {
		case m.SolveRate == nil:
			below = append(below, fmt.Sprintf("%s has no judged run", m.Model))
		case *m.SolveRate < min:
			below = append(below, fmt.Sprintf("%s solved %.1f%%", m.Model, *m.SolveRate*100))
		}
	}
	if len(below) == 0 {
		return nil
	}
	return &exitError{code: ExitFail, err: fmt.Errorf("below --min-solve-rate %.1f%%: %s", min*100, strings.Join(below, "; "))}
}
