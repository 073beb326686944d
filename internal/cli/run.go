package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/workorder"
)

// runOptions are the flags of `factory run`.
type runOptions struct {
	repo, workOrder, out string

	model          string
	temperature    float64
	baseURL        string
	jsonSchema     bool
	llmTimeout     int
	maxAttempts    int
	timeoutSeconds int
	verifyCommands []string
	python         string
	record, replay string
	envPolicy      string
	passEnv        []string
	sandbox        sandboxFlags
	quiet          bool
	jsonOut        bool
	maxTokens      int64
	maxCostUSD     float64
	prices         string
	mapTokens      int // run only: build gives its own (addPlannerFlags)
}

func newRunCmd(env Env) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run --repo DIR --work-order FILE --out DIR --llm-model NAME",
		Short: "Execute one work order: SE (model proposes writes) → TR (apply) → PO (verify) → finalize",
		Long: `Execute one work order against a clean git repository.

Each attempt: the model proposes full-file writes (SE); the harness checks scope,
forbidden paths, symlinks and base hashes, then writes atomically (TR); it runs global
verification and the acceptance commands without a shell (PO). On failure the repo is
restored to the baseline commit exactly (ignored files that existed before, such as .env
or .venv/, are kept) and the next attempt gets a bounded failure brief. On PASS the
changes are left uncommitted.

Artifacts go to <out>/<run_id>/ (a re-run of the same work order at the same commit goes
to <out>/<run_id>.2/, .3/, …); <out> must be outside the repository.

Prints the verdict and the path of run_summary.json, or with --json the content of
run_summary.json.

Exit codes: 0 PASS, 1 FAIL, 2 usage or preflight error (nothing modified),
3 provider unreachable or refusing, interrupted, internal error or replay mismatch
(repo rolled back).`,
		Args: noArgs("run"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRun(cmd, o, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", "", "root of the git repository to work in (required; must be clean and have a commit)")
	f.StringVar(&o.workOrder, "work-order", "", "work order JSON file (required; see schema/work_order.schema.json)")
	f.StringVar(&o.out, "out", "", "directory for run artifacts, outside the repository (required)")
	f.IntVar(&o.mapTokens, "map-tokens", repomap.DefaultTokens, mapTokensHelp+", ranked for the work order's files")
	addAttemptFlags(f, o)
	return cmd
}

// addAttemptFlags registers the flags that shape attempts: the model, the
// commands and the output, shared by run and build.
func addAttemptFlags(f *pflag.FlagSet, o *runOptions) {
	f.StringVar(&o.model, "llm-model", "", modelHelp+" (required)")
	f.Float64Var(&o.temperature, "llm-temperature", 0, "sampling temperature")
	f.StringVar(&o.baseURL, "llm-base-url", "", baseURLHelp)
	f.BoolVar(&o.jsonSchema, "llm-json-schema", true, "ask for strict JSON-schema output (response_format); --llm-json-schema=false for servers that reject it")
	f.IntVar(&o.llmTimeout, "llm-timeout-seconds", 600, "time limit for one HTTP try of a model request; a try that times out is retried (3 retries in all)")
	f.IntVar(&o.maxAttempts, "max-attempts", 2, "attempts before giving up (preflight and write_failed failures are not retried)")
	f.IntVar(&o.timeoutSeconds, "timeout-seconds", 600, "time limit per verification or acceptance command; the whole process group is killed")
	f.StringArrayVar(&o.verifyCommands, "verify-command", nil, "replace global verification with this command (repeatable; parsed like acceptance commands)")
	f.StringVar(&o.python, "python", "", "Python interpreter for the built-in verification commands (default: python if on PATH, else python3)")
	f.StringVar(&o.envPolicy, "env-policy", proc.EnvCore, "environment of verification and acceptance commands: 'core' (PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER, SHELL, VIRTUAL_ENV, toolchain locations) or 'all' (everything but names that look like credentials)")
	f.StringArrayVar(&o.passEnv, "pass-env", nil, "also pass this environment variable to commands (repeatable), whatever --env-policy says (never a forge token: the values of GITHUB_TOKEN, GH_TOKEN, GITEA_TOKEN and GITLAB_TOKEN reach no command under any name)")
	o.sandbox.add(f)
	f.StringVar(&o.record, "record", "", recordHelp)
	f.StringVar(&o.replay, "replay", "", "answer model requests from this JSONL transcript instead of a server (no network, no API key)")
	f.Int64Var(&o.maxTokens, "max-tokens", 0, "stop before a model call that could take the tokens used past this (0: no limit); exit 5")
	f.Float64Var(&o.maxCostUSD, "max-cost-usd", 0, "stop before a model call that could take the estimated cost past this many US dollars (0: no limit; needs a known price); exit 5")
	f.StringVar(&o.prices, "prices", "", "JSON file of model prices per million tokens (input, output and, optionally, cached input and cache writes) that add to or override the built-in table (see docs/providers.md)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print progress to stderr")
	f.BoolVar(&o.jsonOut, "json", false, "print run_summary.json to stdout instead of the verdict and summary path lines")
}

func runRun(cmd *cobra.Command, o *runOptions, env Env) error {
	if err := requireFlags("run", required{"--repo", o.repo}, required{"--work-order", o.workOrder},
		required{"--out", o.out}, required{"--llm-model", o.model}); err != nil {
		return err
	}
	data, err := workorder.ReadFile(o.workOrder)
	if err != nil {
		return usagef("read work order: %v", err)
	}
	wo, err := workorder.ParseWorkOrder(data)
	if err != nil {
		return usagef("work order %s is invalid:\n%s", o.workOrder, indent(err.Error()))
	}
	opts, err := attemptOptions(o, env)
	if err != nil {
		return err
	}
	if opts.Model, opts.ModelName, err = seModel(o, env); err != nil {
		return err
	}
	meter, err := budgetMeter(o, opts.Model, opts.ModelName)
	if err != nil {
		return err
	}
	opts.Model, opts.Prices = meter, meter.Prices()
	opts.Repo, opts.WorkOrder, opts.Out = o.repo, wo, o.out
	if o.mapTokens < 0 {
		return usagef("--map-tokens must not be negative")
	}
	if o.mapTokens > 0 {
		opts.RepoMap = workOrderMap(wo, o.mapTokens, opts.Progress)
	}
	run, err := factory.Preflight(cmd.Context(), opts)
	if err != nil {
		return err
	}
	res, err := run.Execute(cmd.Context())
	var pre *factory.PreflightError
	if errors.As(err, &pre) {
		return err
	}
	switch {
	case res.SummaryPath == "":
	case o.jsonOut:
		printSummaryFile(env, res.SummaryPath)
	default:
		fmt.Fprintf(env.Stdout, "verdict: %s\nrun summary: %s\n", res.Verdict, res.SummaryPath)
	}
	switch {
	case err != nil:
		var budget *llm.BudgetError
		if errors.As(err, &budget) {
			return &exitError{code: ExitBudget, err: budget}
		}
		if pe, ok := llm.AsProviderError(err); ok {
			return &internalError{err: pe} // the one line with its hint, without the graph's wrapping
		}
		return &internalError{err: err}
	case res.Verdict != factory.VerdictPass:
		return failError{}
	}
	return nil
}

// attemptOptions checks the attempt flags and turns them into factory
// options; the caller sets Repo, WorkOrder, Out and Model.
// workOrderMap renders the map of a commit ranked for wo, as a build shows
// it (factory.Options.RepoMap).
func workOrderMap(wo *workorder.WorkOrder, tokens int, progress io.Writer) func(context.Context, *gitws.Repo, string) (string, error) {
	return func(ctx context.Context, repo *gitws.Repo, commit string) (string, error) {
		m, err := buildMap(ctx, repo, commit, progress)
		if err != nil {
			return "", err
		}
		return m.Render(builder.WorkOrderFocus(m, wo), tokens).Text, nil
	}
}

func attemptOptions(o *runOptions, env Env) (factory.Options, error) {
	if o.llmTimeout <= 0 {
		return factory.Options{}, usagef("--llm-timeout-seconds must be positive")
	}
	envMode, err := proc.ParseEnvMode(o.envPolicy)
	if err != nil {
		return factory.Options{}, usagef("--env-policy: %v", err)
	}
	box, err := o.sandbox.request(env)
	if err != nil {
		return factory.Options{}, err
	}
	depsOpts, err := o.sandbox.depsOptions()
	if err != nil {
		return factory.Options{}, err
	}
	python := o.python
	if python == "" {
		python = defaultPython()
	}
	progress := env.Stderr
	if o.quiet {
		progress = nil
	}
	return factory.Options{
		ModelName: o.model, Temperature: o.temperature, JSONSchema: o.jsonSchema,
		MaxAttempts: o.maxAttempts, CommandTimeout: time.Duration(o.timeoutSeconds) * time.Second,
		VerifyCommands: o.verifyCommands, Python: python, RecordPath: o.record, Progress: progress,
		Env: proc.EnvPolicy{Mode: envMode, Pass: o.passEnv, Withhold: forgeTokens(env)}, Sandbox: box,
		Deps: depsOpts,
	}, nil
}

// sandboxFlags are --sandbox, --sandbox-home, --sandbox-hide and
// --sandbox-cache, for every command that runs verification commands.
type sandboxFlags struct {
	mode, home   string
	hide, caches []string
	// The dependency step's: --deps, --registry, --deps-allow-sdist.
	deps       string
	registries []string
	sdist      bool
}

func (o *sandboxFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.mode, "sandbox", string(sandbox.ModeAuto), "confine verification and acceptance commands (no network but loopback, writes only to the work tree, a private TMPDIR and HOME; .git read-only; the toolchains' caches copy-on-write): 'auto' (the strongest confinement this machine supports, else run unconfined with a warning), 'required' (refuse to run unconfined) or 'off'; see docs/sandbox.md")
	f.StringVar(&o.home, "sandbox-home", "", "give confined commands this directory as a writable HOME (default: a private empty directory per command)")
	f.StringArrayVar(&o.hide, "sandbox-hide", nil, "make this path unreadable to confined commands, e.g. ~/.ssh or ~/.aws (repeatable)")
	f.StringVar(&o.deps, "deps", string(deps.ModeAuto), "install dependencies before verification in each attempt: 'auto' (the harness installs what the manifests and lockfiles name — package.json, go.mod, Cargo.toml, requirements*.txt or pyproject.toml — with the language's package manager, confined, through a gateway that lets only GET and HEAD to the registries out and logs them in deps.jsonl; skipped when nothing changed) or 'off' (install nothing); see docs/dependencies.md")
	f.StringArrayVar(&o.registries, "registry", nil, "use this registry instead of the public one, as ECOSYSTEM=URL with ECOSYSTEM go (a module proxy), npm, cargo (a sparse index, sparse+ optional) or pypi (a PEP 503 /simple/ URL), e.g. npm=https://npm.example.com/ (repeatable)")
	f.BoolVar(&o.sdist, "deps-allow-sdist", false, "let pip build packages from source distributions during the dependency step (their build code runs, confined); by default it installs wheels only")
	f.StringArrayVar(&o.caches, "sandbox-cache", nil, "show this directory to confined commands copy-on-write, as the toolchains' caches found on this machine are (Go's, cargo's and rustup's homes, npm's, pip's, ~/.m2): they read it, and what they write there is thrown away when they end (repeatable; see docs/sandbox.md)")
}

