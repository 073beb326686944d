package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/factory-harness/factory/internal/builder"
)

// Submit starts the build's workflow and returns its id. The id comes
// from the build (WorkflowID), so a build that runs already is attached
// to, and one that passed is reported, instead of starting a second; one
// that ended otherwise (FAIL, BUDGET, ERROR, canceled) starts again and
// resumes from the work orders its branch holds.
func Submit(ctx context.Context, conn Connection, in BuildInput) (id string, err error) {
	c, err := conn.dial("")
	if err != nil {
		return "", err
	}
	defer c.Close()
	id = WorkflowID(in)
	return id, submit(ctx, c, conn, id, in)
}

// submit starts workflow id with in, or attaches to it while it runs.
func submit(ctx context.Context, c client.Client, conn Connection, id string, in BuildInput) error {
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: conn.taskQueue(),
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, WorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("start workflow %s on %s: %w", id, conn.HostPort, err)
	}
	return nil
}

// ErrStoppedFollowing is returned (wrapped) by Follow when its context
// ended: the workflow itself goes on.
var ErrStoppedFollowing = errors.New("stopped following")

// pollEvery is how often Follow asks a running workflow for new lines.
const pollEvery = 300 * time.Millisecond

// Follow prints the workflow's progress lines to progress as they come
// (nil: none) and returns its result once it ends. err is nil when the
// result holds the outcome (any verdict); else the workflow could not be
// followed.
func Follow(ctx context.Context, conn Connection, id string, progress io.Writer) (BuildResult, error) {
	c, err := conn.dial("")
	if err != nil {
		return BuildResult{}, err
	}
	defer c.Close()
	type got struct {
		res BuildResult
		err error
	}
	done := make(chan got, 1)
	go func() {
		res, err := result(ctx, c, id)
		done <- got{res, err}
	}()
	printed := 0
	show := func(lines []string) {
		for ; printed < len(lines); printed++ {
			if progress != nil {
				fmt.Fprintln(progress, lines[printed])
			}
		}
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case g := <-done:
			show(g.res.Lines)
			return g.res, g.err
		case <-tick.C:
			if st, err := query(ctx, c, id); err == nil {
				show(st.Lines)
			}
		case <-ctx.Done():
			return BuildResult{}, fmt.Errorf("%w workflow %s (it goes on): %w", ErrStoppedFollowing, id, context.Cause(ctx))
		}
	}
}

func query(ctx context.Context, c client.Client, id string) (BuildResult, error) {
	var st BuildResult
	v, err := c.QueryWorkflow(ctx, id, "", StateQuery)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// result waits for the workflow's end and decodes its BuildResult from
// the result, or from the details of its failure or cancel.
func result(ctx context.Context, c client.Client, id string) (BuildResult, error) {
	var res BuildResult
	err := c.GetWorkflow(ctx, id, "").Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &app) && app.HasDetails() && app.Details(&res) == nil:
		return res, nil
	case errors.As(err, &canceled) && canceled.HasDetails() && canceled.Details(&res) == nil:
		return res, nil
	case errors.As(err, &canceled):
		return BuildResult{WorkflowID: id, Verdict: VerdictCanceled, Error: "canceled"}, nil
	}
	var terminated *temporal.TerminatedError
	if errors.As(err, &terminated) {
		return BuildResult{WorkflowID: id, Verdict: builder.VerdictError, Error: "the workflow was terminated"}, nil
	}
	return res, fmt.Errorf("workflow %s: %w", id, err)
}

// Status is the workflow's state: the result so far while it runs
// (verdict RUNNING), else its result.
func Status(ctx context.Context, conn Connection, id string) (BuildResult, error) {
	c, err := conn.dial("")
	if err != nil {
		return BuildResult{}, err
	}
	defer c.Close()
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return BuildResult{}, noWorkflow(id, err)
	}
	if d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		st, err := query(ctx, c, id)
		if err != nil {
			return BuildResult{}, fmt.Errorf("ask workflow %s for its state (is a worker running?): %w", id, err)
		}
		return st, nil
	}
	return result(ctx, c, id)
}

// ErrNoWorkflow is returned (wrapped) by Status and Cancel for an id the
// server does not know.
var ErrNoWorkflow = errors.New("no such workflow")

// noWorkflow wraps ErrNoWorkflow into a not-found error of the server.
func noWorkflow(id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("workflow %s: %w", id, ErrNoWorkflow)
	}
	return fmt.Errorf("workflow %s: %w", id, err)
}

// Cancel asks the workflow to stop: the running work order is rolled back
// on its worker, the branch keeps the work orders already pushed.
func Cancel(ctx context.Context, conn Connection, id string) error {
	c, err := conn.dial("")
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		return noWorkflow(id, err)
	}
	return nil
}
