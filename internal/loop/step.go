package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm/keyproxy"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/proc"
)

// Guard outcomes, as the commit message names them.
const (
	GuardPass    = "pass"
	GuardFail    = "fail"
	GuardSkipped = "skipped"
)

// StepResult is what one step did.
type StepResult struct {
	Iteration int       // the iteration committed; 0 when none ran
	Node      string    // the selected leaf; "" in REPAIR mode
	Path      string    // root/…/leaf
	Kind      tree.Kind // execute, decompose or repair
	Guard     string    // pass, fail or skipped
	Commit    string
	Message   string
	Reason    string // why the selected leaf was charged an attempt, or why the iteration was reset
	Complete  bool   // the root passes: nothing ran
	Stuck     bool   // the next leaf used all its attempts: nothing ran (the question may have been committed)
	StuckNode string
	StuckPath string
	Attempts  string // n/max of the stuck or selected leaf
}

// iteration carries one iteration's working state.
type iteration struct {
	n        int
	dir      string // slash path of the log directory
	repair   bool
	start    *tree.Node // the tree at the start, when valid
	last     *tree.Node // the last valid committed tree
	startRaw []byte
	problems []string // why the tree at the start is invalid (REPAIR)
	sel      tree.Selection
	meta     Meta
	baseline gitws.Baseline
}

func (r *Runner) logPath(it *iteration, name string) string {
	return abs(r.repo.Root, path.Join(it.dir, name))
}

