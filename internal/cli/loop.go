package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/loop"
	"github.com/factory-harness/factory/internal/loop/tree"
)

const loopExitCodes = `Exit codes: 0 done (step: an iteration ran and was committed, whatever the guard
said; run: the root passes), 1 invalid tree or config (validate), or the tree still
invalid after three REPAIR TREE iterations in a row, 2 refused with nothing modified
(usage, main/master, dirty tree, no .runner/, lock held, an interrupted step to
recover), 3 error or interrupted (the iteration is reset), 4 stuck: a leaf used all its
attempts and needs a human, 5 the iteration limit was reached.`

func newLoopCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loop",
		Short: "Drive fresh agent sessions over a strict task tree until a guard says it is done",
		Long: `factory loop is a deterministic runner for agent loops. The task tree in
.runner/tree.json is the only record of progress, and only the runner writes it: it
picks the leftmost open leaf, runs one fresh agent session (the executor) with a prompt
pack, runs the guard (default: just ci) if the agent changed files outside .runner/,
marks the leaf passed only on a green guard, and commits every iteration on the run's
branch loop/<run-id>. Passed nodes are immutable; an invalid tree is repaired by the
next iteration.

Start with:
  factory loop init --goal-file GOAL.md    # creates .runner/ (edit .runner/config.toml)
  factory loop start                       # creates loop/<run-id> and commits .runner/
  factory loop run                         # iterates until done, stuck or the limit

See docs/loop.md for the whole guide.

` + loopExitCodes,
		Args: noArgs("loop"),
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newLoopInitCmd(env), newLoopStartCmd(env), newLoopValidateCmd(env), newLoopSelectCmd(env),
		newLoopStepCmd(env), newLoopRunCmd(env), newLoopStatusCmd(env), newLoopRecoverCmd(env))
	return cmd
}

// loopError maps the loop package's outcomes onto the exit codes.
func loopError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, loop.ErrRefused):
		return err
	case errors.Is(err, loop.ErrInterrupted), errors.Is(err, context.Canceled):
		return &exitError{code: ExitInternal, err: err}
	case errors.Is(err, loop.ErrRepairsExhausted):
		return &exitError{code: ExitFail, err: err}
	}
	return &internalError{err: err}
}

func repoFlag(c *cobra.Command, repo *string) {
	c.Flags().StringVar(repo, "repo", ".", "root of the git work tree")
}

