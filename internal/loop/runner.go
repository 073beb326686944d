package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/agentcli"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// Errors a caller maps to exit codes (besides ErrRefused).
var (
	// ErrInterrupted: the step was canceled (Ctrl-C); the repository is back
	// at the iteration's starting commit.
	ErrInterrupted = errors.New("interrupted")
	// ErrRepairsExhausted: the tree is still invalid after
	// tree.MaxFailedRepairs REPAIR TREE iterations in a row.
	ErrRepairsExhausted = errors.New("the task tree is still invalid after repeated REPAIR TREE iterations")
)

// killGrace is how long an executor or guard has between SIGTERM and SIGKILL.
const killGrace = 5 * time.Second

// rollbackTimeout bounds the git work of a reset, which runs even after
// the step was canceled.
const rollbackTimeout = 2 * time.Minute

// Options configure a Runner. Zero overrides keep the config's values.
type Options struct {
	Root                     string
	IterationTimeoutSecs     int
	ExecutorOutputLimitBytes int64
	GuardOutputLimitBytes    int64
	Progress                 io.Writer        // nil: silent
	Now                      func() time.Time // clock of log timestamps; nil: time.Now
	Environ                  []string         // the environment to filter for commands; nil: os.Environ()
	// GuardCaches and GuardEnv are the toolchains' caches the guard sees copy-on-write and the
	// defaults of its environment (sandbox.Request's Caches and Env; the CLI passes the
	// machine's, lang.MachineToolchains).
	GuardCaches []sandbox.Cache
	GuardEnv    []string
}

// Runner runs iterations on one repository, holding its lock.
type Runner struct {
	repo  *gitws.Repo
	lock  *gitws.Lock
	cfg   Config
	state RunState
	exec  Executor
	// guardBox confines the guard ([guard] sandbox); execBox is how the
	// executor is confined ([executor] sandbox), prepared again for each
	// iteration with its private home and key proxy.
	guardBox *sandbox.Policy
	execBox  *sandbox.Policy
	opts     Options
	events   eventLog
	// OnCommit, if set, is called after each iteration commit.
	OnCommit func(StepResult)
}

// Open checks that a step may run and takes the repository lock: a git
// work-tree root with .runner/, a valid config, a started run, no
// interrupted step, not on main/master, a clean tree. Every refusal wraps
// ErrRefused and leaves the repository untouched.
func Open(ctx context.Context, o Options) (*Runner, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	repo, err := gitws.Open(ctx, o.Root)
	if err != nil {
		return nil, refusef("--repo: %v", err)
	}
	if _, err := os.Stat(abs(repo.Root, RunnerDir)); err != nil {
		return nil, refusef("no %s in %s: run 'factory loop init' first", RunnerDir, repo.Root)
	}
	cfg, err := LoadConfig(repo.Root)
	if err != nil {
		return nil, err
	}
	if o.IterationTimeoutSecs > 0 {
		cfg.IterationTimeoutSecs = o.IterationTimeoutSecs
	}
	if o.ExecutorOutputLimitBytes > 0 {
		cfg.ExecutorOutputLimitBytes = o.ExecutorOutputLimitBytes
	}
	if o.GuardOutputLimitBytes > 0 {
		cfg.GuardOutputLimitBytes = o.GuardOutputLimitBytes
	}
	ex, err := NewExecutor(cfg.Executor, o.Environ)
	if err != nil {
		return nil, refusef("%s: %v", ConfigPath, err)
	}
	box, err := prepareGuardSandbox(cfg.Guard, repo, o)
	if err != nil {
		return nil, err
	}
	// Checked now, prepared again per iteration with its home and proxy.
	execBox, err := prepareExecutorSandbox(cfg.Executor, repo, "", 0)
	if err != nil {
		return nil, err
	}
	lock, err := repo.Lock()
	if err != nil {
		return nil, refusef("%v", err)
	}
	r := &Runner{repo: repo, lock: lock, cfg: cfg, exec: ex, guardBox: box, execBox: execBox, opts: o}
	if err := r.preflight(ctx); err != nil {
		lock.Unlock()
		return nil, err
	}
	r.opts.Root = repo.Root
	r.events = eventLog{path: abs(repo.Root, path.Join(IterationsDir, r.state.RunID, "events.jsonl")), runID: r.state.RunID, now: o.Now}
	r.say("guard %s", box.Describe())
	switch {
	case box.Summary().Mode == sandbox.ModeOff:
		r.say("warning: [guard] sandbox = \"off\": the guard runs with your full privileges (network, every file you can write)")
	case box.Warning() != "":
		r.say("%s", box.Warning())
	}
	if keyEnv, _ := cfg.Executor.endpoint(); keyEnv != "" && execBox.Confined() {
		r.say("executor %s; each iteration may connect to its key proxy", execBox.Describe())
	} else {
		r.say("executor %s", execBox.Describe())
	}
	switch {
	case execBox.Summary().Mode == sandbox.ModeOff:
		r.say("warning: [executor] sandbox = \"off\": the agent runs with your full privileges (network, every file you can write, the processes above it)")
	case execBox.Warning() != "":
		r.say("%s", execBox.Warning())
	}
	return r, nil
}

// prepareGuardSandbox decides, once per process, how the guard is confined
// as `factory run` confines verification: the work tree writable; the git
// directories and the iteration logs read-only (the guard runs code the
// agent wrote, which must not rewrite hooks or its own record). A machine
// that cannot confine is refused in "required" mode.
func prepareGuardSandbox(g GuardConfig, repo *gitws.Repo, o Options) (*sandbox.Policy, error) {
	mode := sandbox.Mode(g.Sandbox) // checked with the rest of config.toml
	box, err := sandbox.Prepare(sandbox.Request{Mode: mode, WorkTree: repo.Root, ReadOnly: readOnlyPaths(repo),
		Caches: o.GuardCaches, Env: o.GuardEnv})
	if err != nil {
		return nil, refusef("%s: [guard] sandbox = %q: %v", ConfigPath, mode, err)
	}
	return box, nil
}

