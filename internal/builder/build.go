// Package build turns a specification into a committed, tested repository:
// spec → plan → every work order through the factory → one commit each.
// Progress lives in the commits' trailers, so a build resumes where it
// stopped after a failure, an interrupt or a crash.
package builder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// Trailers of a work order's commit; Resume reads progress from them.
const (
	TrailerWorkOrder = "Factory-Work-Order"
	TrailerRunID     = "Factory-Run-Id"
	TrailerPlan      = "Factory-Plan"
)

// Verdicts of a build.
const (
	VerdictPass        = "PASS"         // every work order passed
	VerdictFail        = "FAIL"         // a work order failed
	VerdictPlanInvalid = "PLAN_INVALID" // planning failed: the plan is invalid or not JSON
	VerdictBudget      = "BUDGET"       // a budget was reached before a model call
	VerdictError       = "ERROR"        // provider, interrupt or internal error
)

// Where the plan came from.
const (
	PlanCompiled = "compiled" // compiled by the planner for this build
	PlanReused   = "reused"   // compiled by an earlier build with the same inputs
	PlanGiven    = "given"    // --plan DIR
)

// Options configure a build.
type Options struct {
	SpecPath string // the specification; exactly one of SpecPath and PlanDir
	PlanDir  string // an existing plan (factory plan's layout)
	Repo     string // created (git init + an empty commit) when it does not exist
	Out      string
	Branch   string // "" means factory/<plan hash>

	// Planner (without PlanDir).
	PlannerModel    llm.Model
	Template        string
	ReasoningEffort string
	MaxOutputTokens int64
	PlanMaxAttempts int
	Review          bool
	ReviewModelName string

	// Work orders, as for factory run. Run.Repo, WorkOrder, Out, Lock,
	// Tool, OnEvent and Progress are set by the build.
	Run factory.Options

	// Python checks the plan's python -c commands.
	Python planner.PythonInspector
	// Meter, when set, meters every model call of the build (it wraps the
	// models above): the build resumes it with the spending of earlier
	// processes (see SpendRecord) and records each call. Without it tokens
	// are summed from the runs and the cost is unknown.
	Meter *llm.Meter
	// ResetBudget stops counting the earlier processes' spending against
	// the budget.
	ResetBudget bool
	// MapTokens is the budget of the repository map (see package repomap)
	// the planner sees, ranked for the spec, and each work order's SE
	// prompt, ranked for the order; 0 shows none.
	MapTokens int
	// CacheKey is the provider's prompt cache key for every request of the
	// build, planner and work orders alike; "" means "factory-" and the
	// plan hash. An eval passes its own, so that its builds do not share a
	// key with the user's.
	CacheKey string

	// Jobs is how many work orders may run at the same time, each in a
	// worktree of its own (see parallel.go); 0 and 1 run them one after
	// the other in the repository's work tree.
	Jobs int

	// Repair asks the planner to repair the plan when a work order ends
	// FAIL (see repair.go), at most MaxRepairs times per build; off, a
	// failed order stops the build.
	Repair     bool
	MaxRepairs int

	// EarlierPlan says what to do when the repository's last build
	// planned the same spec under an earlier release's template or rules
	// (see earlierPlan): EarlierKeep goes on with that plan, EarlierReplan
	// plans again as a new build; "" refuses, saying both.
	EarlierPlan string

	// Progress receives one line per transition; nil is quiet.
	Progress io.Writer
	// OnUpdate, when set, receives each change of state, for a live view.
	OnUpdate func(Update)
}

// RefusedError is a refusal before anything was modified.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

func refusef(format string, args ...any) error {
	return &RefusedError{Msg: fmt.Sprintf(format, args...)}
}

// Summary is build_summary.json and what --json prints.
type Summary struct {
	Verdict    string `json:"verdict"`
	PlanHash   string `json:"plan_hash"`
	PlanSource string `json:"plan_source"` // compiled, reused or given
	PlanDir    string `json:"plan_dir"`
	Branch     string `json:"branch"`
	BaseCommit string `json:"base_commit"` // where the build branch started
	Repo       string `json:"repo"`
	BuildDir   string `json:"build_dir"`
	// Tokens and CostUSD are what the build spent, earlier processes
	// included (since the last --reset-budget).
	Tokens  int64    `json:"tokens"`
	CostUSD *float64 `json:"cost_usd"` // null when a model's price is unknown
	// InputTokens is the prompt tokens of Tokens; CachedInputTokens and
	// CacheWriteTokens are the parts of them read from and written to the
	// providers' prompt caches.
	InputTokens       int64       `json:"input_tokens"`
	CachedInputTokens int64       `json:"cached_input_tokens"`
	CacheWriteTokens  int64       `json:"cache_write_tokens"`
	WorkOrders        []WorkOrder `json:"work_orders"`
	// Failed names the work order that stopped the build, if one did.
	Failed       string `json:"failed,omitempty"`
	StoppedEarly string `json:"stopped_early,omitempty"`
	Error        string `json:"error,omitempty"`
	// Repairs are the repairs of the plan so far, earlier processes'
	// included (see Options.Repair).
	Repairs []RepairRecord `json:"repairs,omitempty"`
}

