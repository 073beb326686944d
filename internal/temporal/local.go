package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
)

// StartBranch is the branch of a LocalBuild's bare repository that holds
// the start commit (its HEAD).
const StartBranch = "start"

// LocalBuild is a build of a local repository's HEAD on the workers, with
// the built branch brought back: what `factory eval --temporal` does for
// each run. The workers reach the repository through a bare copy the
// submitter creates (Bare, on a file system they share); only the
// commits of Local's HEAD go there.
type LocalBuild struct {
	WorkflowID string     // chosen by the caller, so that it finds the build again
	Bare       string     // the bare repository to create (absolute); replaced when a new workflow starts
	Local      string     // its HEAD is the start; the built branch is checked out here on PASS
	Input      BuildInput // all but RepoURL and Base, which come from Bare and Local's HEAD
	// Out receives builds/<plan hash>/build_summary.json (the summary a
	// local build writes) and workflow.json (the workflow's result).
	Out      string
	Progress io.Writer // the build's progress lines; nil is quiet
}

// RunLocal builds b on the workers and returns the workflow's result and
// its summary as a local build's (BuildDir under b.Out). A workflow b's id
// names is not started again when it runs (it is followed) or ended with
// a verdict on the code (PASS, FAIL, PLAN_INVALID: its result is used);
// otherwise (none, or it ended with an error, a budget stop or a cancel)
// a new bare repository is made from Local's HEAD and a new workflow
// starts. err is nil when the workflow ended, whatever its verdict;
// else it could not be run or followed (the server or git failed, ctx
// ended: the workflow goes on).
func RunLocal(ctx context.Context, conn Connection, b LocalBuild) (BuildResult, *builder.Summary, error) {
	c, err := conn.dial("")
	if err != nil {
		return BuildResult{}, nil, err
	}
	defer c.Close()
	say := func(format string, args ...any) {
		if b.Progress != nil {
			fmt.Fprintf(b.Progress, format+"\n", args...)
		}
	}
	local, err := gitws.Open(ctx, b.Local)
	if err != nil {
		return BuildResult{}, nil, err
	}
	prior, running, err := lookup(ctx, c, b.WorkflowID)
	switch {
	case err != nil:
		return BuildResult{}, nil, err
	case running:
		say("workflow %s on %s runs already: following it", b.WorkflowID, conn.HostPort)
	case prior != nil && finalVerdict(prior.Verdict):
		say("workflow %s on %s ended already (%s): its result is used", b.WorkflowID, conn.HostPort, prior.Verdict)
	default:
		if prior != nil {
			say("workflow %s ended with %s (%s): building again from scratch", b.WorkflowID, prior.Verdict, firstLine(prior.Error))
		}
		in, err := pushStart(ctx, local, b)
		if err != nil {
			return BuildResult{}, nil, err
		}
		if err := submit(ctx, c, conn, b.WorkflowID, in); err != nil {
			return BuildResult{}, nil, err
		}
		say("workflow %s on %s: building %s into branch %s", b.WorkflowID, conn.HostPort, in.RepoURL, in.Branch)
	}
	res, err := Follow(ctx, conn, b.WorkflowID, b.Progress)
	if err != nil && !errors.Is(err, ErrStoppedFollowing) {
		err = fmt.Errorf("following it on %s failed (is the server up?): %w", conn.HostPort, err)
	}
	if err != nil {
		return res, nil, err
	}
	if res.Verdict == builder.VerdictPass {
		if err := local.Fetch(ctx, res.RepoURL); err != nil {
			return res, nil, err
		}
		if err := local.CheckoutAt(ctx, res.Branch, res.Head); err != nil {
			return res, nil, err
		}
	}
	sum := res.Summary()
	sum.Repo, sum.BuildDir = local.Root, filepath.Join(b.Out, "builds", res.PlanHash)
	if err := os.MkdirAll(sum.BuildDir, 0o755); err != nil {
		return res, nil, err
	}
	if err := artifact.WriteJSON(filepath.Join(sum.BuildDir, "build_summary.json"), sum); err != nil {
		return res, nil, err
	}
	res.Lines = nil
	if err := artifact.WriteJSON(filepath.Join(sum.BuildDir, "workflow.json"), res); err != nil {
		return res, nil, err
	}
	return res, &sum, nil
}

// finalVerdict is a verdict that building again would not change: the
// code passed, failed, or its plan was invalid.
func finalVerdict(v string) bool {
	return v == builder.VerdictPass || v == builder.VerdictFail || v == builder.VerdictPlanInvalid
}

// lookup returns the workflow's result when it ended (nil when it does
// not exist or ended without one, e.g. timed out) and whether it runs.
func lookup(ctx context.Context, c client.Client, id string) (*BuildResult, bool, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("look up workflow %s: %w", id, err)
	case d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil, true, nil
	}
	res, err := result(ctx, c, id)
	if err != nil {
		return nil, false, nil
	}
	return &res, false, nil
}

// pushStart makes b.Bare anew with Local's HEAD as its start branch and
// returns the workflow's input for it.
func pushStart(ctx context.Context, local *gitws.Repo, b LocalBuild) (BuildInput, error) {
	in := b.Input
	head, err := local.Head(ctx)
	if err != nil {
		return in, err
	}
	if err := os.RemoveAll(b.Bare); err != nil {
		return in, fmt.Errorf("remove the old bare repository %s: %w", b.Bare, err)
	}
	if err := gitws.InitBare(ctx, b.Bare, StartBranch); err != nil {
		return in, err
	}
	in.RepoURL, in.Base = "file://"+b.Bare, head
	if err := local.PushLease(ctx, in.RepoURL, StartBranch, head, ""); err != nil {
		return in, err
	}
	return in, nil
}

// Summary is the result as a local build's summary (without its Repo and
// BuildDir, which are the caller's).
func (r BuildResult) Summary() builder.Summary {
	s := builder.Summary{Verdict: r.Verdict, PlanHash: r.PlanHash, PlanSource: r.PlanSource, PlanDir: r.PlanDir,
		Branch: r.Branch, BaseCommit: r.BaseCommit, Tokens: r.Tokens, CostUSD: r.CostUSD, Failed: r.Failed,
		InputTokens: r.InputTokens, CachedInputTokens: r.CachedInputTokens, CacheWriteTokens: r.CacheWriteTokens,
		Error: r.Error, WorkOrders: []builder.WorkOrder{}, Repairs: r.Repairs}
	for _, w := range r.WorkOrders {
		s.WorkOrders = append(s.WorkOrders, w.WorkOrder)
		if w.StoppedEarly != "" {
			s.StoppedEarly = w.StoppedEarly
		}
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Pollers connects to the server and returns how many workers poll the
// task queue for workflow tasks: an error says the server cannot be
// reached (or the namespace does not exist), 0 that no worker runs yet.
func Pollers(ctx context.Context, conn Connection) (int, error) {
	c, err := conn.dial("")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	d, err := c.DescribeTaskQueue(ctx, conn.taskQueue(), enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return 0, fmt.Errorf("describe task queue %s on %s: %w", conn.taskQueue(), conn.HostPort, err)
	}
	return len(d.GetPollers()), nil
}