// readOnlyPaths are kept read-only for the guard and the agent inside the
// writable work tree: the git directories (hooks, refs: the runner, not
// the agent, commits) and the iteration logs.
func readOnlyPaths(repo *gitws.Repo) []string {
	return []string{filepath.Join(repo.Root, ".git"), repo.GitDir, repo.CommonDir, abs(repo.Root, IterationsDir)}
}

// prepareExecutorSandbox decides how the agent is confined: its whole
// process tree writes only to the work tree, its private home and a
// private tmp, sees no process above it, and connects only to the key
// proxy's port (agentcli.Confinement). "required" on a machine that cannot
// is refused.
func prepareExecutorSandbox(e ExecutorConfig, repo *gitws.Repo, home string, proxyPort uint16) (*sandbox.Policy, error) {
	mode := sandbox.Mode(e.Sandbox) // checked with the rest of config.toml
	box, err := sandbox.Prepare(agentcli.Confinement(mode, repo.Root, readOnlyPaths(repo), home, proxyPort))
	if err != nil {
		return nil, refusef("%s: [executor] sandbox = %q: %v", ConfigPath, mode, err)
	}
	return box, nil
}

// LoadConfig reads and checks .runner/config.toml (a missing file means
// all defaults); problems are a refusal listing each.
func LoadConfig(root string) (Config, error) {
	data, err := os.ReadFile(abs(root, ConfigPath))
	if err != nil && !os.IsNotExist(err) {
		return Config{}, refusef("read %s: %v", ConfigPath, err)
	}
	cfg, ps := ParseConfig(data)
	if len(ps) > 0 {
		return cfg, refusef("%s is invalid:\n  %s", ConfigPath, strings.Join(ps, "\n  "))
	}
	return cfg, nil
}

func (r *Runner) preflight(ctx context.Context) error {
	if j, err := readJournal(r.repo); err != nil || j != nil {
		if err != nil {
			return refusef("%v (check the repository, then remove it)", err)
		}
		return refusef("iteration %d of run %s was interrupted (the step journal %s is present): run 'factory loop recover' to reset to the last iteration commit", j.Iteration, j.RunID, journalPath(r.repo))
	}
	branch, err := r.repo.CurrentBranch(ctx)
	if err != nil {
		return err
	}
	switch branch {
	case "main", "master":
		return refusef("refusing to run on %s: the loop commits every iteration; run 'factory loop start' to work on a loop/<run-id> branch", branch)
	case "":
		return refusef("HEAD is detached: check out the run's branch (loop/<run-id>)")
	}
	dirty, err := r.dirty(ctx)
	if err != nil {
		return err
	}
	if len(dirty) > 0 {
		return refusef("the work tree is not clean (%s): commit or remove these changes first", summarize(dirty, 5))
	}
	if r.state, err = readRunState(r.repo.Root); err != nil {
		return err
	}
	if branch != r.state.Branch {
		return refusef("HEAD is on %s but run %s works on %s: check out %s", branch, r.state.RunID, r.state.Branch, r.state.Branch)
	}
	return nil
}

// dirty lists the porcelain status lines, leaving out the iteration logs
// in case an agent un-ignored them.
func (r *Runner) dirty(ctx context.Context) ([]string, error) {
	lines, err := r.repo.Dirty(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(lines, func(l string) bool {
		return len(l) > 3 && isLogPath(l[3:])
	}), nil
}

func isLogPath(p string) bool { return p == IterationsDir || strings.HasPrefix(p, IterationsDir+"/") }

// Close releases the repository lock.
func (r *Runner) Close() error { return r.lock.Unlock() }

// State returns the run's bookkeeping as of the last commit.
func (r *Runner) State() RunState { return r.state }

func (r *Runner) say(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format+"\n", args...)
	}
}

func (r *Runner) event(iteration int, name, node string, detail any) {
	if err := os.MkdirAll(path.Dir(r.events.path), 0o755); err == nil {
		if err := r.events.add(iteration, name, node, detail); err != nil {
			r.say("warning: %v", err)
		}
	}
}

func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// RunResult is how Run ended.
type RunResult struct {
	Iterations int         // iterations run by this call
	Last       StepResult  // the last step
	Status     tree.Status // complete, stuck or open (the limit was reached)
}

// Run steps until the root passes, a leaf is stuck, the tree stays invalid
// (ErrRepairsExhausted) or maxIterations iterations ran (0: the config's).
func (r *Runner) Run(ctx context.Context, maxIterations int) (RunResult, error) {
	if maxIterations <= 0 {
		maxIterations = r.cfg.MaxIterations
	}
	var res RunResult
	for {
		if res.Iterations == maxIterations {
			// No iteration left: finish only what needs none.
			st, err := r.Step(ctx, true)
			res.Last = st
			switch {
			case err != nil:
				return res, err
			case st.Complete:
				res.Status = tree.StatusComplete
			case st.Stuck:
				res.Status = tree.StatusStuck
			default:
				res.Status = tree.StatusOpen
			}
			return res, nil
		}
		st, err := r.Step(ctx, false)
		res.Last = st
		if st.Iteration > 0 {
			res.Iterations++
		}
		switch {
		case err != nil:
			return res, err
		case st.Complete:
			res.Status = tree.StatusComplete
			return res, nil
		case st.Stuck:
			res.Status = tree.StatusStuck
			return res, nil
		}
	}
}