// WorkOrder is one work order's line in the summary.
type WorkOrder struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Outcome  string   `json:"outcome"` // passed, failed or pending
	Commit   string   `json:"commit,omitempty"`
	Stage    string   `json:"stage,omitempty"` // failed: the failure stage
	Attempts int      `json:"attempts"`        // in this build process
	Tokens   int64    `json:"tokens"`
	CostUSD  *float64 `json:"cost_usd"`
	// CachedInputTokens and CacheWriteTokens: as in Summary.
	CachedInputTokens int64  `json:"cached_input_tokens"`
	CacheWriteTokens  int64  `json:"cache_write_tokens"`
	RunDir            string `json:"run_dir,omitempty"`
	BriefPath         string `json:"failure_brief,omitempty"`
	// Error is why a failed order could not start (a precondition that
	// does not hold), when no attempt ran to write a failure brief.
	Error string `json:"error,omitempty"`
	// DependsOn lists the earlier work orders this one depends on
	// (Dependencies): a parallel build starts it once they are committed.
	DependsOn []string `json:"depends_on,omitempty"`
}

// Work order outcomes.
const (
	OutcomePassed  = "passed"
	OutcomeFailed  = "failed"
	OutcomePending = "pending"
)

// builder is one build in progress.
type builder struct {
	o        Options
	repo     *gitws.Repo
	sum      Summary
	events   string // events.jsonl
	plan     *workorder.Manifest
	layout   *CacheLayout // the whole plan's, when plan is a part of it (Step)
	base     string
	created  bool      // the build made the repository
	clean    bool      // the work tree was seen clean and has not changed since
	usage    llm.Usage // summed from the planner and the runs, when Meter is nil
	progress func(format string, args ...any)
	own      *llm.Meter // a parallel build's work order: its own calls (see orderSpent)
	// worktrees serializes a parallel build's git worktree add and remove.
	worktrees *sync.Mutex
	// Repairs (repair.go): those made so far, the ids every plan of the
	// build has held, the repair that last wrote each order, and a repair
	// an earlier process was cut off in (its number, 0 for none).
	repairs  []RepairRecord
	used     []string
	repairOf map[string]int
	pending  int
	// earlier: the plan is an earlier release's, kept (EarlierPlan), and
	// its build's branch.
	earlier       bool
	earlierBranch string
}

// The values of Options.EarlierPlan.
const (
	EarlierKeep   = "keep"
	EarlierReplan = "replan"
)

// Run builds. The summary is returned (and written to the build directory
// once there is one) whatever happens; err is a *RefusedError when nothing
// was modified, else the cause of a non-PASS verdict other than FAIL.
func Run(ctx context.Context, o Options) (*Summary, error) {
	b := newBuilder(o)
	b.sum.WorkOrders = []WorkOrder{}
	unlock, err := b.prepare(ctx)
	if err != nil {
		return &b.sum, err
	}
	defer unlock()
	err = b.runAll(ctx)
	if b.created && b.plan == nil {
		b.progress("build: planning failed; the repository %s that this build created is left as it was made (one empty commit, and the record of what the planner spent, which the next build counts against its budget); delete it to start afresh", b.repo.Root)
	}
	b.total()
	if err != nil && b.sum.Error == "" {
		b.sum.Error = err.Error()
	}
	b.event(map[string]any{"event": "build_end", "verdict": b.sum.Verdict})
	if werr := artifact.WriteJSON(filepath.Join(b.sum.BuildDir, "build_summary.json"), b.sum); werr != nil {
		err = errors.Join(err, fmt.Errorf("write build summary: %w", werr))
	}
	return &b.sum, err
}

func newBuilder(o Options) *builder {
	b := &builder{o: o, progress: func(string, ...any) {}}
	if o.Progress != nil {
		b.progress = func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
	}
	return b
}