func newLoopInitCmd(env Env) *cobra.Command {
	var o loop.InitOptions
	cmd := &cobra.Command{
		Use:   "init [--repo DIR] [--goal-file FILE] [--force]",
		Short: "Create .runner/ with the goal, memory files, a one-node tree and config.toml",
		Long: `Create .runner/ in the repository: GOAL.md (a copy of --goal-file, or a template),
ASSUMPTIONS.md, HUMAN_QUESTIONS.md, FEEDBACK_LOG.md, IMPROVEMENTS.md, tree.json (one root
node: id "root", title = GOAL.md's first heading, goal = its first paragraph),
config.toml (every key commented at its default), schemas/task_tree/v1.schema.json, and
a .gitignore entry for .runner/iterations/. It commits nothing; 'factory loop start'
does. An existing .runner/ is refused without --force.

` + loopExitCodes,
		Args: noArgs("loop init"),
		RunE: func(c *cobra.Command, _ []string) error {
			written, err := loop.Init(o)
			if err != nil {
				return loopError(err)
			}
			for _, p := range written {
				fmt.Fprintf(env.Stdout, "wrote %s\n", p)
			}
			fmt.Fprintf(env.Stdout, "next: set [executor] and [guard] in %s, then run 'factory loop start'\n", loop.ConfigPath)
			return nil
		},
	}
	repoFlag(cmd, &o.Root)
	cmd.Flags().StringVar(&o.GoalFile, "goal-file", "", "Markdown file to copy to .runner/GOAL.md (default: a template)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "overwrite an existing .runner/")
	return cmd
}

func newLoopStartCmd(env Env) *cobra.Command {
	var o loop.StartOptions
	cmd := &cobra.Command{
		Use:   "start [--repo DIR] [--run-id ID]",
		Short: "Fix the run id, create branch loop/<run-id> and commit the bootstrap",
		Long: `Fix the run id (--run-id, or one generated now from the UTC time and random bytes),
create and check out loop/<run-id> at HEAD, write .runner/run.json and commit init's files
as "chore(loop): start run <run-id>". Only the files 'factory loop init' writes may be
uncommitted. The tree and config.toml must be valid.

` + loopExitCodes,
		Args: noArgs("loop start"),
		RunE: func(c *cobra.Command, _ []string) error {
			st, commit, err := loop.Start(c.Context(), o)
			if err != nil {
				return loopError(err)
			}
			fmt.Fprintf(env.Stdout, "run %s started on %s at %.12s\n", st.RunID, st.Branch, commit)
			return nil
		},
	}
	repoFlag(cmd, &o.Root)
	cmd.Flags().StringVar(&o.RunID, "run-id", "", "run id (letters, digits, '.', '_', '-'); default: generated")
	return cmd
}

func newLoopValidateCmd(env Env) *cobra.Command {
	var repo string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "validate [--repo DIR] [--json]",
		Short: "Check the tree (schema and invariants), the layout and config.toml",
		Long: `Check .runner/: the files the loop needs, config.toml (strictly: unknown keys are
errors), run.json if the run was started, the schema file, and tree.json against the v1
schema and the invariants a schema cannot express (unique ids, attempts <= max_attempts,
an internal node passes exactly when its children do). Every problem is printed as
"path: message". Exit 0 when valid, 1 when not.`,
		Args: noArgs("loop validate"),
		RunE: func(c *cobra.Command, _ []string) error {
			root, err := loop.CheckRoot(c.Context(), repo)
			if err != nil {
				return loopError(err)
			}
			ps := loop.Validate(c.Context(), root)
			if jsonOut {
				out, _ := json.MarshalIndent(map[string]any{"valid": len(ps) == 0, "problems": nonNilStrings(ps)}, "", "  ")
				fmt.Fprintf(env.Stdout, "%s\n", out)
			} else {
				for _, p := range ps {
					fmt.Fprintln(env.Stdout, p)
				}
			}
			if len(ps) > 0 {
				return &exitError{code: ExitFail, err: fmt.Errorf("loop validate: %s", plural(len(ps), "problem"))}
			}
			if !jsonOut {
				fmt.Fprintln(env.Stdout, "valid")
			}
			return nil
		},
	}
	repoFlag(cmd, &repo)
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"valid": ..., "problems": [...]} as JSON`)
	return cmd
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func newLoopSelectCmd(env Env) *cobra.Command {
	var repo string
	cmd := &cobra.Command{
		Use:   "select [--repo DIR]",
		Short: "Print the leaf the next step works on",
		Long: `Print what the next step would do, without doing it:
  status=open id=<id> path=<root/...> attempts=<n>/<max>
  status=stuck id=<id> path=<root/...> attempts=<n>/<n>
  status=complete
  status=repair problems=<n>    (the tree is invalid: the next step is a REPAIR TREE)`,
		Args: noArgs("loop select"),
		RunE: func(c *cobra.Command, _ []string) error {
			root, err := loop.CheckRoot(c.Context(), repo)
			if err != nil {
				return loopError(err)
			}
			sel, _, err := loop.Select(c.Context(), root)
			if err != nil {
				return loopError(err)
			}
			fmt.Fprintln(env.Stdout, sel.Line())
			return nil
		},
	}
	repoFlag(cmd, &repo)
	return cmd
}

// stepFlags are the overrides of config.toml shared by step and run.
func stepFlags(c *cobra.Command, o *loop.Options, quiet *bool) {
	repoFlag(c, &o.Root)
	c.Flags().IntVar(&o.IterationTimeoutSecs, "iteration-timeout-secs", 0, "override iteration_timeout_secs: one budget for executor and guard")
	c.Flags().Int64Var(&o.ExecutorOutputLimitBytes, "executor-output-limit-bytes", 0, "override executor_output_limit_bytes")
	c.Flags().Int64Var(&o.GuardOutputLimitBytes, "guard-output-limit-bytes", 0, "override guard_output_limit_bytes")
	c.Flags().BoolVarP(quiet, "quiet", "q", false, "no progress lines on stderr")
}

func openRunner(c *cobra.Command, env Env, o loop.Options, quiet bool) (*loop.Runner, error) {
	if o.IterationTimeoutSecs < 0 || o.ExecutorOutputLimitBytes < 0 || o.GuardOutputLimitBytes < 0 {
		return nil, usagef("the limits must be positive (see '%s --help')", c.CommandPath())
	}
	if !quiet {
		o.Progress = env.Stderr
	}
	tc := lang.MachineToolchains()
	o.GuardCaches, o.GuardEnv = tc.Caches, tc.Env
	r, err := loop.Open(c.Context(), o)
	return r, loopError(err)
}

func printStep(w io.Writer, st loop.StepResult) {
	switch {
	case st.Complete:
		fmt.Fprintln(w, "status=complete")
	case st.Stuck:
		fmt.Fprintf(w, "status=stuck id=%s path=%s attempts=%s\n", st.StuckNode, st.StuckPath, st.Attempts)
	case st.Commit != "":
		fmt.Fprintln(w, st.Message)
	}
}

func stuckError(st loop.StepResult) error {
	return &exitError{code: ExitStuck, err: fmt.Errorf("leaf %s (%s) used all %s attempts: see %s", st.StuckNode, st.StuckPath, st.Attempts, loop.QuestionsPath)}
}

func newLoopStepCmd(env Env) *cobra.Command {
	var o loop.Options
	var quiet bool
	cmd := &cobra.Command{
		Use:   "step [--repo DIR] [flags]",
		Short: "Run exactly one iteration and commit it",
		Long: `Run exactly one iteration: refuse main/master and a dirty tree; load and validate