// request checks the flags. Hidden paths and caches may start with ~/ (a
// shell leaves --sandbox-hide=~/.ssh unexpanded) and are made absolute; a
// cache must be a directory. Unless the sandbox is off, the toolchains'
// caches found on this machine come first (lang.MachineToolchains).
func (o *sandboxFlags) request(env Env) (sandbox.Request, error) {
	mode, err := sandbox.ParseMode(o.mode)
	if err != nil {
		return sandbox.Request{}, usagef("--sandbox: %v", err)
	}
	req := sandbox.Request{Mode: mode, Home: o.home}
	abs := func(flag, path string) (string, error) {
		if rest, ok := strings.CutPrefix(path, "~/"); ok && env.Getenv("HOME") != "" {
			path = filepath.Join(env.Getenv("HOME"), rest)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", usagef("%s %s: %v", flag, path, err)
		}
		return abs, nil
	}
	for _, path := range o.hide {
		dir, err := abs("--sandbox-hide", path)
		if err != nil {
			return sandbox.Request{}, err
		}
		req.Hide = append(req.Hide, dir)
	}
	var caches []sandbox.Cache
	for _, path := range o.caches {
		dir, err := abs("--sandbox-cache", path)
		if err != nil {
			return sandbox.Request{}, err
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return sandbox.Request{}, usagef("--sandbox-cache %s: not a directory", path)
		}
		caches = append(caches, sandbox.Cache{Dir: dir})
	}
	if mode != sandbox.ModeOff {
		tc := lang.MachineToolchains()
		req.Caches, req.Env = append(slices.Clone(tc.Caches), caches...), tc.Env
	}
	return req, nil
}

