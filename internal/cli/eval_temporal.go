package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/eval"
	"github.com/factory-harness/factory/internal/temporal"
)

// addTemporalFlags adds eval's flags for runs on Temporal workers.
func (o *evalOptions) addTemporalFlags(f *pflag.FlagSet) {
	t := &o.build.temporal
	t.temporalFlags.add(f, "build every run as a Build workflow on Temporal workers ('factory worker'); the checks still run here")
	f.StringVar(&o.remoteRoot, "remote-root", "", "with --temporal: directory (or file:// URL) on a file system the workers share, for one bare repository per run (required with --temporal)")
	f.DurationVar(&t.heartbeatTimeout, "heartbeat-timeout", temporal.DefaultHeartbeatTimeout, "with --temporal: a work order whose worker is silent this long moves to another worker")
}

// evalWorkerSideFlags are eval flags that, with --temporal, belong to the
// workers: like build's workerSideFlags, but the sandbox and environment
// flags stay, since they confine the checks, which run here.
var evalWorkerSideFlags = []string{"llm-base-url", "llm-timeout-seconds", "python", "prices", "record", "replay",
	"max-wait-seconds", "poll-interval", "retry-backoff"}

// checkTemporal refuses, before anything is created, what cannot work
// with --temporal (or --remote-root without it), and returns the remote
// root's directory.
func (o *evalOptions) checkTemporal(cmd *cobra.Command, env Env, suite string) (string, error) {
	t := &o.build.temporal
	if t.hostPort == "" {
		for _, name := range []string{"remote-root", "namespace", "task-queue", "heartbeat-timeout"} {
			if cmd.Flags().Changed(name) {
				return "", usagef("--%s applies only with --temporal HOST:PORT", name)
			}
		}
		return "", nil
	}
	var given []string
	for _, name := range evalWorkerSideFlags {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	switch {
	case len(given) > 0:
		return "", usagef("with --temporal, %s belong on 'factory worker': each worker builds with its own keys, endpoints, prices and interpreter (transcripts cannot be recorded or replayed on workers)", strings.Join(given, ", "))
	case o.build.run.maxTokens != 0 || o.build.run.maxCostUSD != 0:
		return "", usagef("--max-tokens and --max-cost-usd bound a whole eval, which cannot be enforced across the workers' builds; leave them out with --temporal")
	case o.remoteRoot == "":
		return "", usagef("--temporal needs --remote-root DIR: a directory on a file system the workers share, where a bare repository per run is created")
	case t.heartbeatTimeout < time.Second:
		return "", usagef("--heartbeat-timeout must be at least 1s")
	}
	root, err := eval.RemoteRoot(o.remoteRoot)
	if err != nil {
		return "", usagef("%v", err)
	}
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return "", usagef("--remote-root %s is not a directory here; create it on a file system the workers share (they must reach it at the same path)", o.remoteRoot)
	}
	if eval.Within(root, suite) {
		return "", usagef("--remote-root %s is inside the suite %s; choose a directory outside it", o.remoteRoot, suite)
	}
	n, err := temporal.Pollers(cmd.Context(), t.conn(env))
	if err != nil {
		return "", &internalError{err: err}
	}
	if n == 0 {
		fmt.Fprintf(env.Stderr, "warning: no worker polls task queue %s on %s yet; the runs wait until one does ('factory worker --temporal %s --task-queue %s ...')\n",
			t.conn(env).TaskQueue, t.hostPort, t.hostPort, t.conn(env).TaskQueue)
	}
	return root, nil
}

// temporalBuild builds each run as a Build workflow of the run's case and
// model, from a bare repository under root holding the run's start commit.
func (o *evalOptions) temporalBuild(env Env, root string, progress func(format string, args ...any)) eval.BuildFunc {
	conn := o.build.temporal.conn(env)
	return func(ctx context.Context, b eval.BuildRun) (*builder.Summary, error) {
		opts := o.build // a copy per run: its spec or plan, model and the case's settings
		c := b.Case
		opts.spec, opts.plan, opts.branch, opts.run.model = c.SpecPath(), c.PlanDir(), "", b.Key.Model
		if c.MaxAttempts > 0 {
			opts.run.maxAttempts = c.MaxAttempts
		}
		if c.PlanMaxAttempts > 0 {
			opts.planMaxAttempts = c.PlanMaxAttempts
		}
		if c.TimeoutSeconds > 0 {
			opts.run.timeoutSeconds = c.TimeoutSeconds
		}
		in, err := opts.buildInput()
		if err != nil {
			return nil, err
		}
		in.CacheKey = b.CacheKey
		id := eval.WorkflowID(b.EvalID, b.Key)
		res, sum, err := temporal.RunLocal(ctx, conn, temporal.LocalBuild{
			WorkflowID: id, Bare: eval.RemoteRepo(root, b.EvalID, b.Key), Local: b.Repo, Input: in, Out: b.Out, Progress: b.Log,
		})
		switch {
		case errors.Is(err, temporal.ErrStoppedFollowing):
			progress("%s: stopped following workflow %s; it goes on on the workers and the next invocation collects it (stop it with 'factory cancel --temporal %s --workflow %s')",
				b.Key, id, conn.HostPort, id)
			return nil, err
		case err != nil:
			return sum, err
		}
		// As builder.Run: the cause of a non-PASS verdict other than FAIL.
		switch res.Verdict {
		case builder.VerdictPass, builder.VerdictFail:
			return sum, nil
		case builder.VerdictPlanInvalid:
			return sum, errors.New(res.Error)
		}
		// Not a verdict on the code: a lost worker, a provider or git
		// error after the retries, a cancel.
		sum.Verdict = builder.VerdictError
		return sum, fmt.Errorf("workflow %s ended %s: %s", id, res.Verdict, res.Error)
	}
}
