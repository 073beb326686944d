package factory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/graph"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// attempt holds what one pass through SE → TR → PO → finalize produced.
type attempt struct {
	index    int
	dir      string // absolute attempt directory
	response *llm.Response
	proposal *workorder.WriteProposal
	touched  []string
	write    *WriteResult
	undo     undo
	// journaled is set once the journal covers this attempt: from then on
	// the repo may differ from the baseline.
	journaled bool
	// metaRestored is what restoring git metadata right after a command did;
	// the rollback record includes it.
	metaRestored gitws.RollbackReport
	// deps is what the dependency step did; depsEnv the environment it
	// gives later commands.
	deps      *deps.Report
	depsEnv   []string
	depsRan   bool     // a package manager ran: a rollback must forget the stamps
	lockfiles []string // the lockfiles present after the step, committed with the result
	verify    []CmdResult
	accept    []CmdResult
	brief     *FailureBrief
	rollback  *RollbackRecord
	// batch holds the attempt's artifacts until the attempt ends, when they
	// are made durable together: recovery needs only the journal, which is
	// synced on its own before the first write.
	batch artifact.Batch
	// writes holds TR's work-tree writes, made durable on PASS before the
	// journal that could undo them goes, and forgotten on FAIL: the
	// rollback removed them, and the directories they were written in.
	writes artifact.Batch
}

// undo is what git cannot put back after TR's writes; it goes into the
// journal before the first write, so `factory recover` can use it too.
type undo struct {
	// Backups keep the bytes of ignored files TR overwrites: git cannot
	// restore a file it does not track.
	Backups []backup `json:"backups"`
	// Overwritten are existing files TR replaces, with their baseline mtime.
	Overwritten []overwrite `json:"overwritten"`
}

type backup struct {
	Path string      `json:"path"`
	Data []byte      `json:"data"`
	Mode os.FileMode `json:"mode"`
}

type overwrite struct {
	Path  string    `json:"path"`
	Mtime time.Time `json:"mtime"`
}

// journal is what `factory recover` needs after the harness was killed in
// the middle of an attempt (see gitws.Repo.WriteJournal).
type journal struct {
	Version  int            `json:"version"`
	Tool     string         `json:"tool"` // who wrote it, e.g. "factory run"
	PID      int            `json:"pid"`
	RunDir   string         `json:"run_dir"`
	Attempt  int            `json:"attempt"`
	Writes   []string       `json:"writes"` // the paths the attempt is about to write
	Baseline gitws.Baseline `json:"baseline"`
	Undo     undo           `json:"undo"`
}

const journalVersion = 1

// state is the graph state of one run.
type state struct {
	cur      *attempt
	previous *FailureBrief
	records  []AttemptRecord
	verdict  string
	treeHash string
	done     bool
	// failureKey fingerprints the previous failed attempt (see failureKey).
	failureKey   string
	stoppedEarly string
	mark         time.Time // when the last node ended, for event durations
}

const (
	nodeSE       = "se"
	nodeTR       = "tr"
	nodePO       = "po"
	nodeFinalize = "finalize"
)

func (r *Run) graph() *graph.Graph[state] {
	g := &graph.Graph[state]{
		Entry: nodeSE,
		// Four nodes per attempt and one spare: a bound, not a budget.
		MaxSteps: 4*r.opts.MaxAttempts + 1,
		After:    r.after,
	}
	g.Add(nodeSE, r.se, func(s *state) string {
		if s.cur.brief != nil {
			return nodeFinalize
		}
		return nodeTR
	})
	g.Add(nodeTR, r.tr, func(s *state) string {
		if s.cur.brief != nil {
			return nodeFinalize
		}
		return nodePO
	})
	g.Add(nodePO, r.po, func(*state) string { return nodeFinalize })
	g.Add(nodeFinalize, r.finalize, func(s *state) string {
		if s.done {
			return graph.End
		}
		return nodeSE
	})
	return g
}