// IsProtectedBranch reports whether name is a branch build never works on.
func IsProtectedBranch(name string) bool { return name == "main" || name == "master" }

// prepare does everything up to the first work order: the checks that
// refuse, the repository and its lock, recovery, the plan and the branch.
// It returns the function that releases the lock.
func (b *builder) prepare(ctx context.Context) (unlock func(), err error) {
	o := b.o
	if IsProtectedBranch(o.Branch) {
		return nil, refusef("--branch %s: factory build never works on main or master; give another branch (default factory/<plan hash>)", o.Branch)
	}
	if o.Branch != "" {
		if err := gitws.CheckBranchName(ctx, o.Branch); err != nil {
			return nil, refusef("--branch: %v", err)
		}
	}
	hash, err := b.planHash()
	if err != nil {
		return nil, err
	}
	b.created, err = b.openRepo(ctx)
	if err != nil {
		return nil, err
	}
	if hash, err = b.earlierPlan(hash); err != nil {
		return nil, err
	}
	b.sum.PlanHash = hash
	b.sum.Branch = cmp.Or(o.Branch, b.earlierBranch, "factory/"+hash)
	b.sum.Repo = b.repo.Root
	lock, err := b.repo.Lock()
	if err != nil {
		return nil, refusef("repository %s: %v", b.repo.Root, err)
	}
	defer func() {
		if err != nil {
			_ = lock.Unlock()
		}
	}()
	b.o.Run.Lock = lock
	if err := b.recover(ctx); err != nil {
		return nil, err
	}
	if !b.created {
		if err := b.checkClean(ctx); err != nil {
			return nil, err
		}
	}
	b.clean = true
	if err := factory.CheckOutputDir("--out", o.Out, b.repo); err != nil {
		return nil, refusef("%v", err)
	}
	if b.base, err = baseCommit(ctx, b.repo, b.sum.Branch, hash); err != nil {
		return nil, err
	}
	b.sum.BaseCommit = b.base
	b.noteOtherBuildBranch(ctx)
	b.sum.BuildDir = filepath.Join(absOrSame(o.Out), "builds", hash)
	if err := os.MkdirAll(b.sum.BuildDir, 0o755); err != nil {
		return nil, refusef("--out: create the build directory: %v", err)
	}
	b.events = filepath.Join(b.sum.BuildDir, "events.jsonl")
	b.event(map[string]any{"event": "build_start", "plan_hash": hash, "branch": b.sum.Branch, "base_commit": b.base, "repo": b.repo.Root})
	if err := b.writePointer(); err != nil {
		return nil, err
	}
	if err := b.trackSpend(); err != nil {
		return nil, err
	}
	return func() { _ = lock.Unlock() }, nil
}

// earlierPlan returns the plan hash the build goes on with. A spec the
// repository's last build planned under an earlier release's template or
// validation rules would, planned again by this release, hash to a new
// build and a new branch, leaving the earlier one's commits behind. When
// the earlier plan recorded the spec's hash and it matches, the build
// goes on with that plan (checked against this release's rules when
// loaded); when it cannot tell (a plan from before the hash was recorded)
// it stops and says how to go on, unless EarlierPlan decides.
func (b *builder) earlierPlan(hash string) (string, error) {
	o := b.o
	if o.SpecPath == "" || b.created {
		return hash, nil
	}
	p, err := ReadPointer(b.repo)
	if err != nil || p.PlanHash == hash || p.Spec == "" || p.Spec != absOrSame(o.SpecPath) || p.PlanSource == PlanGiven {
		return hash, nil
	}
	if _, err := os.Stat(filepath.Join(absOrSame(o.Out), "plans", hash, planner.ManifestName)); err == nil {
		return hash, nil // this release planned it already: that build
	}
	dir := filepath.Join(absOrSame(o.Out), "plans", p.PlanHash)
	info, err := planner.ReadCompileInfo(dir)
	if err != nil || info == nil {
		return hash, nil // not in this --out: nothing to go on with here
	}
	sameRules := info.TemplateSHA256 == canon.SHA256Hex([]byte(o.Template)) && info.ValidatorVersion == planner.ValidatorVersion
	if sameRules || info.Model != o.Run.ModelName || info.ReasoningEffort != o.ReasoningEffort {
		return hash, nil // the spec or the model changed: a new build, as always
	}
	spec, err := os.ReadFile(o.SpecPath)
	if err != nil {
		return "", refusef("--spec: %v", err)
	}
	switch {
	case info.SpecSHA256 != "" && info.SpecSHA256 != canon.SHA256Hex(spec):
		return hash, nil // the spec changed too
	case o.EarlierPlan == EarlierReplan:
		b.progress("build: planning %s again with this release, as a new build (the earlier build %s stays on its branch %s)", o.SpecPath, p.PlanHash, p.Branch)
		return hash, nil
	case o.EarlierPlan == EarlierKeep || info.SpecSHA256 != "":
		b.progress("build: going on with build %s on %s, whose plan an earlier factory made (template %.12s, validator %s; this one: %.12s, %s)",
			p.PlanHash, p.Branch, info.TemplateSHA256, info.ValidatorVersion, canon.SHA256Hex([]byte(o.Template)), planner.ValidatorVersion)
		b.earlier, b.earlierBranch = true, p.Branch
		return p.PlanHash, nil
	}
	return "", refusef("the last build in %s (%s, on branch %s) planned this spec with an earlier factory (template %.12s, validator %s; this one: template %.12s, validator %s), and this release cannot tell whether the spec changed since: planned again, it would be a new build on a new branch. "+
		"To go on with that build and its plan (checked against this release's rules first), rerun with --earlier-plan keep; to plan the spec again with this release, as a new build, rerun with --earlier-plan replan",
		b.repo.Root, p.PlanHash, p.Branch, info.TemplateSHA256, info.ValidatorVersion, canon.SHA256Hex([]byte(o.Template)), planner.ValidatorVersion)
}