func problemStrings(err error) []string {
	var ps tree.Problems
	if errors.As(err, &ps) {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	return []string{err.Error()}
}

// loadTree decodes data and checks its invariants.
func loadTree(data []byte) (*tree.Node, []string) {
	t, err := tree.Decode(data)
	if err != nil {
		return nil, problemStrings(err)
	}
	if ps := tree.Check(t); len(ps) > 0 {
		return nil, problemStrings(tree.Problems(ps))
	}
	return t, nil
}

// Step runs one iteration (seed §5). With peek, it only finishes what needs
// no iteration: a complete tree, or a stuck leaf's question.
func (r *Runner) Step(ctx context.Context, peek bool) (StepResult, error) {
	raw, err := os.ReadFile(abs(r.repo.Root, TreePath))
	if err != nil && !os.IsNotExist(err) {
		return StepResult{}, fmt.Errorf("read %s: %w", TreePath, err)
	}
	it := &iteration{n: r.state.Iteration + 1, startRaw: raw}
	it.start, it.problems = loadTree(raw)
	if it.start != nil && r.state.Repair.Active {
		// Valid on its own, but committed broken (a passed node changed):
		// judged against the last valid tree, it still needs a repair.
		if it.last, err = r.lastValidTree(ctx); err != nil {
			return StepResult{}, err
		}
		if ps := tree.CheckImmutable(it.last, it.start); len(ps) > 0 {
			it.start, it.problems = nil, problemStrings(tree.Problems(ps))
		}
	}
	if it.start == nil {
		if r.state.Repair.Failed >= tree.MaxFailedRepairs {
			return StepResult{}, fmt.Errorf("%w (%d failed repairs): fix %s by hand and commit it:\n  %s", ErrRepairsExhausted, r.state.Repair.Failed, TreePath, strings.Join(it.problems, "\n  "))
		}
		it.repair = true
		if it.last == nil {
			if it.last, err = r.lastValidTree(ctx); err != nil {
				return StepResult{}, err
			}
		}
	} else {
		// Valid against the last valid tree (a human may have fixed it): any
		// pending repair is over.
		r.state.Repair = tree.RepairState{}
		it.last = it.start
		it.sel = tree.Select(it.start)
		switch it.sel.Status {
		case tree.StatusComplete:
			r.event(0, "complete", "root", nil)
			return StepResult{Complete: true}, nil
		case tree.StatusStuck:
			return r.stuck(ctx, it)
		}
	}
	if peek {
		return StepResult{}, nil
	}
	return r.iterate(ctx, it)
}

// lastValidTree finds the newest tree in the branch history that was
// committed valid: run.json of that commit, if any, says no repair was
// pending (committedNoRepair; a tree committed broken may look valid on its
// own, with a passed node changed) and the tree loads.
// committedNoRepair reports whether a commit's run.json (data) says that no
// repair was pending, as the runner writes it (decodeRunState). A run.json
// that does not read so, damaged or edited, says nothing: its commit's tree
// is passed over, as one committed broken is. (A commit without a run.json
// is from before the run and carries no repair.)
func committedNoRepair(data []byte) bool {
	s, err := decodeRunState(data)
	return err == nil && !s.Repair.Active
}

func (r *Runner) lastValidTree(ctx context.Context) (*tree.Node, error) {
	return lastValidTree(ctx, r.repo, r.state.Branch)
}

func lastValidTree(ctx context.Context, repo *gitws.Repo, branch string) (*tree.Node, error) {
	commits, err := repo.Log(ctx, "HEAD", 64)
	if err != nil {
		return nil, err
	}
	for _, c := range commits {
		if st, err := repo.Show(ctx, c.Hash, RunStatePath); err == nil && !committedNoRepair(st) {
			continue
		}
		data, err := repo.Show(ctx, c.Hash, TreePath)
		if err != nil {
			continue
		}
		if t, _ := loadTree(data); t != nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no valid %s in the last %d commits of %s", TreePath, len(commits), branch)
}

// repairProblems says why the committed tree needs a REPAIR TREE
// iteration, judged as Step does; nil when it does not.
func repairProblems(ctx context.Context, repo *gitws.Repo, st RunState, raw []byte) ([]string, error) {
	t, ps := loadTree(raw)
	if t == nil || !st.Repair.Active {
		return ps, nil
	}
	last, err := lastValidTree(ctx, repo, st.Branch)
	if err != nil {
		return nil, err
	}
	return problemStrings(tree.Problems(tree.CheckImmutable(last, t))), nil
}

func (r *Runner) iterate(ctx context.Context, it *iteration) (StepResult, error) {
	runDir := path.Join(IterationsDir, r.state.RunID)
	it.dir = path.Join(runDir, strconv.Itoa(it.n))
	res := StepResult{Iteration: it.n, Kind: tree.Repair, Guard: GuardSkipped}
	mode := ModeRepair
	if !it.repair {
		res.Node, res.Path = it.sel.Node.ID, it.sel.PathString()
		mode = ModeExecute
	}
	it.meta = Meta{RunID: r.state.RunID, Iteration: it.n, Mode: mode, Node: res.Node, Path: res.Path, GuardSandbox: r.guardBox.Summary(), ExecutorSandbox: r.execBox.Summary()}

	var err error
	if it.baseline, err = r.repo.Snapshot(ctx); err != nil {
		return res, err
	}
	it.baseline.Keep(runDir)
	it.meta.StartCommit = it.baseline.Commit
	if err := os.RemoveAll(abs(r.repo.Root, it.dir)); err != nil {
		return res, fmt.Errorf("clear %s: %w", it.dir, err)
	}
	if err := os.MkdirAll(abs(r.repo.Root, it.dir), 0o755); err != nil {
		return res, fmt.Errorf("create %s: %w", it.dir, err)
	}
	if err := writeJournal(r.repo, &journal{Version: journalVersion, RunID: r.state.RunID, Iteration: it.n, Branch: r.state.Branch, PID: os.Getpid(), Baseline: it.baseline}); err != nil {
		return res, err
	}
	r.event(it.n, "iteration_started", res.Node, map[string]any{"mode": mode, "path": res.Path, "start_commit": it.baseline.Commit})
	r.say("iteration %d: %s %s", it.n, mode, orDash(res.Path))

	prompt := buildPrompt(r.promptInput(it))
	promptFile := r.logPath(it, "prompt.md")
	if err := artifact.WriteFileAtomic(promptFile, prompt, 0o644); err != nil {
		return res, fmt.Errorf("write the prompt pack: %w", err)
	}
	before := it.startRaw
	if it.start != nil {
		before = tree.Canonical(it.start)
	}
	if err := artifact.WriteFileAtomic(r.logPath(it, "tree.before.json"), before, 0o644); err != nil {
		return res, err
	}

	budget := time.Duration(r.cfg.IterationTimeoutSecs) * time.Second
	began := time.Now()
	exec, err := r.runExecutor(ctx, it, promptFile, prompt, budget)
	if err != nil {
		return res, r.abort(it, err)
	}
	// From here on, finish the iteration even if a signal arrives, except
	// during the guard: git work is short, and a half-made commit is worse.
	if ctx.Err() != nil {
		return res, r.interrupted(it)
	}
	done := context.WithoutCancel(ctx)

	moved, why, err := r.headMoved(done, it)
	if err != nil {
		return res, r.abort(it, err)
	}
	if err := r.restoreProtected(done, it); err != nil {
		return res, r.abort(it, err)
	}
	changed, err := r.repo.ChangedSince(done, it.baseline.Commit)
	if err != nil {
		return res, r.abort(it, err)
	}
	changed = slices.DeleteFunc(changed, isLogPath)
	it.meta.Changed = nonNil(changed)
	if !it.repair {
		res.Kind = tree.Classify(changed)
	}
	var reset string
	switch {
	case exec.TimedOut:
		reset = fmt.Sprintf("the executor timed out after %s", budget)
	case exec.OutputLimited:
		reset = "the executor was killed: " + exec.Err
	case moved:
		reset = why
	}
	if reset != "" {
		if err := r.reset(done, it); err != nil {
			return res, err
		}
		r.event(it.n, "iteration_reset", res.Node, map[string]any{"reason": reset})
		r.say("iteration %d: %s; the agent's changes were reset", it.n, reset)
	}

	var next []byte // the tree to commit
	charge := ""
	pass := false
	if it.repair {
		next, charge, err = r.settleRepair(done, it, reset != "")
		if err != nil {
			return res, r.abort(it, err)
		}
		if reset != "" {
			res.Reason = reset
		}
	} else {
		var t *tree.Node
		switch {
		case reset != "":
			t = tree.Clone(it.start)
			charge, res.Reason = it.sel.Node.ID, reset
		default:
			var problems []string
			t, problems = r.agentTree(it)
			if t == nil {
				// Invalid: commit it as the agent left it; the next iteration repairs it.
				next, _ = os.ReadFile(abs(r.repo.Root, TreePath))
				it.meta.Problems = problems
				r.state.Repair = tree.Broken(it.sel.Node.ID)
				res.Reason = "the agent left the task tree invalid (REPAIR TREE next)"
				r.event(it.n, "tree_invalid", it.sel.Node.ID, map[string]any{"problems": problems})
				break
			}
			if res.Kind == tree.Execute {
				res.Guard = r.runGuard(ctx, it, budget-time.Since(began))
				if ctx.Err() != nil {
					return res, r.interrupted(it)
				}
				// The guard runs the agent's code, which may rewrite the guard itself.
				if err := r.restoreProtected(done, it); err != nil {
					return res, r.abort(it, err)
				}
				pass = res.Guard == GuardPass
				if !pass {
					charge, res.Reason = it.sel.Node.ID, "the guard failed"
				}
			} else if !tree.GainedChildren(it.start, t, it.sel.Node.ID) {
				charge = it.sel.Node.ID
				res.Reason = "a DECOMPOSE that added no children to the selected leaf"
				if len(changed) == 0 {
					res.Reason = "the iteration changed nothing"
				}
			}
		}
		if t != nil {
			tree.Apply(t, tree.Outcome{Node: it.sel.Node.ID, Pass: pass, Charge: charge != ""})
			next = tree.Canonical(t)
		}
	}
	if r.state.Stuck != "" && !it.repair {
		r.state.Stuck = ""
	}
	it.meta.Charged = charge
	if next != nil {
		if err := artifact.WriteFileAtomic(abs(r.repo.Root, TreePath), next, 0o644); err != nil {
			return res, r.abort(it, err)
		}
	} else if err := os.Remove(abs(r.repo.Root, TreePath)); err != nil && !os.IsNotExist(err) {
		return res, r.abort(it, err)
	}
	if charge != "" {
		r.event(it.n, "attempt_charged", charge, map[string]any{"reason": res.Reason})
	}
	return r.commit(done, it, res, next)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (r *Runner) promptInput(it *iteration) promptInput {
	read := func(p string) string {
		data, _ := os.ReadFile(abs(r.repo.Root, p))
		return string(data)
	}
	in := promptInput{RunID: r.state.RunID, Iteration: it.n, Guard: r.cfg.Guard.Command, Goal: read(GoalPath), Memory: map[string]string{}}
	for _, p := range memoryFiles {
		in.Memory[p] = read(p)
	}
	if it.repair {
		in.Repair, in.Problems, in.Invalid = true, it.problems, it.startRaw
	} else {
		in.Tree, in.Selection = it.start, it.sel
	}
	return in
}

// runExecutor runs the agent session with the whole budget, a private home
// outside the repository that is removed after it, the key proxy when the
// executor is given a key, and the executor's sandbox.
func (r *Runner) runExecutor(ctx context.Context, it *iteration, promptFile string, prompt []byte, budget time.Duration) (proc.Result, error) {
	// The home is a directory inside a directory of its own, so that
	// even beside the home the agent finds nothing it may write.
	outer, err := os.MkdirTemp("", agentHomePattern(r.repo, r.state.RunID, it.n))
	if err != nil {
		return proc.Result{}, fmt.Errorf("create the agent's private home: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(outer); err != nil {
			r.say("warning: remove the agent's private home: %v", err)
		}
	}()
	home := filepath.Join(outer, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return proc.Result{}, fmt.Errorf("create the agent's private home: %w", err)
	}
	inv := Invocation{Root: r.repo.Root, PromptFile: promptFile, Prompt: prompt, Home: home, RunID: r.state.RunID, Iteration: it.n, NodeID: it.meta.Node, Mode: it.meta.Mode, Model: r.cfg.Executor.Model}
	var port uint16
	if keyEnv, upstream := r.cfg.Executor.endpoint(); keyEnv != "" {
		proxy, err := keyproxy.Start(upstream, getenv(r.opts.Environ, keyEnv), nil)
		if err != nil {
			return proc.Result{}, fmt.Errorf("start the key proxy for %s: %w", keyEnv, err)
		}
		defer proxy.Close()
		inv.ModelURL, inv.ModelKey, port = proxy.URL, proxy.Key, proxy.Port
	}
	box, err := prepareExecutorSandbox(r.cfg.Executor, r.repo, home, port)
	if err != nil {
		return proc.Result{}, err
	}
	inv.Confined = box.Confined()
	it.meta.ExecutorSandbox = box.Summary()
	cmd, err := r.exec.Command(inv)
	if err != nil {
		return proc.Result{}, fmt.Errorf("build the executor command: %w", err)
	}
	env, _ := proc.EnvPolicy{Pass: r.cfg.Executor.PassEnv}.Environ(r.opts.Environ)
	env = append(append(env, loopEnv(inv)...), cmd.Env...)
	logFile := r.logPath(it, "executor.log")
	started := false
	res := proc.Run(ctx, proc.Spec{
		Argv: cmd.Argv, Dir: r.repo.Root, Timeout: budget, Stdout: logFile, Stderr: logFile, Env: env,
		MaxOutputBytes: r.cfg.ExecutorOutputLimitBytes, StdinFile: cmd.Stdin, TermGrace: killGrace, Sandbox: box,
		OnStart: func(pgid int, ticks uint64) {
			started = true
			if err := r.repo.RecordCommand(gitws.RunningCommand{PGID: pgid, StartTicks: ticks}); err != nil {
				r.say("warning: %v", err)
			}
		},
	})
	_ = r.repo.ClearCommand()
	if !started && ctx.Err() == nil {
		// A misconfiguration, not the agent's failure: no attempt is charged.
		return res, fmt.Errorf("start the executor %s: %s", quoteArgv(cmd.Argv), res.Err)
	}
	it.meta.ExecutorArgv, it.meta.ExecutorExit, it.meta.ExecutorError, it.meta.ExecutorSeconds = cmd.Argv, res.ExitCode, res.Err, res.Duration.Seconds()
	r.event(it.n, "executor_finished", it.meta.Node, map[string]any{"exit_code": res.ExitCode, "error": res.Err, "timed_out": res.TimedOut})
	return res, nil
}

// runGuard runs the guard with what is left of the budget.
func (r *Runner) runGuard(ctx context.Context, it *iteration, left time.Duration) string {
	logFile := r.logPath(it, "guard.log")
	it.meta.GuardArgv = r.cfg.Guard.Command
	if left <= 0 {
		_ = os.WriteFile(logFile, []byte("factory loop: no time left in the iteration budget for the guard\n"), 0o644)
		it.meta.GuardError = "no time left in the iteration budget"
		r.event(it.n, "guard_finished", it.meta.Node, map[string]any{"result": GuardFail, "error": it.meta.GuardError})
		return GuardFail
	}
	env, _ := proc.EnvPolicy{Pass: r.cfg.Guard.PassEnv}.Environ(r.opts.Environ)
	res := proc.Run(ctx, proc.Spec{
		Argv: r.cfg.Guard.Command, Dir: r.repo.Root, Timeout: left, Stdout: logFile, Stderr: logFile, Env: env,
		MaxOutputBytes: r.cfg.GuardOutputLimitBytes, TermGrace: killGrace, Sandbox: r.guardBox,
	})
	code := res.ExitCode
	it.meta.GuardExit, it.meta.GuardError, it.meta.GuardSeconds = &code, res.Err, res.Duration.Seconds()
	result := GuardFail
	if res.ExitCode == 0 && res.Err == "" {
		result = GuardPass
	}
	r.event(it.n, "guard_finished", it.meta.Node, map[string]any{"result": result, "exit_code": res.ExitCode, "error": res.Err})
	return result
}

// headMoved reports whether the agent committed or switched branches.
func (r *Runner) headMoved(ctx context.Context, it *iteration) (bool, string, error) {
	branch, err := r.repo.CurrentBranch(ctx)
	if err != nil {
		return false, "", err
	}
	if branch != r.state.Branch {
		return true, fmt.Sprintf("the agent switched HEAD from %s to %s", r.state.Branch, orDash(branch)), nil
	}
	head, err := r.repo.Head(ctx)
	if err != nil {
		return false, "", err
	}
	if head != it.baseline.Commit {
		return true, fmt.Sprintf("the agent moved HEAD (committed) from %.12s to %.12s", it.baseline.Commit, head), nil
	}
	return false, "", nil
}

// reset restores the iteration's starting commit, keeping ignored files
// and the iteration logs.
func (r *Runner) reset(ctx context.Context, it *iteration) error {
	ctx, cancel := context.WithTimeout(ctx, rollbackTimeout)
	defer cancel()
	var rep gitws.RollbackReport
	err := r.repo.DuringGitStep(gitws.GitStep{Step: "reset iteration"}, func() (err error) {
		rep, err = r.repo.Rollback(ctx, it.baseline)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset to %.12s (the step journal is kept: run 'factory loop recover'): %w", it.baseline.Commit, err)
	}
	it.meta.NewRefs = rep.NewRefs
	if len(rep.NewRefs) > 0 {
		r.event(it.n, "new_refs_left", it.meta.Node, map[string]any{"refs": rep.NewRefs})
	}
	return nil
}

// agentTree loads the tree the agent left, restores the runner-owned fields
// from the last valid tree (logging each overwrite), then checks it.
func (r *Runner) agentTree(it *iteration) (*tree.Node, []string) {
	data, err := os.ReadFile(abs(r.repo.Root, TreePath))
	if err != nil {
		return nil, []string{fmt.Sprintf("read %s: %v", TreePath, err)}
	}
	t, err := tree.Decode(data)
	if err != nil {
		return nil, problemStrings(err)
	}
	ow := tree.RestoreRunnerOwned(it.last, t, r.cfg.MaxAttemptsDefault)
	it.meta.Overwritten = ow
	for _, o := range ow {
		r.event(it.n, "runner_owned_field_overwritten", o.Node, o)
	}
	ps := append(tree.Check(t), tree.CheckImmutable(it.last, t)...)
	if len(ps) > 0 {
		return nil, problemStrings(tree.Problems(ps))
	}
	return t, nil
}

// settleRepair decides a REPAIR TREE iteration: the tree to commit (nil to
// commit its absence) and the leaf to charge now that it is valid again.
func (r *Runner) settleRepair(ctx context.Context, it *iteration, wasReset bool) ([]byte, string, error) {
	var t *tree.Node
	var problems []string
	if wasReset {
		problems = it.problems
	} else {
		t, problems = r.agentTree(it)
	}
	next, charge, stop := r.state.Repair.AfterRepair(t != nil)
	r.state.Repair = next
	if t == nil {
		it.meta.Problems = problems
		r.event(it.n, "repair_failed", "", map[string]any{"failed_repairs": next.Failed, "problems": problems})
		if stop {
			r.event(it.n, "repairs_exhausted", "", nil)
		}
		data, err := os.ReadFile(abs(r.repo.Root, TreePath))
		if err != nil && !os.IsNotExist(err) {
			return nil, "", err
		}
		return data, "", nil
	}
	tree.Apply(t, tree.Outcome{Node: charge, Charge: charge != ""})
	r.event(it.n, "tree_repaired", "", map[string]any{"charged": charge})
	return tree.Canonical(t), charge, nil
}

// commit writes run.json, commits everything, writes the remaining logs and
// removes the journal.
func (r *Runner) commit(ctx context.Context, it *iteration, res StepResult, next []byte) (StepResult, error) {
	r.state.Iteration = it.n
	if err := writeRunState(r.repo.Root, r.state); err != nil {
		return res, r.abort(it, err)
	}
	res.Message = fmt.Sprintf("chore(loop): run %s iter %d node %s %s guard=%s", r.state.RunID, it.n, orDash(res.Node), res.Kind, res.Guard)
	commit, err := commitAll(ctx, r.repo, res.Message)
	if err != nil {
		return res, r.abort(it, err)
	}
	res.Commit = commit
	it.meta.Kind, it.meta.Guard, it.meta.Reason, it.meta.Commit = res.Kind, res.Guard, res.Reason, commit
	it.meta.Overwritten, it.meta.Problems, it.meta.NewRefs = nonNil(it.meta.Overwritten), nonNil(it.meta.Problems), nonNil(it.meta.NewRefs)
	var errs []error
	if next != nil {
		errs = append(errs, artifact.WriteFileAtomic(r.logPath(it, "tree.after.json"), next, 0o644))
	}
	if patch, err := r.repo.Diff(ctx, it.baseline.Commit, commit); err == nil {
		errs = append(errs, artifact.WriteFileAtomic(r.logPath(it, "diff.patch"), patch, 0o644))
	} else {
		errs = append(errs, err)
	}
	errs = append(errs, artifact.WriteJSON(r.logPath(it, "meta.json"), it.meta))
	r.event(it.n, "iteration_committed", res.Node, map[string]any{"commit": commit, "message": res.Message})
	if err := removeJournal(r.repo); err != nil {
		return res, err
	}
	if err := errors.Join(errs...); err != nil {
		r.say("warning: iteration logs: %v", err)
	}
	r.say("iteration %d: %s", it.n, res.Message)
	if r.OnCommit != nil {
		r.OnCommit(res)
	}
	if r.state.Repair.Failed >= tree.MaxFailedRepairs {
		return res, fmt.Errorf("%w (%d in a row): fix %s by hand and commit it", ErrRepairsExhausted, r.state.Repair.Failed, TreePath)
	}
	return res, nil
}

// abort resets an iteration that failed in the runner itself.
func (r *Runner) abort(it *iteration, cause error) error {
	ctx := context.Background()
	if err := r.reset(ctx, it); err != nil {
		return errors.Join(cause, err)
	}
	if err := removeJournal(r.repo); err != nil {
		return errors.Join(cause, err)
	}
	r.event(it.n, "iteration_aborted", it.meta.Node, map[string]any{"error": cause.Error()})
	return cause
}

// interrupted resets a canceled iteration.
func (r *Runner) interrupted(it *iteration) error {
	if err := r.reset(context.Background(), it); err != nil {
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	if err := removeJournal(r.repo); err != nil {
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	r.event(it.n, "interrupted", it.meta.Node, nil)
	return fmt.Errorf("%w: iteration %d was reset to %.12s", ErrInterrupted, it.n, it.baseline.Commit)
}

// stuck commits the stuck leaf's question once, then reports it.
func (r *Runner) stuck(ctx context.Context, it *iteration) (StepResult, error) {
	n := it.sel.Node
	res := StepResult{Stuck: true, StuckNode: n.ID, StuckPath: it.sel.PathString(), Attempts: fmt.Sprintf("%d/%d", n.Attempts, n.MaxAttempts)}
	if r.state.Stuck == n.ID {
		return res, nil
	}
	q := r.question(it)
	p := abs(r.repo.Root, QuestionsPath)
	old, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		return res, fmt.Errorf("read %s: %w", QuestionsPath, err)
	}
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		old = append(old, '\n')
	}
	if err := artifact.WriteFileAtomic(p, append(old, q...), 0o644); err != nil {
		return res, fmt.Errorf("write %s: %w", QuestionsPath, err)
	}
	r.state.Stuck = n.ID
	if err := writeRunState(r.repo.Root, r.state); err != nil {
		return res, err
	}
	res.Message = fmt.Sprintf("chore(loop): run %s stuck node %s", r.state.RunID, n.ID)
	if res.Commit, err = commitAll(ctx, r.repo, res.Message); err != nil {
		return res, err
	}
	r.event(0, "stuck", n.ID, map[string]any{"path": res.StuckPath, "attempts": res.Attempts, "commit": res.Commit})
	return res, nil
}

// question is the HUMAN_QUESTIONS.md entry of a stuck leaf, with the tail
// of its last failed guard from the local iteration logs.
func (r *Runner) question(it *iteration) []byte {
	n := it.sel.Node
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Stuck: %s (run %s)\n\n", it.sel.PathString(), r.state.RunID)
	fmt.Fprintf(&b, "The leaf %q (%s) used all %d attempts without a green guard.\n\n", n.ID, n.Title, n.MaxAttempts)
	found := false
	for k := r.state.Iteration; k >= 1 && !found; k-- {
		dir := path.Join(IterationsDir, r.state.RunID, strconv.Itoa(k))
		var m Meta
		if data, err := os.ReadFile(abs(r.repo.Root, dir+"/meta.json")); err != nil || jsonUnmarshal(data, &m) != nil {
			continue
		}
		if m.Node != n.ID || m.Guard != GuardFail {
			continue
		}
		found = true
		tail, _ := proc.Tail(abs(r.repo.Root, dir+"/guard.log"), 2000)
		fmt.Fprintf(&b, "Last guard failure (iteration %d, %s), end of its output:\n\n```\n%s\n```\n\n", k, quoteArgv(m.GuardArgv), strings.TrimRight(tail, "\n"))
	}
	if !found {
		b.WriteString("No failed guard is recorded for it in the local iteration logs: its attempts went to iterations\nthat changed nothing, timed out, were undone or left the tree invalid.\n\n")
	}
	fmt.Fprintf(&b, "To go on, change the tree by hand (rewrite the leaf, split it, or raise its max_attempts),\ncommit, and run 'factory loop run' again.\n")
	return []byte(b.String())
}

// protectedFiles are the human's and the runner's: an agent that rewrites
// the guard in config.toml or loosens the schema would grade its own work.
var protectedFiles = []string{ConfigPath, RunStatePath, tree.SchemaPath}

// restoreProtected puts back the protected files as they were at the
// iteration's start, logging each.
func (r *Runner) restoreProtected(ctx context.Context, it *iteration) error {
	for _, p := range protectedFiles {
		want, err := r.repo.Show(ctx, it.baseline.Commit, p)
		if err != nil && !errors.Is(err, gitws.ErrNotInCommit) {
			return err
		}
		full := abs(r.repo.Root, p)
		got, rerr := os.ReadFile(full)
		switch {
		case errors.Is(err, gitws.ErrNotInCommit):
			if rerr != nil {
				continue
			}
			if err := os.Remove(full); err != nil {
				return fmt.Errorf("remove %s: %w", p, err)
			}
		case rerr == nil && bytes.Equal(got, want):
			continue
		default:
			if err := os.MkdirAll(path.Dir(full), 0o755); err != nil {
				return err
			}
			if err := artifact.WriteFileAtomic(full, want, 0o644); err != nil {
				return fmt.Errorf("restore %s: %w", p, err)
			}
		}
		r.event(it.n, "protected_file_restored", it.meta.Node, map[string]any{"path": p})
	}
	return nil
}