// Execute runs the work order. The returned error is non-nil only for an
// ERROR verdict (interrupted, internal failure, replay mismatch); the repo
// has then been rolled back and run_summary.json still written when possible.
func (r *Run) Execute(ctx context.Context) (res Result, err error) {
	defer r.Close()
	runDir, err := artifact.NewRunDir(r.opts.Out, r.runID)
	if err != nil {
		// Nothing has been touched yet: this is still a preflight failure.
		return Result{}, &PreflightError{Msg: err.Error()}
	}
	res = Result{RunID: r.runID, RunDir: runDir, SummaryPath: filepath.Join(runDir, "run_summary.json")}
	r.progress("run %s: work order %s, baseline %s, artifacts in %s", r.runID, r.opts.WorkOrder.ID, r.baseline.Commit[:12], runDir)
	r.progress("%s", r.sandbox.Describe())
	if w := r.sandbox.Warning(); w != "" {
		r.progress("%s", w)
	}

	s := &state{mark: time.Now()}
	// Made durable with the first attempt's files, or the run summary.
	f, runErr := artifact.JSONFile("work_order.json", r.opts.WorkOrder)
	if runErr == nil {
		runErr = artifact.ReplaceFile(filepath.Join(runDir, f.Name), f.Data, f.Perm)
	}
	if runErr == nil {
		runErr = r.runGraph(ctx, runDir, s)
	}
	if runErr != nil {
		s.verdict = VerdictError
		s.treeHash = ""
		if rbErr := r.emergencyRollback(s); rbErr != nil {
			runErr = fmt.Errorf("%w; rollback after it also failed: %v", runErr, rbErr)
		}
		// The interrupted attempt belongs in the audit trail too.
		if a := s.cur; a != nil && len(s.records) < a.index {
			a.brief = newBrief(StageException, nil, nil, "attempt aborted: "+runErr.Error())
			s.records = append(s.records, r.record(a))
		}
	}
	summary := r.summary(s, runErr)
	res.Verdict = summary.Verdict
	res.Baseline, res.Attempts, res.Usage, res.StoppedEarly = r.baseline, summary.TotalAttempts, summary.Usage, s.stoppedEarly
	if n := len(s.records); n > 0 {
		last := s.records[n-1]
		if res.Verdict == VerdictPass {
			res.Touched = last.TouchedFiles
		} else if last.FailureBrief != nil {
			res.Stage = last.FailureBrief.Stage
			res.BriefPath = filepath.Join(runDir, fmt.Sprintf("attempt_%d", last.AttemptIndex), "failure_brief.json")
		}
	}
	if err := artifact.WriteJSON(res.SummaryPath, summary); err != nil {
		return res, errors.Join(runErr, fmt.Errorf("write run summary: %w", err))
	}
	return res, runErr
}

// runGraph runs the graph and turns a panic into an error so the caller
// still rolls back and writes the summary.
func (r *Run) runGraph(ctx context.Context, runDir string, s *state) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: panic: %v", p)
		}
	}()
	r.runDir = runDir
	return r.graph().Run(ctx, s)
}

// emergencyRollback restores the baseline after an aborted run.
func (r *Run) emergencyRollback(s *state) error {
	a := s.cur
	if a == nil {
		a = &attempt{}
	}
	if !a.journaled {
		r.progress("nothing was written; the repository is unchanged")
		return nil
	}
	if _, err := r.rollback(context.Background(), a); err != nil {
		return err
	}
	if r.depsBox != nil {
		// Cut in the middle, the step may have left a stamp without the
		// tree it describes (its report never came back to say it ran).
		if err := deps.Forget(r.repo.Root); err != nil {
			return fmt.Errorf("after the rollback: %w", err)
		}
	}
	r.progress("rolled back to %s", r.baseline.Commit[:12])
	return nil
}

func (r *Run) summary(s *state, runErr error) RunSummary {
	sum := RunSummary{
		RunID:          r.runID,
		WorkOrderID:    r.opts.WorkOrder.ID,
		Verdict:        s.verdict,
		TotalAttempts:  len(s.records),
		MaxAttempts:    r.opts.MaxAttempts,
		BaselineCommit: r.baseline.Commit,
		LLMModel:       r.opts.ModelName,
		Attempts:       s.records,
		EnvPassed:      nonNil(r.envNames),
		StoppedEarly:   s.stoppedEarly,
		Sandbox:        r.sandbox.Summary(),
	}
	if sum.Attempts == nil {
		sum.Attempts = []AttemptRecord{}
	}
	if sum.Verdict == "" {
		sum.Verdict = VerdictError
	}
	if s.treeHash != "" {
		sum.RepoTreeHashAfter = &s.treeHash
	}
	if runErr != nil {
		sum.Error = runErr.Error()
	}
	cost := 0.0
	sum.CostUSD = &cost
	for _, a := range s.records {
		if a.CostUSD == nil {
			sum.CostUSD = nil
		} else {
			cost += *a.CostUSD
		}
		sum.Usage = sum.Usage.Add(a.Usage)
	}
	return sum
}

// rel makes an artifact path relative to the run directory, so artifacts
// compare equal across output locations (and under replay).
func (r *Run) rel(abs string) string {
	p, err := filepath.Rel(r.runDir, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(p)
}

// after is the graph's after-node hook: it persists the node's artifacts,
// then reports the node as an Event.
func (r *Run) after(ctx context.Context, node string, s *state) error {
	if err := r.persist(ctx, node, s); err != nil {
		return err
	}
	now := time.Now()
	ev := Event{Attempt: s.cur.index, Node: node, Duration: now.Sub(s.mark)}
	s.mark = now
	switch {
	case node == nodeSE && s.cur.response != nil:
		ev.Usage = s.cur.response.Usage
	case node == nodeFinalize && s.cur.brief == nil:
		ev.Verdict = VerdictPass
	case node == nodeFinalize:
		ev.Verdict, ev.Stage = VerdictFail, s.cur.brief.Stage
	}
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(ev)
	}
	return nil
}