// planHash is the build's identity: the compile hash of the planner's
// inputs, or the hash of a given plan's files.
func (b *builder) planHash() (string, error) {
	o := b.o
	if o.PlanDir != "" {
		info, err := os.Stat(o.PlanDir)
		if err != nil {
			return "", refusef("--plan: %v", err)
		}
		if !info.IsDir() {
			return "", refusef("--plan %s is not a directory; give the directory factory plan wrote (WO-NN.json files and %s)", o.PlanDir, planner.ManifestName)
		}
		raw, _, err := planner.LoadPlan(o.PlanDir)
		if err != nil {
			return "", refusef("--plan: %v", err)
		}
		return canon.SHA256Hex(raw)[:16], nil
	}
	spec, err := os.ReadFile(o.SpecPath)
	if err != nil {
		return "", refusef("--spec: %v", err)
	}
	if strings.TrimSpace(string(spec)) == "" {
		return "", refusef("--spec %s is empty", o.SpecPath)
	}
	return planner.CompileHash(string(spec), o.Template, o.Run.ModelName, o.ReasoningEffort), nil
}

// openRepo opens --repo, creating it when it does not exist.
func (b *builder) openRepo(ctx context.Context) (created bool, err error) {
	if _, err := os.Stat(b.o.Repo); errors.Is(err, fs.ErrNotExist) {
		if b.repo, err = gitws.Init(ctx, b.o.Repo); err != nil {
			return false, fmt.Errorf("create repository: %w", err)
		}
		b.progress("created repository %s (git init and an empty initial commit)", b.repo.Root)
		return true, nil
	}
	if b.repo, err = gitws.Open(ctx, b.o.Repo); err != nil {
		return false, refusef("--repo: %v", err)
	}
	if _, err := b.repo.Head(ctx); err != nil {
		if errors.Is(err, gitws.ErrNoCommits) {
			return false, refusef("repository %s has no commits; make an initial commit first", b.repo.Root)
		}
		return false, refusef("repository %s: %v", b.repo.Root, err)
	}
	return false, nil
}

// recover restores the repository after a build that was killed in the
// middle of an attempt, or inside one of its git steps; a journal someone
// else left is refused.
func (b *builder) recover(ctx context.Context) error {
	if err := RecoverWorktrees(ctx, b.repo, b.o.Progress); err != nil {
		return err
	}
	tool, found, err := factory.JournalTool(b.repo)
	if err != nil {
		return refusef("repository %s: %v", b.repo.Root, err)
	}
	if found && tool != Tool {
		return refusef("repository %s holds the journal of a %s that was cut off before it could restore the baseline (%s); run 'factory recover --repo %s' first",
			b.repo.Root, tool, b.repo.JournalPath(), b.repo.Root)
	}
	step, stepNoted, err := b.repo.RecordedGitStep()
	if err != nil {
		return refusef("repository %s: %v", b.repo.Root, err)
	}
	if err := b.recoverGitLocks(found); err != nil {
		return err
	}
	if !found && stepNoted && step.Step == gitws.StepSwitch {
		// Killed inside a branch switch: the tree may be half one branch,
		// half the other. The build switches again once it is back at HEAD.
		restored, err := b.repo.RecoverSwitch(ctx, step.Target)
		var leftover *gitws.SwitchLeftoverError
		if errors.As(err, &leftover) {
			return refusef("repository %s: %v", b.repo.Root, err)
		}
		if err != nil {
			return err
		}
		if len(restored) > 0 {
			b.progress("build: the previous build was killed while switching to %s; put %d path(s) back as HEAD has them", step.Branch, len(restored))
		}
	}
	if !found {
		return nil
	}
	b.progress("build: the previous build was cut off in the middle of an attempt; recovering")
	if _, err := factory.RecoverHeld(ctx, b.repo, b.o.Progress); err != nil {
		return fmt.Errorf("recover from the interrupted build: %w", err)
	}
	return nil
}

