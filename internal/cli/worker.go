package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/temporal"
)

// workerOptions are the flags of `factory worker`: where Temporal is, and
// everything of a build that is the worker's own (keys come from its
// environment).
type workerOptions struct {
	temporalFlags
	workDir     string
	concurrency int
	identity    string
	run         runOptions
}

func newWorkerCmd(env Env) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker --temporal HOST:PORT --work-dir DIR",
		Short: "Run builds submitted with 'factory build --temporal' (a long-running Temporal worker)",
		Long: `Take the steps of builds submitted with 'factory build --temporal' from a Temporal
task queue and run them: plan, then each work order exactly as a local build runs it,
in a copy of the build's git remote under --work-dir, pushing each work order's commit
to the remote with a lease.

The worker's own flags and environment give what a build must not carry: model keys
(OPENAI_API_KEY, ANTHROPIC_API_KEY), --llm-base-url, --prices, --sandbox, --python,
--env-policy and --pass-env. Nothing of them enters Temporal's history.

Ctrl-C or SIGTERM: stop taking work, roll back the running work order (Temporal gives
it to another worker) and exit 0. A worker that dies takes its commands with it, and
recovers its copies when it starts again.

Exit codes: 0 stopped by a signal, 2 usage, 3 the server is unreachable.`,
		Args: noArgs("worker"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd, o, env)
		},
	}
	f := cmd.Flags()
	o.temporalFlags.add(f, "the Temporal server to take work from (required)")
	f.StringVar(&o.workDir, "work-dir", "", "directory for the copies of build remotes, plans and artifacts (required)")
	f.IntVar(&o.concurrency, "concurrency", 1, "steps run at once (of different builds)")
	f.StringVar(&o.identity, "identity", "", "the worker's name in results (default HOSTNAME-PID)")
	f.StringVar(&o.run.baseURL, "llm-base-url", "", baseURLHelp)
	f.IntVar(&o.run.llmTimeout, "llm-timeout-seconds", 600, "time limit for one HTTP try of a model request")
	f.StringVar(&o.run.python, "python", "", "Python interpreter for the built-in verification commands (default: python if on PATH, else python3)")
	f.StringVar(&o.run.envPolicy, "env-policy", "core", "environment of verification and acceptance commands: 'core' or 'all' (see 'factory run --help')")
	f.StringArrayVar(&o.run.passEnv, "pass-env", nil, "also pass this environment variable to commands (repeatable)")
	f.StringVar(&o.run.prices, "prices", "", "JSON file of model prices per million tokens (input, output and, optionally, cached input and cache writes) that add to or override the built-in table (see docs/providers.md)")
	f.BoolVarP(&o.run.quiet, "quiet", "q", false, "do not print progress to stderr")
	o.run.sandbox.add(f)
	return cmd
}

func runWorker(cmd *cobra.Command, o *workerOptions, env Env) error {
	if err := requireFlags("worker", required{"--temporal", o.hostPort}, required{"--work-dir", o.workDir}); err != nil {
		return err
	}
	if o.concurrency < 1 {
		return usagef("--concurrency must be at least 1")
	}
	attempt, err := attemptOptions(&o.run, env)
	if err != nil {
		return err
	}
	prices := llm.DefaultPrices()
	if o.run.prices != "" {
		if prices, err = llm.LoadPrices(o.run.prices); err != nil {
			return usagef("--prices: %v", err)
		}
	}
	if o.identity == "" {
		host, _ := os.Hostname()
		o.identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	err = temporal.RunWorker(cmd.Context(), temporal.WorkerOptions{
		Connection:  o.conn(env),
		Concurrency: o.concurrency,
		Config: temporal.Config{
			WorkDir: o.workDir, Identity: o.identity, Attempt: attempt, Python: planner.NewPython3Inspector(),
			Models: o.models(env, prices), Log: attempt.Progress,
		},
	})
	if err != nil {
		return &internalError{err: err}
	}
	return nil
}

// models connects a step's models as build does (models): the SE's and
// the planner's clients behind one Meter with what is left of the
// build's budget, from this worker's keys, base URL and prices.
func (o *workerOptions) models(env Env, prices *llm.Prices) temporal.ModelsFunc {
	return func(model, review string, budget llm.Budget) (temporal.Models, error) {
		se, name, err := newModel(env, model, roleSE, modelFlags{baseURL: o.run.baseURL, timeout: time.Duration(o.run.llmTimeout) * time.Second})
		if err != nil {
			return temporal.Models{}, err
		}
		plan, _, err := newModel(env, model, rolePlanner, modelFlags{baseURL: o.run.baseURL, timeout: 30 * time.Minute})
		if err != nil {
			return temporal.Models{}, err
		}
		names := []string{name}
		if review != "" && review != name {
			names = append(names, review)
		}
		if err := budget.Enforceable(prices, names...); err != nil {
			return temporal.Models{}, err
		}
		meter := llm.NewMeter(se, prices, budget)
		return temporal.Models{SE: meter, Planner: meter.Wrap(plan), Meter: meter}, nil
	}
}