the tree; select the leftmost open leaf (or REPAIR TREE if the tree is invalid); run the
executor with the prompt pack and one wall-clock budget shared with the guard; reload and
validate the tree (runner-owned fields the agent changed are put back and logged; a
changed passed node makes it invalid); classify (EXECUTE if a file outside .runner/
changed, else DECOMPOSE); run the guard on EXECUTE; apply the runner's updates; write
the logs under .runner/iterations/<run-id>/<n>/; and commit everything as
  chore(loop): run <run-id> iter <n> node <id> <decompose|execute|repair> guard=<pass|fail|skipped>
An agent that commits or switches branches, or runs out of time, has its changes reset
(ignored files kept) and costs the leaf an attempt. Ctrl-C resets the iteration and
exits 3. After a SIGKILL, 'factory loop recover' resets to the last iteration commit.

` + loopExitCodes,
		Args: noArgs("loop step"),
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := openRunner(c, env, o, quiet)
			if err != nil {
				return err
			}
			defer r.Close()
			st, err := r.Step(c.Context(), false)
			printStep(env.Stdout, st)
			if err != nil {
				return loopError(err)
			}
			if st.Stuck {
				return stuckError(st)
			}
			return nil
		},
	}
	stepFlags(cmd, &o, &quiet)
	return cmd
}

func newLoopRunCmd(env Env) *cobra.Command {
	var o loop.Options
	var quiet bool
	var max int
	cmd := &cobra.Command{
		Use:   "run [--repo DIR] [--max-iterations N] [flags]",
		Short: "Run iterations until the root passes, a leaf is stuck or the limit is reached",
		Long: `Run iterations as 'factory loop step' does until the root node passes (exit 0), a
leaf used all its attempts (exit 4: the leaf and its last guard failure are appended to
.runner/HUMAN_QUESTIONS.md in a commit "chore(loop): run <run-id> stuck node <id>"), the
tree stays invalid after three repairs (exit 1) or --max-iterations iterations ran in
this call (exit 5). Each committed iteration's message is printed on stdout.