// recoverGitLocks removes the lock files git left when a build was killed
// inside one of its git steps (gitws.Repo.RecoverGitLocks decides), so
// that the restore and the build's own git do not stop at them; a lock it
// may not remove is a refusal that says what to do.
func (b *builder) recoverGitLocks(journal bool) error {
	removed, err := b.repo.RecoverGitLocks(journal, time.Now())
	if len(removed) > 0 {
		b.progress("build: removed the lock files git left when the previous build was killed: %s", strings.Join(b.repo.RelPaths(removed), ", "))
	}
	var young *gitws.YoungLockError
	var held *gitws.GitLockError
	if errors.As(err, &young) || errors.As(err, &held) {
		return refusef("repository %s: %v", b.repo.Root, err)
	}
	if err != nil {
		return fmt.Errorf("repository %s: %w", b.repo.Root, err)
	}
	return nil
}

// Tool is how a build's attempts sign the journal.
const Tool = "factory build"

func (b *builder) checkClean(ctx context.Context) error {
	dirty, err := b.repo.Dirty(ctx)
	if err != nil {
		return refusef("repository %s: %v", b.repo.Root, err)
	}
	if len(dirty) > 0 {
		return refusef("repository %s has uncommitted changes (commit or stash them first; the build rolls back with git and must not touch your work): %s",
			b.repo.Root, factory.Summarize(dirty, 5))
	}
	return nil
}

// baseCommit is the commit the build branch started from: the parent of
// its first commit for this plan, its tip when it has none yet, or HEAD
// when the branch does not exist.
func baseCommit(ctx context.Context, repo *gitws.Repo, branch, planHash string) (string, error) {
	tip, exists, err := repo.BranchCommit(ctx, branch)
	if err != nil {
		return "", err
	}
	if !exists {
		return repo.Head(ctx)
	}
	commits, err := repo.Log(ctx, tip, 0)
	if err != nil {
		return "", err
	}
	base := tip
	for _, c := range commits { // newest first: the last match is the first commit
		if c.Trailers[TrailerPlan] == planHash && c.Parent != "" {
			base = c.Parent
		}
	}
	return base, nil
}

// noteOtherBuildBranch warns when a new build branch would start on top of
// another build's branch: after editing a spec or plan (a new plan hash),
// the user usually wants to start again from their own branch.
func (b *builder) noteOtherBuildBranch(ctx context.Context) {
	if _, exists, err := b.repo.BranchCommit(ctx, b.sum.Branch); err != nil || exists {
		return
	}
	cur, err := b.repo.CurrentBranch(ctx)
	if err == nil && strings.HasPrefix(cur, "factory/") && cur != b.sum.Branch {
		b.progress("note: the new branch %s starts at the tip of %s, another build's branch (a changed spec or plan is a new build); to start from your own branch, check it out first", b.sum.Branch, cur)
	}
}

// Pointer is what build leaves in the git directory so that `factory
// status` needs only --repo. Progress never comes from it.
type Pointer struct {
	PlanHash   string `json:"plan_hash"`
	PlanDir    string `json:"plan_dir"`
	PlanSource string `json:"plan_source"`
	Spec       string `json:"spec,omitempty"`
	Branch     string `json:"branch"`
	BuildDir   string `json:"build_dir"`
}

