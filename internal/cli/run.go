package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
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
	f.StringVar(&o.model, "llm-model", "", "model name sent to the server, e.g. gpt-4.1 or qwen2.5-coder (required)")
	f.Float64Var(&o.temperature, "llm-temperature", 0, "sampling temperature")
	f.StringVar(&o.baseURL, "llm-base-url", "", "OpenAI-compatible API base URL, e.g. http://localhost:11434/v1 for Ollama (default $OPENAI_BASE_URL, else "+llm.DefaultBaseURL+")")
	f.BoolVar(&o.jsonSchema, "llm-json-schema", true, "ask for strict JSON-schema output (response_format); --llm-json-schema=false for servers that reject it")
	f.IntVar(&o.llmTimeout, "llm-timeout-seconds", 600, "time limit for one HTTP try of a model request; a try that times out is retried (3 retries in all)")
	f.IntVar(&o.maxAttempts, "max-attempts", 2, "attempts before giving up (preflight and write_failed failures are not retried)")
	f.IntVar(&o.timeoutSeconds, "timeout-seconds", 600, "time limit per verification or acceptance command; the whole process group is killed")
	f.StringArrayVar(&o.verifyCommands, "verify-command", nil, "replace global verification with this command (repeatable; parsed like acceptance commands)")
	f.StringVar(&o.python, "python", "", "Python interpreter for the built-in verification commands (default: python if on PATH, else python3)")
	f.StringVar(&o.envPolicy, "env-policy", proc.EnvCore, "environment of verification and acceptance commands: 'core' (PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER, SHELL, VIRTUAL_ENV, toolchain locations) or 'all' (everything but names that look like credentials)")
	f.StringArrayVar(&o.passEnv, "pass-env", nil, "also pass this environment variable to commands (repeatable), whatever --env-policy says")
	o.sandbox.add(f)
	f.StringVar(&o.record, "record", "", recordHelp)
	f.StringVar(&o.replay, "replay", "", "answer model requests from this JSONL transcript instead of a server (no network, no API key)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print progress to stderr")
	f.BoolVar(&o.jsonOut, "json", false, "print run_summary.json to stdout instead of the verdict and summary path lines")
	return cmd
}

func runRun(cmd *cobra.Command, o *runOptions, env Env) error {
	if err := requireFlags("run", required{"--repo", o.repo}, required{"--work-order", o.workOrder},
		required{"--out", o.out}, required{"--llm-model", o.model}); err != nil {
		return err
	}
	if o.llmTimeout <= 0 {
		return usagef("--llm-timeout-seconds must be positive")
	}
	envMode, err := proc.ParseEnvMode(o.envPolicy)
	if err != nil {
		return usagef("--env-policy: %v", err)
	}
	box, err := o.sandbox.request(env)
	if err != nil {
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
	model, err := buildModel(o, env)
	if err != nil {
		return err
	}
	python := o.python
	if python == "" {
		python = defaultPython()
	}
	progress := env.Stderr
	if o.quiet {
		progress = nil
	}
	run, err := factory.Preflight(cmd.Context(), factory.Options{
		Repo: o.repo, WorkOrder: wo, Out: o.out,
		Model: model, ModelName: o.model, Temperature: o.temperature, JSONSchema: o.jsonSchema,
		MaxAttempts: o.maxAttempts, CommandTimeout: time.Duration(o.timeoutSeconds) * time.Second,
		VerifyCommands: o.verifyCommands, Python: python, RecordPath: o.record, Progress: progress,
		Env: proc.EnvPolicy{Mode: envMode, Pass: o.passEnv}, Sandbox: box,
	})
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
		if pe, ok := llm.AsProviderError(err); ok {
			return &internalError{err: pe} // the one line with its hint, without the graph's wrapping
		}
		return &internalError{err: err}
	case res.Verdict != factory.VerdictPass:
		return failError{}
	}
	return nil
}