` + loopExitCodes,
		Args: noArgs("loop run"),
		RunE: func(c *cobra.Command, _ []string) error {
			if max < 0 {
				return usagef("--max-iterations must be positive")
			}
			r, err := openRunner(c, env, o, quiet)
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := runPrinting(c.Context(), r, max, env.Stdout)
			if err != nil {
				return loopError(err)
			}
			switch res.Status {
			case tree.StatusComplete:
				fmt.Fprintf(env.Stdout, "status=complete iterations=%d\n", res.Iterations)
				return nil
			case tree.StatusStuck:
				printStep(env.Stdout, res.Last)
				return stuckError(res.Last)
			}
			return &exitError{code: ExitBudget, err: fmt.Errorf("stopped after %d iterations (--max-iterations); the root does not pass yet", res.Iterations)}
		},
	}
	stepFlags(cmd, &o, &quiet)
	cmd.Flags().IntVar(&max, "max-iterations", 0, "iterations in this call (default: max_iterations of config.toml, 50)")
	return cmd
}

// runPrinting runs r, printing each committed iteration's message.
func runPrinting(ctx context.Context, r *loop.Runner, max int, w io.Writer) (loop.RunResult, error) {
	r.OnCommit = func(st loop.StepResult) { fmt.Fprintln(w, st.Message) }
	return r.Run(ctx, max)
}

func newLoopStatusCmd(env Env) *cobra.Command {
	var repo string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "status [--repo DIR] [--json]",
		Short: "Show the tree as an outline with what passed, what is open and what is stuck",
		Args:  noArgs("loop status"),
		RunE: func(c *cobra.Command, _ []string) error {
			rep, err := loop.Status(c.Context(), repo)
			if err != nil {
				return loopError(err)
			}
			if jsonOut {
				out, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return &internalError{err: err}
				}
				fmt.Fprintf(env.Stdout, "%s\n", out)
				return nil
			}
			var b strings.Builder
			rep.WriteOutline(&b)
			fmt.Fprint(env.Stdout, b.String())
			return nil
		},
	}
	repoFlag(cmd, &repo)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the run state, the next selection and the tree as JSON")
	return cmd
}

func newLoopRecoverCmd(env Env) *cobra.Command {
	var repo string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "recover [--repo DIR] [--json]",
		Short: "Reset to the last iteration commit after a step was killed",
		Long: `While an iteration runs, the runner keeps a step journal in the git directory
(.git/factory/loop-step.json) with the starting commit, the branch, the ignored files and
git metadata, and the executor's process group. 'factory loop step' refuses to run while
it is present. 'factory loop recover' kills the executor's process group if it survived,
and, unless the iteration's commit was already made, resets the repository to the
iteration's starting commit (ignored files kept, the iteration's logs moved to
<n>.interrupted), then removes the journal. A git killed mid-commit leaves .git/index.lock
(or HEAD's or the branch's lock): recover removes it when it is at least 10 s old, and
otherwise refuses, as a git may still hold it. Without a journal it changes nothing in the
repository. Either way it removes the private homes ($TMPDIR/factory-loop-home-<repo tag>-*)
that killed iterations of this repository left behind.

` + loopExitCodes,
		Args: noArgs("loop recover"),
		RunE: func(c *cobra.Command, _ []string) error {
			res, err := loop.Recover(c.Context(), repo, nil)
			if err != nil {
				return loopError(err)
			}
			if !jsonOut {
				for _, p := range res.GitLocks {
					fmt.Fprintf(env.Stdout, "removed the stale git lock %s\n", p)
				}
				for _, p := range res.AgentHomes {
					fmt.Fprintf(env.Stdout, "removed the agent home %s left by a killed iteration\n", p)
				}
			}
			switch {
			case jsonOut:
				out, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintf(env.Stdout, "%s\n", out)
			case !res.Found:
				fmt.Fprintln(env.Stdout, "nothing to recover: no interrupted step")
			case res.Committed:
				fmt.Fprintf(env.Stdout, "recovered: iteration %d of run %s had been committed; journal removed\n", res.Iteration, res.RunID)
			default:
				fmt.Fprintf(env.Stdout, "recovered: iteration %d of run %s reset to %.12s\n", res.Iteration, res.RunID, res.Reset)
			}
			return nil
		},
	}
	repoFlag(cmd, &repo)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return cmd
}
