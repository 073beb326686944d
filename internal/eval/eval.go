package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// RunKey names one run: a case, a model (as given on the command line) and
// the run's number, from 1.
type RunKey struct {
	Case  string
	Model string
	Run   int
}

func (k RunKey) String() string { return fmt.Sprintf("%s/%s/%d", k.Case, k.Model, k.Run) }

// Path is the run's relative directory: <case>/<model>/<run>, the model's
// name made safe for a file name (see ModelDir).
func (k RunKey) Path() string {
	return filepath.Join(k.Case, ModelDir(k.Model), strconv.Itoa(k.Run))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// ModelDir is a model's name as a directory name: characters other than
// letters, digits, '.', '_' and '-' become '_' (openai:gpt-4.1 →
// openai_gpt-4.1).
func ModelDir(model string) string {
	s := unsafeChars.ReplaceAllString(model, "_")
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// Options configure an eval.
type Options struct {
	Suite  *Suite
	Cases  []string // only these cases (all when empty)
	Models []string // --llm-model values, in order
	Runs   int      // per case and model
	Jobs   int      // runs at once
	Out    string

	// Flags are the settings that shape builds (temperature, attempts,
	// template, ...): with the suite's hash, the models and Runs they make
	// the eval id, so that the same command resumes and another starts anew.
	Flags map[string]any

	// Prepare returns the options of one run's build with its models
	// connected (progress is the run's log, for the clients' own lines).
	// Eval sets SpecPath or PlanDir, Repo, Out, Branch and Progress, applies
	// the case's overrides and adds the hidden paths to Run.Sandbox.Hide.
	Prepare func(ctx context.Context, k RunKey, progress io.Writer) (builder.Options, error)

	// Build, when set, builds every run instead of builder.Run with
	// Prepare: elsewhere, e.g. on Temporal workers (see BuildFunc).
	Build BuildFunc

	// Checks run confined like the build's commands: Sandbox's Mode, Home
	// and Hide (the suite is added to Hide); Env is their environment.
	Sandbox sandbox.Request
	Env     []string

	// Progress receives one line per finished run; nil is quiet.
	Progress io.Writer
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// BuildFunc builds one run in place of a local builder.Run. It gets the
// run's repository holding the case's start commit (checked out) and
// must leave the built branch checked out there when the build passed;
// the checks then run as for a local build. The summary's verdict decides
// the run as a local build's does (PASS: the checks run; FAIL and
// PLAN_INVALID: unsolved; ERROR, or a nil summary: a run error, done again
// by the next invocation); a budget stop is an *llm.BudgetError.
type BuildFunc func(ctx context.Context, b BuildRun) (*builder.Summary, error)

// BuildRun is one run as a BuildFunc sees it.
type BuildRun struct {
	EvalID string
	Key    RunKey
	Case   *Case
	Repo   string    // the run's repository: the start commit checked out
	Out    string    // the run's directory for the build's artifacts (created)
	Log    io.Writer // the run's build.log: the build's progress lines
	// CacheKey is the run's prompt cache key, for every model request of
	// its build: its own, as for a run built here (see eval.cacheKey).
	CacheKey string
}

// File names under <out>/evals/<eval id>/.
const (
	ResultsFile  = "results.jsonl"
	SummaryFile  = "summary.json"
	ManifestFile = "eval.json"
)

// Manifest is eval.json: what the eval id was computed from.
type Manifest struct {
	EvalID      string         `json:"eval_id"`
	Suite       string         `json:"suite"`
	SuiteSHA256 string         `json:"suite_sha256"`
	Models      []string       `json:"models"`
	Runs        int            `json:"runs"`
	Flags       map[string]any `json:"flags"`
}

// ID is the eval id of a suite, models, runs and flags: 16 hex digits.
func ID(suiteSHA256 string, models []string, runs int, flags map[string]any) (string, error) {
	b, err := canon.JSON(map[string]any{"suite_sha256": suiteSHA256, "models": models, "runs": runs, "flags": flags})
	if err != nil {
		return "", fmt.Errorf("eval id: %w", err)
	}
	return canon.SHA256Hex(b)[:16], nil
}

// RefusedError is a refusal before anything was created: an unknown
// --case, an --out the hiding would cover.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// BudgetError is returned when runs stopped at a budget; they are not
// recorded, so the next invocation (with a larger budget) does them.
type BudgetError struct{ Err *llm.BudgetError }

func (e *BudgetError) Error() string { return "runs stopped at the budget: " + e.Err.Error() }
func (e *BudgetError) Unwrap() error { return e.Err }

// eval is one eval in progress.
type eval struct {
	o       Options
	id      string
	dir     string // <out>/evals/<id>
	results string
	cases   map[string]*Case
	hide    []string // paths the builds' commands must not read

	mu       sync.Mutex
	done     []Result
	finished int // in this invocation
	total    int // runs to do in this invocation
	budget   *llm.BudgetError
}

// Run runs every case × model × run not finished yet and writes
// results.jsonl and summary.json. The summary is returned whenever the eval
// directory could be set up, also on interruption (the context's cause is
// returned) and at a budget (*BudgetError).
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if (o.Prepare == nil) == (o.Build == nil) {
		return nil, errors.New("eval: give exactly one of Options.Prepare and Options.Build")
	}
	cases, invalid, err := o.Suite.Select(o.Cases)
	if err != nil {
		return nil, &RefusedError{Msg: err.Error()}
	}
	id, err := ID(o.Suite.SHA256, o.Models, o.Runs, o.Flags)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	e := &eval{o: o, id: id, dir: filepath.Join(out, "evals", id), cases: map[string]*Case{}}
	e.results = filepath.Join(e.dir, ResultsFile)
	for _, c := range cases {
		e.cases[c.Name] = c
	}
	if err := e.setUp(id); err != nil {
		return nil, err
	}
	sum := Summary{EvalID: id, Suite: o.Suite.Dir, Models: o.Models, Runs: o.Runs, Invalid: invalid,
		Results: e.results, Cases: []string{}}
	if sum.Invalid == nil {
		sum.Invalid = []Invalid{}
	}
	for _, c := range cases {
		sum.Cases = append(sum.Cases, c.Name)
	}
	for _, i := range invalid {
		e.say("invalid case %s (skipped): %s", i.Case, i.Error)
	}

	prior, err := readResults(e.results)
	if err != nil {
		return nil, fmt.Errorf("read earlier results: %w", err)
	}
	finished, errored := map[RunKey]Result{}, map[RunKey]Result{}
	for _, r := range prior {
		if r.Status == StatusError { // errors are run again
			errored[r.key()] = r
		} else {
			finished[r.key()] = r
		}
	}
	var todo []RunKey
	for _, c := range cases {
		for _, m := range o.Models {
			for run := 1; run <= o.Runs; run++ {
				k := RunKey{Case: c.Name, Model: m, Run: run}
				sum.Planned++
				if r, ok := finished[k]; ok {
					e.done = append(e.done, r)
				} else {
					todo = append(todo, k)
				}
			}
		}
	}
	e.total = len(todo)
	e.say("eval %s: %d case(s) × %d model(s) × %d run(s) = %d runs; %d already finished, %d to do, %d at a time; results in %s",
		id, len(cases), len(o.Models), o.Runs, sum.Planned, sum.Planned-len(todo), len(todo), min(o.Jobs, max(len(todo), 1)), e.dir)
	// Results already on file stay as they are; only what was run again
	// (an error) is replaced when the file is rewritten below.
	e.runAll(ctx, todo)
	for _, k := range todo {
		if r, ok := errored[k]; ok && !e.has(k) {
			e.done = append(e.done, r) // not run again (interrupted): the old error stays
		}
	}

	sortResults(e.done, o.Models)
	if err := e.writeResults(); err != nil {
		return nil, err
	}
	s := summarize(sum, e.done)
	if err := artifact.WriteJSON(filepath.Join(e.dir, SummaryFile), s); err != nil {
		return &s, fmt.Errorf("write summary: %w", err)
	}
	switch {
	case ctx.Err() != nil:
		return &s, fmt.Errorf("eval interrupted (%v): %d of %d runs finished; run the same command again to resume",
			context.Cause(ctx), s.Finished, s.Planned)
	case e.budget != nil:
		return &s, &BudgetError{Err: e.budget}
	}
	return &s, nil
}

// setUp creates the eval directory and its manifest, and refuses an --out
// that the suite's hiding would cover.
func (e *eval) setUp(id string) error {
	suite := e.o.Suite.Dir
	if Within(e.dir, suite) {
		return &RefusedError{Msg: fmt.Sprintf("--out %s is inside the suite %s, which the builds' commands must not read; choose a directory outside it", e.o.Out, suite)}
	}
	if err := os.MkdirAll(filepath.Join(e.dir, "runs"), 0o755); err != nil {
		return fmt.Errorf("create the eval directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(e.dir, "checks"), 0o755); err != nil {
		return fmt.Errorf("create the eval directory: %w", err)
	}
	m := Manifest{EvalID: id, Suite: suite, SuiteSHA256: e.o.Suite.SHA256, Models: e.o.Models, Runs: e.o.Runs, Flags: e.o.Flags}
	if err := artifact.WriteJSON(filepath.Join(e.dir, ManifestFile), m); err != nil {
		return err
	}
	// results.jsonl exists from the start, so that hiding it always works.
	f, err := os.OpenFile(e.results, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	// The hidden files live in the suite and, once copied, under checks/;
	// check output reaches results.jsonl and summary.json.
	e.hide = []string{suite, filepath.Join(e.dir, "checks"), e.results, filepath.Join(e.dir, SummaryFile)}
	return nil
}

// Within says whether path is dir or under it (both absolute and clean).
func Within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// runAll runs todo on o.Jobs workers, in todo's order.
func (e *eval) runAll(ctx context.Context, todo []RunKey) {
	keys := make(chan RunKey)
	var wg sync.WaitGroup
	for range min(e.o.Jobs, max(len(todo), 1)) {
		wg.Go(func() {
			for k := range keys {
				e.runOne(ctx, k)
			}
		})
	}
	for _, k := range todo {
		if ctx.Err() != nil || e.stopped() {
			break
		}
		select {
		case keys <- k:
		case <-ctx.Done():
		}
	}
	close(keys)
	wg.Wait()
}

func (e *eval) has(k RunKey) bool {
	return slices.ContainsFunc(e.done, func(r Result) bool { return r.key() == k })
}

func (e *eval) stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.budget != nil
}

// runOne does one run from scratch and records it, unless it was
// interrupted or stopped at the budget.
func (e *eval) runOne(ctx context.Context, k RunKey) {
	if ctx.Err() != nil || e.stopped() {
		return
	}
	start := e.o.Now()
	r, budget := e.do(ctx, k)
	r.WallSeconds = roundSeconds(e.o.Now().Sub(start))
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return // interrupted: done again by the next invocation
	case budget != nil:
		if e.budget == nil {
			e.budget = budget
			e.sayLocked("%s: stopped at the budget (%v); no new runs start", k, budget)
		}
		return
	}
	if err := artifact.AppendJSONLine(e.results, r); err != nil {
		r.Status, r.Solved, r.Error = StatusError, false, err.Error()
	}
	e.done = append(e.done, r)
	e.finished++
	e.sayLocked("[%d/%d] %s", e.finished, e.total, describe(r))
}

// describe is a finished run's progress line.
func describe(r Result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s  %s  run %d: %s (build %s", r.Case, r.Model, r.Run, r.Status, r.BuildVerdict)
	if r.BuildVerdict == builder.VerdictPass {
		fmt.Fprintf(&sb, ", checks %d/%d", r.ChecksPassed, r.ChecksTotal)
	}
	fmt.Fprintf(&sb, ", %d attempt(s)", r.Attempts)
	if r.Repairs > 0 {
		fmt.Fprintf(&sb, ", %d repair(s)", r.Repairs)
	}
	fmt.Fprintf(&sb, ", %d tokens, %.1fs)", r.Tokens, r.WallSeconds)
	if r.FailedCheck != nil {
		fmt.Fprintf(&sb, "; check %d %s exited %d", r.FailedCheck.Index, quoteArgv(r.FailedCheck.Command), r.FailedCheck.ExitCode)
	}
	if r.Error != "" {
		fmt.Fprintf(&sb, "; %s", firstLine(r.Error))
	}
	return sb.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"'\\") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

func (e *eval) say(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sayLocked(format, args...)
}

func (e *eval) sayLocked(format string, args ...any) {
	if e.o.Progress != nil {
		fmt.Fprintf(e.o.Progress, format+"\n", args...)
	}
}

// writeResults rewrites results.jsonl with e.done, sorted.
func (e *eval) writeResults() error {
	var buf strings.Builder
	for _, r := range e.done {
		b, err := artifact.MarshalJSON(r)
		if err != nil {
			return err
		}
		// One line per run: MarshalJSON indents.
		line, err := compactJSON(b)
		if err != nil {
			return err
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return artifact.WriteFileAtomic(e.results, []byte(buf.String()), 0o644)
}

// runPaths are the directories of one run.
type runPaths struct {
	dir    string // runs/<case>/<model>/<run>: repo/, out/, build.log
	repo   string
	out    string
	log    string
	checks string // checks/<case>/<model>/<run>: tree/ and the check logs
	tree   string
}

func (e *eval) paths(k RunKey) runPaths {
	p := runPaths{dir: filepath.Join(e.dir, "runs", k.Path()), checks: filepath.Join(e.dir, "checks", k.Path())}
	p.repo, p.out, p.log = filepath.Join(p.dir, "repo"), filepath.Join(p.dir, "out"), filepath.Join(p.dir, "build.log")
	p.tree = filepath.Join(p.checks, "tree")
	return p
}

// do runs k: a fresh repository (with the case's start files), the build,
// then the checks in a copy of the built tree with the hidden files added.
func (e *eval) do(ctx context.Context, k RunKey) (Result, *llm.BudgetError) {
	c := e.cases[k.Case]
	p := e.paths(k)
	r := Result{Case: k.Case, Model: k.Model, Run: k.Run, Status: StatusError, ChecksTotal: len(c.Checks), Repo: p.repo}
	fail := func(err error) (Result, *llm.BudgetError) {
		r.Status, r.Error = StatusError, err.Error()
		return r, nil
	}
	// From scratch: what an interrupted invocation left is removed.
	for _, dir := range []string{p.dir, p.checks} {
		if err := os.RemoveAll(dir); err != nil {
			return fail(fmt.Errorf("remove the unfinished run %s: %w", dir, err))
		}
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fail(err)
	}
	log, err := os.Create(p.log)
	if err != nil {
		return fail(err)
	}
	defer log.Close()
	if err := newRepo(ctx, p.repo, c); err != nil {
		return fail(err)
	}
	sum, buildErr := e.build(ctx, k, c, p, log)
	if sum != nil {
		r.BuildVerdict, r.BuildDir = sum.Verdict, sum.BuildDir
		r.Tokens, r.CostUSD = sum.Tokens, sum.CostUSD
		r.InputTokens, r.CachedInputTokens, r.CacheWriteTokens = sum.InputTokens, sum.CachedInputTokens, sum.CacheWriteTokens
		r.OutputTokens = sum.Tokens - sum.InputTokens
		r.WorkOrdersTotal = len(sum.WorkOrders)
		first := len(sum.WorkOrders) > 0
		for _, w := range sum.WorkOrders {
			r.Attempts += w.Attempts
			if w.Outcome == builder.OutcomePassed {
				r.WorkOrdersPassed++
			}
			if w.Attempts != 1 {
				first = false
			}
		}
		r.FirstAttemptPass = sum.Verdict == builder.VerdictPass && first
		r.Repairs = len(sum.Repairs)
	}
	var budget *llm.BudgetError
	switch {
	case errors.As(buildErr, &budget):
		return r, budget
	case sum == nil || sum.Verdict == builder.VerdictError || sum.Verdict == "":
		if buildErr == nil {
			buildErr = errors.New("the build ended without a verdict")
		}
		if pe, ok := llm.AsProviderError(buildErr); ok {
			buildErr = pe
		}
		return fail(buildErr)
	case sum.Verdict != builder.VerdictPass:
		r.Status = StatusUnsolved
		if buildErr != nil {
			r.Error = buildErr.Error()
		}
		return r, nil
	}
	if err := e.check(ctx, c, p, &r); err != nil {
		return fail(err)
	}
	r.Solved = r.ChecksPassed == r.ChecksTotal
	r.Status = StatusUnsolved
	if r.Solved {
		r.Status = StatusSolved
	}
	return r, nil
}

// build builds run k in p.repo: with o.Build when set, else here with
// builder.Run and the options o.Prepare gives.
func (e *eval) build(ctx context.Context, k RunKey, c *Case, p runPaths, log io.Writer) (*builder.Summary, error) {
	if e.o.Build != nil {
		if err := os.MkdirAll(p.out, 0o755); err != nil {
			return nil, err
		}
		return e.o.Build(ctx, BuildRun{EvalID: e.id, Key: k, Case: c, Repo: p.repo, Out: p.out, Log: log, CacheKey: e.cacheKey(k)})
	}
	bo, err := e.o.Prepare(ctx, k, log)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", k.Model, err)
	}
	bo.SpecPath, bo.PlanDir = c.SpecPath(), c.PlanDir()
	bo.Repo, bo.Out, bo.Branch, bo.Progress = p.repo, p.out, "", log
	bo.CacheKey = e.cacheKey(k)
	bo.Run.Progress = nil
	if c.MaxAttempts > 0 {
		bo.Run.MaxAttempts = c.MaxAttempts
	}
	if c.PlanMaxAttempts > 0 {
		bo.PlanMaxAttempts = c.PlanMaxAttempts
	}
	if c.TimeoutSeconds > 0 {
		bo.Run.CommandTimeout = time.Duration(c.TimeoutSeconds) * time.Second
	}
	bo.Run.Sandbox.Hide = append(append([]string(nil), bo.Run.Sandbox.Hide...), e.hide...)
	return builder.Run(ctx, bo)
}

// cacheKey is run k's prompt cache key: its own, not shared with the
// user's builds of the same plan nor with the eval's other runs, and
// derived from the eval id, so a replay sends the same.
func (e *eval) cacheKey(k RunKey) string {
	return "factory-eval-" + e.id + "-" + canon.SHA256Hex([]byte(k.String()))[:8]
}

func roundSeconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// newRepo creates the run's repository: git init with an empty commit,
// then the case's start files as a second commit.
func newRepo(ctx context.Context, dir string, c *Case) error {
	repo, err := gitws.Init(ctx, dir)
	if err != nil {
		return err
	}
	if c.Start == "" {
		return nil
	}
	files, err := copyTree(c.StartDir(), dir, nil)
	if err != nil {
		return fmt.Errorf("copy the start files of %s: %w", c.Name, err)
	}
	if len(files) == 0 {
		return nil
	}
	if _, err := repo.CommitPaths(ctx, files, "eval: start files of case "+c.Name); err != nil {
		return fmt.Errorf("commit the start files of %s: %w", c.Name, err)
	}
	return nil
}