// ReadPointer reads the build pointer of repo strictly: the file lives in
// the git directory, where a command run without confinement could have
// written anything, and its plan hash names the spend record to read.
// It returns an error wrapping fs.ErrNotExist when there is none.
func ReadPointer(repo *gitws.Repo) (Pointer, error) {
	path := repo.FactoryFile(PointerFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Pointer{}, fmt.Errorf("read the build pointer: %w", err)
	}
	var p Pointer
	if err := workorder.DecodeStrict(data, &p); err != nil {
		return Pointer{}, fmt.Errorf("read the build pointer %s: %w", path, err)
	}
	if !isPlanHash(p.PlanHash) {
		return Pointer{}, fmt.Errorf("read the build pointer %s: plan_hash %q is not 16 lower-case hex digits", path, p.PlanHash)
	}
	return p, nil
}

// isPlanHash reports whether s is a plan hash as planHash makes them.
func isPlanHash(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// PointerFile is the pointer's name in the git directory's factory/.
const PointerFile = "build.json"

func (b *builder) writePointer() error {
	p := Pointer{PlanHash: b.sum.PlanHash, Branch: b.sum.Branch, BuildDir: b.sum.BuildDir}
	if b.o.PlanDir != "" {
		p.PlanDir, p.PlanSource = absOrSame(b.o.PlanDir), PlanGiven
	} else {
		p.PlanDir, p.Spec = b.compiledPlanDir(), absOrSame(b.o.SpecPath)
	}
	if err := artifact.WriteJSON(b.repo.FactoryFile(PointerFile), p); err != nil {
		return fmt.Errorf("write the build pointer: %w", err)
	}
	return nil
}

// cacheKey is the build's prompt cache key (see Options.CacheKey): from
// the build's identity, never a clock, so a resumed or replayed build
// sends the same.
func (b *builder) cacheKey() string {
	if b.o.CacheKey != "" {
		return b.o.CacheKey
	}
	return "factory-" + b.sum.PlanHash
}

// CacheLayout is how the SE prompts of a build use the provider's prompt
// cache, decided from the whole plan: the context files two or more work
// orders read (Shared) and those of them no work order may write (Stable),
// sorted, which the prompts show first (factory.Options.SharedContext);
// and whether the build asks for the long cache (Long, see LongCache).
type CacheLayout struct {
	Shared []string `json:"shared,omitempty"`
	Stable []string `json:"stable,omitempty"`
	Long   bool     `json:"long,omitempty"`
}

// PlanCacheLayout is the cache layout of a build of plan m whose work
// orders have maxAttempts attempts each.
func PlanCacheLayout(m *workorder.Manifest, maxAttempts int) CacheLayout {
	count, written := map[string]int{}, map[string]bool{}
	for _, wo := range m.WorkOrders {
		for _, p := range slices.Compact(slices.Sorted(slices.Values(wo.ContextFiles))) {
			count[p]++
		}
		for _, p := range wo.AllowedFiles {
			written[p] = true
		}
	}
	l := CacheLayout{Long: LongCache(len(m.WorkOrders), maxAttempts)}
	for p, n := range count {
		if n >= 2 {
			l.Shared = append(l.Shared, p)
			if !written[p] {
				l.Stable = append(l.Stable, p)
			}
		}
	}
	slices.Sort(l.Shared)
	slices.Sort(l.Stable)
	return l
}

// cacheLayout is the build's cache layout: from its plan, or the whole
// plan's layout a Step was given.
func (b *builder) cacheLayout() CacheLayout {
	if b.layout != nil {
		return *b.layout
	}
	return PlanCacheLayout(b.plan, b.o.Run.MaxAttempts)
}

// LongCacheCalls is how many SE calls a build may make (work orders ×
// attempts) before it is expected to outlive the providers' default
// prompt cache (Anthropic's 5-minute TTL, OpenAI's in-memory retention of
// 5 to 10 minutes): at a nominal 30 seconds per attempt — the model's
// answer and the verification — ten attempts take five minutes.
const LongCacheCalls = 10

// LongCache reports whether a build of workOrders work orders with
// maxAttempts attempts each asks for the long prompt cache
// (llm.Request.LongCache). It is decided from the plan and the options
// alone, never from a clock, so a resumed or replayed build, and each of
// a distributed build's workers, decides the same.
func LongCache(workOrders, maxAttempts int) bool {
	return workOrders*maxAttempts >= LongCacheCalls
}

func (b *builder) compiledPlanDir() string {
	return filepath.Join(absOrSame(b.o.Out), "plans", b.sum.PlanHash)
}

func absOrSame(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// event appends one line to events.jsonl; the log is best effort.
func (b *builder) event(fields map[string]any) {
	if b.events == "" {
		return
	}
	fields["ts"] = time.Now().UTC().Format(time.RFC3339Nano)
	_ = artifact.AppendJSONLine(b.events, fields)
}
