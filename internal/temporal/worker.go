package temporal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
)

// Connection is where the Temporal server is.
type Connection struct {
	HostPort  string
	Namespace string // "" is DefaultNamespace
	TaskQueue string // "" is DefaultTaskQueue
	// Log receives the SDK's warnings and errors; nil is os.Stderr.
	Log io.Writer
}

func (c Connection) dial(identity string) (client.Client, error) {
	ns := c.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	w := c.Log
	if w == nil {
		w = os.Stderr
	}
	cl, err := client.Dial(client.Options{HostPort: c.HostPort, Namespace: ns, Identity: identity,
		Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", c.HostPort, ns, err)
	}
	return cl, nil
}

func (c Connection) taskQueue() string {
	if c.TaskQueue == "" {
		return DefaultTaskQueue
	}
	return c.TaskQueue
}

// WorkerOptions configure RunWorker.
type WorkerOptions struct {
	Connection
	Concurrency int // steps at once; 0 is 1
	Config
}

// stopTimeout bounds how long a stopping worker waits for its running
// steps to roll back.
const stopTimeout = time.Minute

// RunWorker connects to Temporal, recovers the copies a killed worker
// left under WorkDir, and runs builds' steps until ctx is done; then it
// stops taking work, lets the running steps roll back (Temporal retries
// them elsewhere) and returns.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return fmt.Errorf("--work-dir: %w", err)
	}
	if err := recoverCaches(ctx, filepath.Join(o.WorkDir, "repos"), o.Config.Log); err != nil {
		return err
	}
	c, err := o.dial(o.Identity)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := make(chan struct{})
	acts := &Activities{cfg: o.Config, stop: stop}
	w := worker.New(c, o.taskQueue(), worker.Options{
		MaxConcurrentActivityExecutionSize: o.Concurrency, Identity: o.Identity, WorkerStopTimeout: stopTimeout,
		// The SDK sends heartbeats at most every 0.8 × the heartbeat
		// timeout: one late by a fifth of it (a loaded machine, a slow
		// server) lost a running work order to a retry that paid its
		// model calls again. Sent every heartbeatEvery instead.
		MaxHeartbeatThrottleInterval: heartbeatEvery,
	})
	w.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivityWithOptions(acts.Plan, activity.RegisterOptions{Name: PlanActivityName})
	w.RegisterActivityWithOptions(acts.WorkOrder, activity.RegisterOptions{Name: WorkOrderActivityName})
	w.RegisterActivityWithOptions(acts.Integrate, activity.RegisterOptions{Name: IntegrateActivityName})
	w.RegisterActivityWithOptions(acts.Repair, activity.RegisterOptions{Name: RepairActivityName})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the worker on task queue %s: %w", o.taskQueue(), err)
	}
	if o.Config.Log != nil {
		fmt.Fprintf(o.Config.Log, "worker %s: taking work from task queue %s at %s (%d at a time)\n", o.Identity, o.taskQueue(), o.HostPort, o.Concurrency)
	}
	<-ctx.Done()
	if o.Config.Log != nil {
		fmt.Fprintf(o.Config.Log, "worker %s: stopping (%v); running steps roll back\n", o.Identity, context.Cause(ctx))
	}
	close(stop)
	w.Stop()
	return nil
}

// recoverCaches restores every copy under dir that a killed worker left
// in the middle of an attempt, as a local build does before it starts.
func recoverCaches(ctx context.Context, dir string, log io.Writer) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing cached yet
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		repo, err := gitws.Open(ctx, filepath.Join(dir, e.Name()))
		if err != nil {
			continue // not a copy we made
		}
		found, err := repo.HasJournal()
		if err != nil || !found {
			continue
		}
		lock, err := repo.Lock()
		if err != nil {
			return fmt.Errorf("recover %s: %w", repo.Root, err)
		}
		err = builder.Recover(ctx, repo, log)
		_ = lock.Unlock()
		if err != nil {
			return fmt.Errorf("recover %s: %w", repo.Root, err)
		}
	}
	return nil
}