// sandboxFlags are --sandbox, --sandbox-home and --sandbox-hide, for every
// command that runs verification commands.
type sandboxFlags struct {
	mode, home string
	hide       []string
}

func (o *sandboxFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.mode, "sandbox", string(sandbox.ModeAuto), "confine verification and acceptance commands (no network but loopback, writes only to the work tree, a private TMPDIR and HOME; .git read-only): 'auto' (the strongest confinement this machine supports, else run unconfined with a warning), 'required' (refuse to run unconfined) or 'off'; see docs/sandbox.md")
	f.StringVar(&o.home, "sandbox-home", "", "give confined commands this directory as a writable HOME (default: a private empty directory per command)")
	f.StringArrayVar(&o.hide, "sandbox-hide", nil, "make this path unreadable to confined commands, e.g. ~/.ssh or ~/.aws (repeatable)")
}

// request checks the flags. Hidden paths may start with ~/ (a shell leaves
// --sandbox-hide=~/.ssh unexpanded) and are made absolute.
func (o *sandboxFlags) request(env Env) (sandbox.Request, error) {
	mode, err := sandbox.ParseMode(o.mode)
	if err != nil {
		return sandbox.Request{}, usagef("--sandbox: %v", err)
	}
	req := sandbox.Request{Mode: mode, Home: o.home}
	for _, path := range o.hide {
		if rest, ok := strings.CutPrefix(path, "~/"); ok && env.Getenv("HOME") != "" {
			path = filepath.Join(env.Getenv("HOME"), rest)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return sandbox.Request{}, usagef("--sandbox-hide %s: %v", path, err)
		}
		req.Hide = append(req.Hide, abs)
	}
	return req, nil
}

func buildModel(o *runOptions, env Env) (llm.Model, error) {
	return connectModel(env, modelFlags{baseURL: o.baseURL, record: o.record, replay: o.replay},
		func(key, base string) llm.Model {
			return llm.NewOpenAIChat(llm.OpenAIConfig{
				APIKey: key, BaseURL: base, Timeout: time.Duration(o.llmTimeout) * time.Second,
				CustomHeaders: env.Getenv("OPENAI_CUSTOM_HEADERS"),
			})
		})
}

// recordHelp is the help of --record, for run and plan: connectModel
// refuses a file that already holds a transcript.
const recordHelp = "write every model exchange to this new JSONL transcript (the file must not exist or be empty)"

// modelFlags are the model-connection flags shared by run and plan.
type modelFlags struct{ baseURL, record, replay string }

// connectModel turns the shared flags into a Model: a replayer, or a live
// client (wrapped by a recorder when asked) that needs OPENAI_API_KEY.
func connectModel(env Env, f modelFlags, newClient func(key, base string) llm.Model) (llm.Model, error) {
	if f.record != "" && f.replay != "" {
		return nil, usagef("--record and --replay cannot be used together")
	}
	if f.replay != "" {
		r, err := llm.LoadReplayer(f.replay)
		if err != nil {
			return nil, usagef("--replay: %v", err)
		}
		return r, nil
	}
	key := env.Getenv("OPENAI_API_KEY")
	if key == "" {
		return nil, usagef("OPENAI_API_KEY is not set; export it (any non-empty value for a local server that ignores keys) or use --replay FILE")
	}
	base := f.baseURL
	if base == "" {
		base = env.Getenv("OPENAI_BASE_URL")
	}
	if base != "" {
		if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("model base URL %q is not an http(s) URL like http://localhost:11434/v1", base)
		}
	}
	m := newClient(key, base)
	if f.record != "" {
		// One transcript per run: two runs in one file replay as neither.
		if info, err := os.Stat(f.record); err == nil && info.Size() > 0 {
			return nil, usagef("--record %s already holds a transcript; choose a new file", f.record)
		}
		m = &llm.Recorder{Model: m, Path: f.record}
	}
	return m, nil
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