// depsOptions checks the dependency step's flags.
func (o *sandboxFlags) depsOptions() (deps.Options, error) {
	mode, err := deps.ParseMode(o.deps)
	if err != nil {
		return deps.Options{}, usagef("%v", err)
	}
	regs, err := deps.ParseRegistries(o.registries)
	if err != nil {
		return deps.Options{}, usagef("%v", err)
	}
	return deps.Options{Mode: mode, Registries: regs, AllowSdist: o.sdist}, nil
}

// budgetMeter meters model (and whatever else the caller wraps with the
// meter) with the price table and the budget flags. A cost budget that
// cannot be enforced, because a model's price is unknown, is refused.
func budgetMeter(o *runOptions, model llm.Model, names ...string) (*llm.Meter, error) {
	if o.maxTokens < 0 || o.maxCostUSD < 0 {
		return nil, usagef("--max-tokens and --max-cost-usd cannot be negative")
	}
	prices := llm.DefaultPrices()
	if o.prices != "" {
		p, err := llm.LoadPrices(o.prices)
		if err != nil {
			return nil, usagef("--prices: %v", err)
		}
		prices = p
	}
	budget := llm.Budget{MaxTokens: o.maxTokens, MaxCostUSD: o.maxCostUSD}
	if err := budget.Enforceable(prices, names...); err != nil {
		return nil, usagef("--max-cost-usd: %v", err)
	}
	return llm.NewMeter(model, prices, budget), nil
}

// seModel connects the model that answers work orders (--llm-model).
func seModel(o *runOptions, env Env) (llm.Model, string, error) {
	return newModel(env, o.model, roleSE, modelFlags{
		baseURL: o.baseURL, record: o.record, replay: o.replay, timeout: time.Duration(o.llmTimeout) * time.Second,
	})
}

// defaultPython follows the seeds ("python") where it exists and falls back
// to python3, which is all a stock Debian or Ubuntu machine has.
func defaultPython() string {
	if proc.Found("python") {
		return "python"
	}
	return "python3"
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
