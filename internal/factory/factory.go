// Package factory runs one work order through SE → TR → PO → finalize: the
// model proposes full-file writes, the harness checks and applies them, runs
// verification and acceptance commands, and rolls back on failure.
package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
	"github.com/factory-harness/factory/internal/workorder"
)

// Options configure one run.
type Options struct {
	Repo      string
	WorkOrder *workorder.WorkOrder
	Out       string

	Model       llm.Model
	ModelName   string
	Temperature float64
	// Prices estimate each attempt's cost in the summary; nil: unknown.
	Prices *llm.Prices
	// JSONSchema asks the model server for strict structured output.
	JSONSchema bool
	// CacheKey is every request's llm.Request.CacheKey, the provider's
	// prompt cache key: factory build passes one per build; "" means one
	// derived from the work order.
	CacheKey string
	// SharedContext lists the context files many work orders of the build
	// share, and StableContext those of them no work order of the build may
	// write: the SE prompt shows this order's shared context files first,
	// the stable ones before the others, in sections other orders' prompts
	// repeat byte for byte (see buildPrompt). Nil: every context file is
	// the order's own.
	SharedContext, StableContext []string
	// LongCache asks for the provider's long prompt cache
	// (llm.Request.LongCache): factory build sets it for a build expected to
	// outlive the default one.
	LongCache bool
	// RepoMap, when set, renders the repository map of the baseline commit
	// ranked for this work order (repomap.View.Text). Preflight calls it
	// once every check has passed, so a refused run writes no map cache;
	// every attempt's SE prompt shows the text with the order's own part.
	RepoMap func(ctx context.Context, repo *gitws.Repo, commit string) (string, error)

	MaxAttempts    int
	CommandTimeout time.Duration
	// VerifyCommands, when set, replace the global verification rules.
	VerifyCommands []string
	// Python is the interpreter used by the built-in verification commands.
	Python string
	// Env decides which environment variables commands see (--env-policy,
	// --pass-env); the zero value passes only the core set.
	Env proc.EnvPolicy
	// Sandbox confines those commands (--sandbox, --sandbox-home,
	// --sandbox-hide); Preflight sets WorkTree and ReadOnly itself. The zero
	// Mode means sandbox.ModeAuto.
	Sandbox sandbox.Request
	// Deps is the dependency step (--deps, --registry): after the writes
	// and before verification, the harness installs what the manifests and
	// lockfiles name, through the registry gateway (package deps).
	Deps deps.Options

	// RecordPath is the transcript the model records to, if any: like Out it
	// must be outside the repo, or rollback would delete it.
	RecordPath string

	// Tool names the caller in the attempt journal; "" means "factory run".
	// `factory build` recovers by itself from a journal its own kind left.
	Tool string
	// Lock, when set, is the repository lock the caller already holds for
	// longer than this run (factory build holds it for the whole build):
	// Preflight does not take it and Execute does not release it.
	Lock *gitws.Lock
	// Clean, with Lock, says the caller has seen the work tree clean since
	// it last changed it (factory build, after its own commit): Preflight
	// skips its dirty check, a git status of the whole tree.
	Clean bool
	// KeepJournal leaves the journal in place after a PASS, for a caller
	// that commits the result and then removes it (Repo.RemoveJournal):
	// a crash before the commit then still finds the attempt to undo.
	KeepJournal bool
	// OnEvent, when set, is called after every node of the graph.
	OnEvent func(Event)

	// Progress receives one human-readable line per step; nil discards.
	Progress io.Writer
	// Heartbeat is how often a line says the run still waits for the model
	// or a command; 0 means every 10 s.
	Heartbeat time.Duration
}

// PreflightError is a problem found before anything was modified.
type PreflightError struct{ Msg string }

func (e *PreflightError) Error() string { return e.Msg }

func preflightf(format string, args ...any) error {
	return &PreflightError{Msg: fmt.Sprintf(format, args...)}
}

// Run is a preflighted run, ready to execute.
type Run struct {
	opts     Options
	repo     *gitws.Repo
	lock     *gitws.Lock // held from Preflight until Execute returns
	baseline gitws.Baseline
	runID    string
	verify   [][]string // override argvs, parsed at preflight
	accept   [][]string
	runDir   string
	env      []string // the commands' environment, from opts.Env
	envNames []string // the names in env taken from ours, for the summary
	sandbox  *sandbox.Policy
	// depsBox confines the dependency step's package managers (nil with
	// --deps off).
	depsBox *sandbox.Policy
	repoMap string // Options.RepoMap's text, "" for none
}