// persist is the after-node hook: each node's artifacts are written as soon
// as the node finishes, so an interrupted run still leaves its trail, and
// the attempt's files are made durable together after finalize.
func (r *Run) persist(_ context.Context, node string, s *state) error {
	a := s.cur
	// A node's files are written together and made durable together (one
	// sync of the file system).
	var files []artifact.File
	var encErr error
	add := func(name string, v any) {
		f, err := artifact.JSONFile(name, v)
		encErr = errors.Join(encErr, err)
		files = append(files, f)
	}
	switch node {
	case nodeSE:
		if a.response != nil {
			files = append(files, artifact.File{Name: "llm_response_raw.txt", Data: []byte(a.response.Content), Perm: 0o644})
			add("llm_response.json", a.response)
		}
		if a.proposal != nil {
			add("proposed_writes.json", a.proposal)
		}
	case nodeTR:
		add("write_result.json", a.write)
	case nodePO:
		add("verify_result.json", nonNil(a.verify))
		add("acceptance_result.json", nonNil(a.accept))
	case nodeFinalize:
		if a.brief != nil {
			add("failure_brief.json", a.brief)
		}
	}
	if encErr != nil {
		return encErr
	}
	if err := a.batch.Write(a.dir, files); err != nil {
		return err
	}
	if node == nodeFinalize {
		return a.batch.Sync()
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// finalize records the attempt, then either accepts it (PASS), or rolls the
// repo back and decides whether another attempt can help.
func (r *Run) finalize(ctx context.Context, s *state) error {
	a := s.cur
	if a.brief == nil {
		hash, err := r.repo.TreeHashAt(ctx, r.baseline)
		if err != nil {
			return fmt.Errorf("tree hash after PASS: %w", err)
		}
		if err := a.writes.SyncPresent(); err != nil {
			return fmt.Errorf("make the attempt's writes durable: %w", err)
		}
		if !r.opts.KeepJournal {
			if err := r.repo.RemoveJournal(); err != nil {
				return err
			}
		}
		a.touched = touchedWithLockfiles(a.touched, a.lockfiles)
		s.records = append(s.records, r.record(a))
		s.verdict, s.treeHash, s.done = VerdictPass, hash, true
		left := ""
		if r.opts.Tool == "" { // a build commits them next
			left = "; changes left uncommitted in " + r.repo.Root
		}
		r.progress("attempt %d/%d: PASS (tree %s)%s", a.index, r.opts.MaxAttempts, hash[:12], left)
		return nil
	}
	if a.journaled {
		report, err := r.rollback(ctx, a)
		if err != nil {
			return err
		}
		a.rollback = &report
	}
	if a.depsRan {
		// The rollback may have put a stamp back without every file of
		// the tree it describes: the next step installs again.
		if err := deps.Forget(r.repo.Root); err != nil {
			return fmt.Errorf("after the rollback: %w", err)
		}
	}
	a.writes.Forget()
	s.records = append(s.records, r.record(a))
	reason, _, _ := strings.Cut(a.brief.PrimaryErrorExcerpt, "\n")
	outcome := "nothing was written"
	if a.journaled {
		outcome = "rolled back to " + r.baseline.Commit[:12]
	}
	r.progress("attempt %d/%d: FAIL (%s: %s); %s", a.index, r.opts.MaxAttempts, a.brief.Stage,
		truncateChars(reason, 300), outcome)
	s.previous = a.brief
	key := failureKey(a.brief, r.opts.Out)
	switch {
	case !a.brief.retryable() || a.index >= r.opts.MaxAttempts:
		s.verdict, s.done = VerdictFail, true
	case key == s.failureKey:
		// Another try at an identical failure would only burn money.
		s.verdict, s.done, s.stoppedEarly = VerdictFail, true, StoppedIdenticalFailure
		r.progress("stopping early: attempt %d failed exactly as attempt %d did", a.index, a.index-1)
	}
	s.failureKey = key
	return nil
}

// touchedWithLockfiles adds to the files an attempt wrote the lockfiles
// present after its dependency step, which the commit must hold even when
// allowed_files does not list them (the step wrote or checked them).
func touchedWithLockfiles(touched, lockfiles []string) []string {
	out := slices.Clone(touched)
	for _, lf := range lockfiles {
		if !slices.Contains(out, lf) {
			out = append(out, lf)
		}
	}
	slices.Sort(out)
	return out
}

// rollbackTimeout bounds a rollback, which must finish even when the run was
// interrupted: it runs on a context detached from the run's cancellation, as
// killing git in the middle of `reset --hard` would leave index.lock behind
// and the tree half reset.
const rollbackTimeout = 5 * time.Minute

// rollback restores the baseline after attempt a (see rollbackTo), reports
// what it could not undo, and removes the journal once the repo is back.
func (r *Run) rollback(ctx context.Context, a *attempt) (RollbackRecord, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	rec, err := rollbackTo(ctx, r.repo, r.baseline, a.undo)
	if err != nil {
		return RollbackRecord{}, err
	}
	rec.RemovedFiles = sortedCopy(append(rec.RemovedFiles, a.metaRestored.Removed...))
	rec.RestoredFiles = sortedCopy(append(rec.RestoredFiles, a.metaRestored.Restored...))
	if len(rec.UnrestoredFiles) > 0 {
		r.progress("warning: a command changed ignored files that existed before the run and could not be restored: %s", Summarize(rec.UnrestoredFiles, 5))
	}
	if len(rec.NewRefs) > 0 {
		r.progress("note: a command created git refs, left in place: %s", Summarize(rec.NewRefs, 5))
	}
	return rec, nil
}

// rollbackTo restores the baseline: gitws.Rollback for tracked and new files,
// modes and new directories (those TR created included), then the saved
// bytes and times of files TR overwrote, and removes the journal when all
// went well. Every step runs even
// if an earlier one failed, so a git failure cannot cost the user an ignored
// file the harness saved; on failure the journal stays for `factory recover`.
func rollbackTo(ctx context.Context, repo *gitws.Repo, b gitws.Baseline, u undo) (RollbackRecord, error) {
	var errs []error
	// Under a note: killed inside git's reset, the lock files git leaves
	// are known to be factory's, and the next run removes them.
	var report gitws.RollbackReport
	err := repo.DuringGitStep(gitws.GitStep{Step: "rollback"}, func() error {
		var err error
		report, err = repo.Rollback(ctx, b)
		return err
	})
	if err != nil {
		errs = append(errs, err)
	}
	for _, bk := range u.Backups {
		if err := artifact.WriteFileAtomic(filepath.Join(repo.Root, filepath.FromSlash(bk.Path)), bk.Data, bk.Mode); err != nil {
			errs = append(errs, fmt.Errorf("restore ignored file %s: %w", bk.Path, err))
		}
	}
	for _, o := range u.Overwritten {
		// git restored the bytes with a new mtime; Python's bytecode cache
		// keys on (mtime, size), so a .pyc of the failed attempt with the
		// same size could otherwise be taken for the restored source.
		full := filepath.Join(repo.Root, filepath.FromSlash(o.Path))
		if err := os.Chtimes(full, o.Mtime, o.Mtime); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("restore mtime of %s: %w", o.Path, err))
		}
	}
	if len(errs) == 0 {
		if err := repo.RemoveJournal(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return RollbackRecord{}, fmt.Errorf("rollback: %w", errors.Join(errs...))
	}
	// TR's own backups cover ignored files of any size that it overwrote.
	report.Unrestored = slices.DeleteFunc(report.Unrestored, func(p string) bool {
		return slices.ContainsFunc(u.Backups, func(bk backup) bool { return bk.Path == p })
	})
	return RollbackRecord{
		RemovedFiles:    nonNil(report.Removed),
		RestoredFiles:   nonNil(report.Restored),
		UnrestoredFiles: nonNil(report.Unrestored),
		NewRefs:         nonNil(report.NewRefs),
	}, nil
}

func (r *Run) record(a *attempt) AttemptRecord {
	rec := AttemptRecord{
		AttemptIndex:   a.index,
		BaselineCommit: r.baseline.Commit,
		TouchedFiles:   nonNil(a.touched),
		WriteOK:        a.write != nil && a.write.WriteOK,
		Verify:         nonNil(a.verify),
		Acceptance:     nonNil(a.accept),
		FailureBrief:   a.brief,
		Deps:           a.deps,
		Rollback:       a.rollback,
	}
	if a.proposal != nil {
		p := r.rel(filepath.Join(a.dir, "proposed_writes.json"))
		rec.ProposalPath = &p
	}
	zero := 0.0
	rec.CostUSD = &zero // no call, no cost
	if a.response != nil {
		rec.Usage = a.response.Usage
		rec.CostUSD = nil
		if usd, ok := r.opts.Prices.Cost(r.opts.ModelName, a.response.Usage); ok {
			rec.CostUSD = &usd
		}
	}
	return rec
}