// Preflight checks everything that can be checked without touching the repo
// or the output directory: repository state, output location, work order
// commands. Any error is a *PreflightError and nothing has been modified.
//
// It takes the repository's lock (see gitws.Lock), which Execute releases;
// a caller that does not Execute must call Close.
func Preflight(ctx context.Context, opts Options) (_ *Run, err error) {
	if opts.MaxAttempts < 1 {
		return nil, preflightf("--max-attempts must be at least 1, got %d", opts.MaxAttempts)
	}
	if opts.CommandTimeout <= 0 {
		return nil, preflightf("--timeout-seconds must be positive")
	}
	// Work order commands first: they are the user's input, and checking
	// them does not depend on the repository.
	r := &Run{opts: opts}
	for i, c := range opts.WorkOrder.AcceptanceCommands {
		argv, err := proc.ParseCommand(c)
		if err != nil {
			return nil, preflightf("work order %s: acceptance_commands[%d]: %v", opts.WorkOrder.ID, i, err)
		}
		r.accept = append(r.accept, argv)
	}
	for _, c := range opts.VerifyCommands {
		argv, err := proc.ParseCommand(c)
		if err != nil {
			return nil, preflightf("--verify-command: %v", err)
		}
		r.verify = append(r.verify, argv)
	}
	repo, err := gitws.Open(ctx, opts.Repo)
	if err != nil {
		return nil, preflightf("--repo: %v", err)
	}
	r.repo = repo
	if opts.Lock == nil {
		if r.lock, err = lockRepo(repo); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if err := checkNoJournal(repo); err != nil {
		return nil, err
	}
	if opts.Lock == nil { // a build has dealt with them as it started
		if err := checkGitLocks(repo, opts.Progress); err != nil {
			return nil, err
		}
	}
	head, err := repo.Head(ctx)
	if err != nil {
		if errors.Is(err, gitws.ErrNoCommits) {
			return nil, preflightf("repository %s has no commits; make an initial commit first", repo.Root)
		}
		return nil, preflightf("repository %s: %v", repo.Root, err)
	}
	// The index check and the baseline snapshot only read (git runs with
	// GIT_OPTIONAL_LOCKS=0), so they run at once; the dirty check then
	// reads the stat data the snapshot's walk recorded instead of having
	// git stat every file again. The snapshot counts only once the other two
	// have passed, and their errors come in this order.
	var (
		hidden, submodules, dirty []string
		indexErr, dirtyErr        error
		wg                        sync.WaitGroup
	)
	wg.Go(func() { hidden, submodules, indexErr = repo.IndexProblems(ctx, head) })
	baseline, snapErr := repo.SnapshotAt(ctx, head)
	wg.Wait()
	if !opts.Clean || opts.Lock == nil {
		if snapErr == nil {
			dirty, dirtyErr = repo.DirtyAt(ctx, &baseline)
		} else {
			dirty, dirtyErr = repo.Dirty(ctx)
		}
	}
	if indexErr != nil {
		return nil, preflightf("repository %s: %v", repo.Root, indexErr)
	}
	if len(submodules) > 0 {
		return nil, preflightf("repository %s has submodules (%s); factory refuses them: a submodule is a separate repository that commands could change and a rollback of this one would not restore",
			repo.Root, Summarize(submodules, 5))
	}
	if len(hidden) > 0 {
		return nil, preflightf("repository %s has files marked skip-worktree or assume-unchanged (a sparse checkout?), which git's reset cannot restore, so a rollback could not be exact: %s",
			repo.Root, Summarize(hidden, 5))
	}
	if dirtyErr != nil {
		return nil, preflightf("repository %s: %v", repo.Root, dirtyErr)
	}
	if len(dirty) > 0 {
		return nil, preflightf("repository %s has uncommitted changes (commit or stash them first; the factory rolls back with git and must not touch your work): %s",
			repo.Root, Summarize(dirty, 5))
	}
	if snapErr != nil {
		return nil, preflightf("repository %s: %v", repo.Root, snapErr)
	}
	r.baseline = baseline
	if err := checkOutput("--out", opts.Out, repo, true); err != nil {
		return nil, err
	}
	if abs, _ := filepath.Abs(opts.Out); !utf8.ValidString(abs) {
		return nil, preflightf("--out %q is not valid UTF-8: the journal that a recovery after a crash reads records the run directory as JSON text, which cannot hold it exactly; choose another path", abs)
	}
	if opts.RecordPath != "" {
		if err := checkOutput("--record", opts.RecordPath, repo, false); err != nil {
			return nil, err
		}
	}
	if r.sandbox, r.depsBox, err = prepareSandbox(opts, repo); err != nil {
		return nil, err
	}
	if r.runID, err = workorder.RunID(opts.WorkOrder, r.baseline.Commit); err != nil {
		return nil, err
	}
	if opts.RepoMap != nil {
		if r.repoMap, err = opts.RepoMap(ctx, repo, r.baseline.Commit); err != nil {
			return nil, err
		}
	}
	r.env, r.envNames = opts.Env.Environ(os.Environ())
	return r, nil
}

// prepareSandbox decides how commands are confined: writable work tree,
// read-only git directories (whichever of them are inside it) and artifacts.
// With the dependency step on and a manifest or lockfile in the work tree,
// it also prepares the step's confinement (prepareDeps); without one the
// dependency cache is neither made nor shown, until an attempt adds one.
func prepareSandbox(opts Options, repo *gitws.Repo) (run, step *sandbox.Policy, err error) {
	req := runRequest(opts, repo)
	if opts.Deps.Enabled() {
		// A manifest that does not parse is the step's to report.
		if uses, err := deps.Uses(repo.Root); uses || err != nil {
			return prepareDeps(opts, req)
		}
	}
	if run, err = sandbox.Prepare(req); err != nil {
		return nil, nil, preflightf("%v", err)
	}
	return run, nil, nil
}

// runRequest is the confinement of the run's commands.
func runRequest(opts Options, repo *gitws.Repo) sandbox.Request {
	req := opts.Sandbox
	if req.Mode == "" {
		req.Mode = sandbox.ModeAuto
	}
	req.WorkTree = repo.Root
	req.ReadOnly = []string{filepath.Join(repo.Root, ".git"), repo.GitDir, repo.CommonDir, opts.Out}
	return req
}

// prepareDeps makes the dependency cache and prepares the step's
// confinement and the run's commands' one, which see the cache
// copy-on-write (read-only with Landlock alone), where the step's Go
// modules and crates are.
func prepareDeps(opts Options, req sandbox.Request) (run, step *sandbox.Policy, err error) {
	cache, err := opts.Deps.CacheDir()
	if err != nil {
		return nil, nil, preflightf("%v", err)
	}
	stepReq, err := deps.StepRequest(req, cache)
	if err != nil {
		return nil, nil, preflightf("%v", err)
	}
	if step, err = sandbox.Prepare(stepReq); err != nil {
		return nil, nil, preflightf("%v", err)
	}
	req.Caches = deps.RunCaches(req.Caches, cache)
	if run, err = sandbox.Prepare(req); err != nil {
		return nil, nil, preflightf("%v", err)
	}
	return run, step, nil
}

// Summarize lists the first n items and how many more there are, for
// messages: "a, b, c, and 4 more".
func Summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s, and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// lockRepo takes the repository lock, turning "held" into a refusal.
func lockRepo(repo *gitws.Repo) (*gitws.Lock, error) {
	l, err := repo.Lock()
	if err != nil {
		return nil, preflightf("repository %s: %v", repo.Root, err)
	}
	return l, nil
}

// checkNoJournal refuses a repository a killed run left unrestored.
func checkNoJournal(repo *gitws.Repo) error {
	found, err := repo.HasJournal()
	if err != nil {
		return preflightf("repository %s: %v", repo.Root, err)
	}
	if found {
		return preflightf("repository %s holds the journal of a run that was cut off before it could restore the baseline (%s); run 'factory recover --repo %s' first",
			repo.Root, repo.JournalPath(), repo.Root)
	}
	return nil
}

// checkGitLocks refuses a repository where git's lock files would stop the
// run's own git (its rollback) half-way, in factory's words rather than
// git's; it removes those a factory killed inside its own git step left
// (see gitws.Repo.RecoverGitLocks).
func checkGitLocks(repo *gitws.Repo, progress io.Writer) error {
	removed, err := repo.RecoverGitLocks(false, time.Now())
	if len(removed) > 0 && progress != nil {
		fmt.Fprintf(progress, "removed the lock files git left when factory was killed: %s\n", strings.Join(repo.RelPaths(removed), ", "))
	}
	if err != nil {
		return preflightf("repository %s: %v", repo.Root, err)
	}
	return nil
}

// Close releases the repository lock. Execute calls it; call it yourself
// only for a Run you do not execute.
func (r *Run) Close() {
	if r.lock != nil {
		_ = r.lock.Unlock()
		r.lock = nil
	}
}

// CheckOutputDir refuses an output directory (flag names it in the
// message) that checkOutput would refuse, for callers that write there
// before Preflight runs.
func CheckOutputDir(flag, path string, repo *gitws.Repo) error {
	return checkOutput(flag, path, repo, true)
}

// checkOutput refuses an output path inside the repository's work tree (files
// there would dirty the tree and be deleted by rollback) or inside one of its
// git directories (where git and the metadata restore own every byte), and
// one that cannot be created, before anything is written.
func checkOutput(flag, path string, repo *gitws.Repo, isDir bool) error {
	resolved, existing, err := resolvePath(path)
	if err != nil {
		return preflightf("%s %s: %v", flag, path, err)
	}
	for _, dir := range []struct{ path, what string }{
		{repo.Root, "the repository"}, {repo.GitDir, "the git directory"}, {repo.CommonDir, "the git directory"},
	} {
		if within(dir.path, resolved) {
			return preflightf("%s %s is inside %s %s; choose a path outside it", flag, path, dir.what, dir.path)
		}
	}
	info, err := os.Stat(existing)
	switch {
	case err != nil:
		return preflightf("%s %s: %v", flag, path, err)
	case existing == resolved && isDir && !info.IsDir():
		return preflightf("%s %s exists and is not a directory", flag, path)
	case existing == resolved && !isDir && info.IsDir():
		return preflightf("%s %s is a directory; give a file path", flag, path)
	case existing != resolved && !info.IsDir():
		return preflightf("%s %s cannot be created: %s is not a directory", flag, path, existing)
	}
	return nil
}

// resolvePath resolves path the way the kernel will when it is created:
// symlinks are followed before ".." is applied, component by component. It
// returns the resolved path and its longest existing prefix.
func resolvePath(path string) (resolved, existing string, err error) {
	if !filepath.IsAbs(path) {
		wd, err := os.Getwd()
		if err != nil {
			return "", "", err
		}
		path = wd + string(filepath.Separator) + path
	}
	cur, exists := string(filepath.Separator), true
	for _, part := range strings.Split(path, string(filepath.Separator)) {
		switch {
		case part == "" || part == ".":
			continue
		case part == "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		if exists {
			if _, err := os.Lstat(next); err != nil {
				exists = false
				existing = cur
			} else if next, err = filepath.EvalSymlinks(next); err != nil {
				return "", "", err
			}
		}
		cur = next
	}
	if exists {
		existing = cur
	}
	return cur, existing, nil
}

// within reports whether p is dir or inside it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Result is the outcome of Execute.
type Result struct {
	Verdict     string
	RunID       string
	RunDir      string
	SummaryPath string
	Baseline    gitws.Baseline // the state the run started from
	Attempts    int
	// Touched are the files the passing attempt wrote (PASS only).
	Touched []string
	// Stage and BriefPath describe the last failed attempt (FAIL only).
	Stage, BriefPath string
	StoppedEarly     string // why attempts stopped before --max-attempts, if they did
	Usage            llm.Usage
}

// Event is one finished node of the graph, for progress reporting.
type Event struct {
	Attempt  int
	Node     string // "se", "tr", "po", "finalize"
	Verdict  string // after finalize: PASS, or FAIL for a failed attempt
	Stage    string // the failure stage, after finalize of a failed attempt
	Duration time.Duration
	Usage    llm.Usage // the model call's, after se
	// Command is set, instead of the fields above, when a verification or
	// acceptance command starts (Node "po"), for live views.
	Command *CommandStart
}

// CommandStart names a command that has just started.
type CommandStart struct {
	Name string   // verify_0, acceptance_1, …: the prefix of its log files
	Argv []string // as run
}

func (r *Run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format+"\n", args...)
	}
}

// waiting prints "… <what> (N s)" every heartbeat until the returned stop
// is called, so a long model call or command is not mistaken for a hang.
func (r *Run) waiting(what string) (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.Heartbeat
	if every <= 0 {
		every = 10 * time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
				r.progress("… %s (%s)", what, (time.Duration(n) * every).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// tool is who the journal says wrote it.
func (r *Run) tool() string {
	if r.opts.Tool != "" {
		return r.opts.Tool
	}
	return "factory run"
}
