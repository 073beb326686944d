package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/workorder"
)

// A build that repairs its plan (Options.Repair): when a work order ends
// FAIL and repairs remain, the planner is asked for a repaired plan
// (planner.Repair) instead of the build stopping. Each repair lives in
// <build dir>/repairs/<N>/:
//
//	request.json        the failed order and its attempts' failure briefs, the committed orders, the ids used
//	plan_before.json    the plan as it stood, its committed orders first
//	prompt_attempt_K.txt, llm_raw_response_attempt_K.txt, validation_errors_attempt_K.json
//	plan_after.json     the repaired plan (applied repairs)
//	diff.txt            what changed, order by order, and the dependencies
//	repair.json         the outcome (RepairRecord), written last
//
// The build's identity (plan hash, branch, trailers) stays that of its
// first plan. A repair with an outcome of "applied" makes its
// plan_after.json the plan: the next process reads it back, so a build
// killed after a repair resumes on the repaired plan without asking the
// planner again. A directory without repair.json is a repair cut off: it
// is resumed, replies already received read back (planner.RepairOptions.Dir).

// Outcomes of a repair.
const (
	RepairApplied  = "applied"  // the repaired plan is the build's plan
	RepairGaveUp   = "gave_up"  // the planner gave up, with a reason
	RepairRejected = "rejected" // every reply was invalid
)

// TrailerRepair names, in the commit of an order a repair added or
// revised, the repair that wrote it.
const TrailerRepair = "Factory-Repair"

// RepairRecord is one repair of a build's plan: repair.json in its
// directory and an entry of build_summary.json's repairs.
type RepairRecord struct {
	Repair   int    `json:"repair"` // from 1
	Failed   string `json:"failed"` // the order that failed
	Title    string `json:"failed_title"`
	Stage    string `json:"stage"`   // its failure stage
	Outcome  string `json:"outcome"` // applied, gave_up or rejected
	Reason   string `json:"reason,omitempty"`
	Attempts int    `json:"attempts"` // planner replies read
	// Removed, Added and Revised are the orders the applied repair removed
	// (the failed one among them), added and revised (planner.Changes).
	Removed []string `json:"removed"`
	Added   []string `json:"added"`
	Revised []string `json:"revised"`
	Tokens  int64    `json:"tokens"` // of this process's calls
	Dir     string   `json:"dir"`
}

// Describe is one line saying what the repair did.
func (r RepairRecord) Describe() string {
	head := fmt.Sprintf("repair %d (%s failed at %s)", r.Repair, r.Failed, r.Stage)
	switch r.Outcome {
	case RepairGaveUp:
		return head + ": the planner gave up: " + r.Reason
	case RepairRejected:
		return head + ": no valid repair: " + r.Reason
	}
	var parts []string
	for _, c := range []struct {
		what string
		ids  []string
	}{{"removed", r.Removed}, {"added", r.Added}, {"revised", r.Revised}} {
		if len(c.ids) > 0 {
			parts = append(parts, c.what+" "+strings.Join(c.ids, ", "))
		}
	}
	return head + ": " + strings.Join(parts, "; ")
}

// repairRequest is request.json: the evidence a repair was asked with.
type repairRequest struct {
	Failed    planner.FailedOrder      `json:"failed"`
	Committed []planner.CommittedOrder `json:"committed"`
	Used      []string                 `json:"used"`
}

// repairJob is a repair about to be asked for, or resumed.
type repairJob struct {
	n      int
	dir    string
	req    repairRequest
	before *workorder.Manifest
}

func (b *builder) repairsDir() string { return filepath.Join(b.sum.BuildDir, "repairs") }

func repairDir(buildDir string, n int) string {
	return filepath.Join(buildDir, "repairs", strconv.Itoa(n))
}

// ReadRepairs reads the repairs of the build whose directory is buildDir,
// in order, up to the first without an outcome (a repair cut off, whose
// number is returned as pending; 0 when there is none).
func ReadRepairs(buildDir string) (records []RepairRecord, pending int, err error) {
	for n := 1; ; n++ {
		dir := repairDir(buildDir, n)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return records, 0, nil
		}
		data, err := os.ReadFile(filepath.Join(dir, "repair.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return records, n, nil
		}
		if err != nil {
			return nil, 0, err
		}
		r, err := DecodeRepair(n, data)
		if err != nil {
			return nil, 0, fmt.Errorf("%s/repair.json is damaged (%v); it is not a record factory wrote", dir, err)
		}
		records = append(records, r)
	}
}

// DecodeRepair decodes the repair.json of repair n strictly: known fields,
// once, and its own number.
func DecodeRepair(n int, data []byte) (RepairRecord, error) {
	var r RepairRecord
	if err := workorder.DecodeStrict(data, &r); err != nil {
		return RepairRecord{}, err
	}
	if r.Repair != n {
		return RepairRecord{}, fmt.Errorf("it says repair %d, in the directory of repair %d", r.Repair, n)
	}
	return r, nil
}

// RepairedPlanFile is the plan file of the last applied repair in
// records, "" when none was applied.
func RepairedPlanFile(buildDir string, records []RepairRecord) string {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Outcome == RepairApplied {
			return filepath.Join(repairDir(buildDir, records[i].Repair), "plan_after.json")
		}
	}
	return ""
}

// loadRepairs reads back the repairs of earlier processes: the plan of
// the last applied one becomes the build's, validated like a plan against
// the files of the base commit, and a repair cut off is kept to resume.
func (b *builder) loadRepairs(ctx context.Context) error {
	b.repairOf = map[string]int{}
	for _, w := range b.plan.WorkOrders {
		b.used = append(b.used, w.ID)
	}
	records, pending, err := ReadRepairs(b.sum.BuildDir)
	if err != nil {
		return err
	}
	if len(records) == 0 && pending == 0 {
		return nil
	}
	files, err := b.repo.FilesAt(ctx, b.base)
	if err != nil {
		return err
	}
	env := planner.Env{RepoFiles: files, Python: b.o.Python, RepairIDs: true}
	for _, r := range records {
		if r.Outcome == RepairApplied {
			path := filepath.Join(repairDir(b.sum.BuildDir, r.Repair), "plan_after.json")
			m, err := validPlan(ctx, path, env)
			if err != nil {
				return fmt.Errorf("the plan of repair %d: %w", r.Repair, err)
			}
			b.plan = m
			for _, w := range m.WorkOrders {
				if !slices.Contains(b.used, w.ID) {
					b.used = append(b.used, w.ID)
				}
			}
			for _, id := range slices.Concat(r.Added, r.Revised) {
				b.repairOf[id] = r.Repair
			}
		}
		b.repairs = append(b.repairs, r)
	}
	b.sum.Repairs = slices.Clone(b.repairs)
	b.pending = pending
	if applied := len(slices.DeleteFunc(slices.Clone(records), func(r RepairRecord) bool { return r.Outcome != RepairApplied })); applied > 0 {
		b.progress("plan: %d work orders, as repair %d left it (%d repairs applied so far)", len(b.plan.WorkOrders), lastApplied(records), applied)
	}
	return nil
}

func lastApplied(records []RepairRecord) int {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Outcome == RepairApplied {
			return records[i].Repair
		}
	}
	return 0
}

// mayRepair reports whether a failed order may be repaired now, and says
// why not when repairs are on.
func (b *builder) mayRepair() bool {
	if !b.o.Repair || b.sum.Failed == "" || b.o.PlannerModel == nil {
		return false
	}
	if len(b.repairs) >= b.o.MaxRepairs {
		b.progress("%s", NoRepairsLeft(b.sum.Failed, b.o.MaxRepairs, b.repairs))
		return false
	}
	return true
}

// NoRepairsLeft is the line that ends a build whose order failed after
// maxRepairs repairs: it lists the repairs tried.
func NoRepairsLeft(failed string, maxRepairs int, repairs []RepairRecord) string {
	line := fmt.Sprintf("build: %s failed and no repairs are left (--max-repairs %d)", failed, maxRepairs)
	if len(repairs) == 0 {
		return line
	}
	var parts []string
	for _, r := range repairs {
		parts = append(parts, r.Describe())
	}
	return line + "; repairs tried: " + strings.Join(parts, "; ")
}

// takePending returns the repair a killed process left, when it still
// applies: repairs are on, its plan is the build's, the orders committed
// are those it names and the failed one still has no commit. One that no
// longer applies is dropped (its number is asked again).
func (b *builder) takePending(passed map[string]string) *repairJob {
	n := b.pending
	b.pending = 0
	if n == 0 || !b.o.Repair || n > b.o.MaxRepairs {
		return nil
	}
	dir := repairDir(b.sum.BuildDir, n)
	var req repairRequest
	data, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err == nil {
		err = workorder.DecodeStrict(data, &req)
	}
	var before *workorder.Manifest
	if err == nil {
		var raw []byte
		if raw, err = os.ReadFile(filepath.Join(dir, "plan_before.json")); err == nil {
			before = &workorder.Manifest{}
			err = json.Unmarshal(raw, before)
		}
	}
	if err != nil {
		b.progress("build: repair %d was cut off before its request was recorded; asking again when an order fails", n)
		return nil
	}
	want, n := committedFirst(b.plan, passed)
	var ids []string
	for _, c := range req.Committed {
		ids = append(ids, c.ID)
	}
	var now []string
	for _, w := range want.WorkOrders[:n] {
		now = append(now, w.ID)
	}
	if _, done := passed[req.Failed.ID]; done || !samePlan(before, want) || !slices.Equal(ids, now) {
		b.progress("build: repair %d was cut off, and the build has moved on since; it is asked again when an order fails", n)
		return nil
	}
	b.progress("build: repair %d was cut off; resuming it (%s failed at %s)", n, req.Failed.ID, req.Failed.Stage)
	return &repairJob{n: n, dir: dir, req: req, before: before}
}

func samePlan(a, b *workorder.Manifest) bool {
	x, err1 := canon.JSON(a)
	y, err2 := canon.JSON(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// committedFirst is m with the orders that have a commit first, each part
// in plan order — the order of the branch's history, which a repaired plan
// keeps —, and how many have one.
func committedFirst(m *workorder.Manifest, passed map[string]string) (*workorder.Manifest, int) {
	out := &workorder.Manifest{VerifyContract: m.VerifyContract}
	for _, w := range m.WorkOrders {
		if _, ok := passed[w.ID]; ok {
			out.WorkOrders = append(out.WorkOrders, w)
		}
	}
	n := len(out.WorkOrders)
	for _, w := range m.WorkOrders {
		if _, ok := passed[w.ID]; !ok {
			out.WorkOrders = append(out.WorkOrders, w)
		}
	}
	return out, n
}

// newRepair gathers the evidence of the failed order b.sum.Failed and
// records the request in a fresh repair directory.
func (b *builder) newRepair(ctx context.Context, passed map[string]string) (*repairJob, error) {
	i := slices.IndexFunc(b.plan.WorkOrders, func(w workorder.WorkOrder) bool { return w.ID == b.sum.Failed })
	if i < 0 {
		return nil, fmt.Errorf("repair: the failed work order %s is not in the plan", b.sum.Failed)
	}
	failed, err := FailedOrder(b.plan.WorkOrders[i], b.sum.WorkOrders[i], b.sum.StoppedEarly)
	if err != nil {
		// The repair can still be asked for: the stage says something.
		b.progress("build: warning: %v; asking for a repair without them", err)
	}
	return b.requestRepair(ctx, failed, passed)
}

// FailedOrder is the evidence a repair is asked with about work order wo,
// which failed with summary line line: its stage, its error, why its
// attempts stopped early, and each attempt's failure brief, read from its
// run directory. When the briefs cannot be read the rest is returned with
// the error.
func FailedOrder(wo workorder.WorkOrder, line WorkOrder, stoppedEarly string) (planner.FailedOrder, error) {
	failed := planner.FailedOrder{ID: wo.ID, Title: wo.Title, Stage: line.Stage, StoppedEarly: stoppedEarly, Error: line.Error, Attempts: []planner.AttemptFailure{}}
	if line.RunDir == "" {
		return failed, nil
	}
	attempts, err := attemptFailures(filepath.Join(line.RunDir, "run_summary.json"))
	failed.Attempts = attempts
	if err != nil {
		return failed, fmt.Errorf("the failure briefs of %s cannot be read (%w)", wo.ID, err)
	}
	return failed, nil
}

// requestRepair records the request of repair len(b.repairs)+1 of failed,
// with the orders in passed committed, in a fresh repair directory.
func (b *builder) requestRepair(ctx context.Context, failed planner.FailedOrder, passed map[string]string) (*repairJob, error) {
	before, committed := committedFirst(b.plan, passed)
	req := repairRequest{Failed: failed, Committed: []planner.CommittedOrder{}, Used: slices.Clone(b.used)}
	for _, w := range before.WorkOrders[:committed] {
		tree, err := b.repo.TreeOf(ctx, passed[w.ID])
		if err != nil {
			return nil, err
		}
		req.Committed = append(req.Committed, planner.CommittedOrder{ID: w.ID, Title: w.Title, Tree: tree})
	}
	n := len(b.repairs) + 1
	dir := repairDir(b.sum.BuildDir, n)
	// A directory left by a repair that no longer applies (takePending)
	// holds nothing this one may read back.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writePlanFile(filepath.Join(dir, "plan_before.json"), before); err != nil {
		return nil, err
	}
	if err := artifact.WriteJSON(filepath.Join(dir, "request.json"), req); err != nil {
		return nil, err
	}
	return &repairJob{n: n, dir: dir, req: req, before: before}, nil
}

// attemptFailures reads each failed attempt's failure brief from a run's
// run_summary.json.
func attemptFailures(path string) ([]planner.AttemptFailure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return []planner.AttemptFailure{}, err
	}
	var sum factory.RunSummary
	if err := json.Unmarshal(data, &sum); err != nil {
		return []planner.AttemptFailure{}, fmt.Errorf("%s: %w", path, err)
	}
	out := []planner.AttemptFailure{}
	for _, a := range sum.Attempts {
		if fb := a.FailureBrief; fb != nil {
			out = append(out, planner.AttemptFailure{Attempt: a.AttemptIndex, Stage: fb.Stage, Command: fb.Command, ExitCode: fb.ExitCode, Excerpt: fb.PrimaryErrorExcerpt})
		}
	}
	return out, nil
}

func writePlanFile(path string, m *workorder.Manifest) error {
	return artifact.WriteJSON(path, planner.PlanFile{VerifyContract: m.VerifyContract, WorkOrders: m.WorkOrders})
}

// repair asks the planner for repair job and applies the repaired plan.
// applied is false when the planner gave up or every reply was invalid
// (the build then ends FAIL); err is a model, budget or I/O error, after
// which the repair resumes in the next process.
func (b *builder) repair(ctx context.Context, job *repairJob) (applied bool, err error) {
	failed := job.req.Failed
	b.event(map[string]any{"event": "repair_started", "repair": job.n, "failed": failed.ID, "stage": failed.Stage, "dir": job.dir})
	b.progress("build: repair %d: %s failed at %s; asking %s to repair the plan (repair %d of at most %d)", job.n, failed.ID, failed.Stage, b.o.Run.ModelName, job.n, b.o.MaxRepairs)
	b.update(Update{Planning: true})
	tip, err := b.repo.Head(ctx)
	if err != nil {
		return false, err
	}
	tipFiles, err := b.repo.FilesAt(ctx, tip)
	if err != nil {
		return false, err
	}
	baseFiles, err := b.repo.FilesAt(ctx, b.base)
	if err != nil {
		return false, err
	}
	var failedWO workorder.WorkOrder
	for _, w := range job.before.WorkOrders {
		if w.ID == failed.ID {
			failedWO = w
		}
	}
	repoMap, err := b.repoMap(ctx, tip, func(m *repomap.Map) repomap.Focus { return WorkOrderFocus(m, &failedWO) })
	if err != nil {
		return false, err
	}
	var spec string
	if b.o.SpecPath != "" {
		data, err := os.ReadFile(b.o.SpecPath)
		if err != nil {
			return false, fmt.Errorf("read the spec: %w", err)
		}
		spec = string(data)
	}
	out, err := planner.Repair(ctx, planner.RepairOptions{
		Request: planner.RepairRequest{Spec: spec, Plan: job.before, Committed: job.req.Committed, Failed: failed,
			Used: job.req.Used, RepoFiles: tipFiles, RepoMap: repoMap},
		Model: b.o.PlannerModel, ModelName: b.o.Run.ModelName, ReasoningEffort: b.o.ReasoningEffort,
		MaxOutputTokens: b.o.MaxOutputTokens, MaxAttempts: b.o.PlanMaxAttempts, CacheKey: b.cacheKey(),
		Env: planner.Env{RepoFiles: baseFiles, Python: b.o.Python}, Dir: job.dir, Progress: b.o.Progress,
		OnRejected: func(attempt int, errs []planner.Issue) {
			codes := []string{}
			for _, e := range errs {
				if !slices.Contains(codes, e.Code) {
					codes = append(codes, e.Code)
				}
			}
			b.progress("build: repair %d: reply %d rejected (%d errors: %s); sending it back", job.n, attempt, len(errs), strings.Join(codes, ", "))
			b.event(map[string]any{"event": "repair_rejected", "repair": job.n, "attempt": attempt, "errors": len(errs), "codes": codes})
		},
	})
	rec := RepairRecord{Repair: job.n, Failed: failed.ID, Title: failed.Title, Stage: failed.Stage, Dir: job.dir,
		Removed: []string{}, Added: []string{}, Revised: []string{}}
	var invalid *planner.InvalidPlanError
	switch {
	case errors.As(err, &invalid):
		rec.Outcome, rec.Attempts = RepairRejected, b.o.PlanMaxAttempts
		rec.Reason = fmt.Sprintf("still invalid after %d replies: %s", b.o.PlanMaxAttempts, issueList(invalid.Issues, 3))
		b.event(map[string]any{"event": "repair_rejected", "repair": job.n, "final": true, "errors": len(invalid.Issues)})
	case err != nil:
		b.progress("build: repair %d stopped: %v (the same command resumes it)", job.n, err)
		return false, fmt.Errorf("repair %d: %w", job.n, err)
	case out.GiveUp != "":
		rec.Outcome, rec.Reason, rec.Attempts = RepairGaveUp, out.GiveUp, out.Attempts
		b.event(map[string]any{"event": "repair_gave_up", "repair": job.n, "reason": out.GiveUp})
	default:
		rec.Outcome, rec.Attempts = RepairApplied, out.Attempts
		rec.Removed, rec.Added, rec.Revised = out.Changes.Removed, out.Changes.Added, out.Changes.Revised
		if err := writePlanFile(filepath.Join(job.dir, "plan_after.json"), out.Manifest); err != nil {
			return false, err
		}
		diff := RepairDiff(job.n, failed, job.before, out.Manifest)
		if err := artifact.WriteFileAtomic(filepath.Join(job.dir, "diff.txt"), []byte(diff), 0o644); err != nil {
			return false, err
		}
	}
	if out != nil {
		rec.Tokens = out.Usage.TotalTokens
		if b.o.Meter == nil {
			b.usage = b.usage.Add(out.Usage)
		}
	}
	// The record is written last: with it, the repair is done.
	if err := artifact.WriteJSON(filepath.Join(job.dir, "repair.json"), rec); err != nil {
		return false, err
	}
	b.repairs = append(b.repairs, rec)
	b.sum.Repairs = append(b.sum.Repairs, rec)
	if rec.Outcome != RepairApplied {
		b.progress("build: %s; the build stops at %s", rec.Describe(), failed.ID)
		return false, nil
	}
	b.plan = out.Manifest
	for _, w := range b.plan.WorkOrders {
		if !slices.Contains(b.used, w.ID) {
			b.used = append(b.used, w.ID)
		}
	}
	for _, id := range slices.Concat(rec.Added, rec.Revised) {
		b.repairOf[id] = job.n
	}
	b.sum.Failed, b.sum.StoppedEarly = "", ""
	b.event(map[string]any{"event": "repair_applied", "repair": job.n, "failed": failed.ID,
		"removed": rec.Removed, "added": rec.Added, "revised": rec.Revised, "work_orders": len(b.plan.WorkOrders)})
	b.progress("build: %s; the plan now has %d work orders (see %s)", rec.Describe(), len(b.plan.WorkOrders), filepath.Join(job.dir, "diff.txt"))
	for _, w := range out.Warnings {
		b.progress("    warning: %s", w)
	}
	return true, nil
}

func issueList(issues []planner.Issue, n int) string {
	var parts []string
	for i, is := range issues {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(issues)-n))
			break
		}
		parts = append(parts, is.String())
	}
	return strings.Join(parts, "; ")
}

// RepairDiff is a repair's readable diff: each order removed, added,
// revised (field by field) or kept, then the dependencies before and
// after.
func RepairDiff(n int, failed planner.FailedOrder, before, after *workorder.Manifest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "repair %d: %s %q failed at %s\n\n", n, failed.ID, failed.Title, failed.Stage)
	old := map[string]workorder.WorkOrder{}
	for _, w := range before.WorkOrders {
		old[w.ID] = w
	}
	now := map[string]bool{}
	for _, w := range after.WorkOrders {
		now[w.ID] = true
	}
	for _, w := range before.WorkOrders {
		if !now[w.ID] {
			fmt.Fprintf(&b, "- %s %q removed\n", w.ID, w.Title)
		}
	}
	for _, w := range after.WorkOrders {
		prev, ok := old[w.ID]
		switch {
		case !ok:
			fmt.Fprintf(&b, "+ %s %q added\n", w.ID, w.Title)
			writeOrderFields(&b, w, nil)
		case planner.ChangedFields(prev, w) != nil:
			fmt.Fprintf(&b, "~ %s %q revised\n", w.ID, w.Title)
			writeOrderFields(&b, w, &prev)
		default:
			fmt.Fprintf(&b, "  %s %q unchanged\n", w.ID, w.Title)
		}
	}
	b.WriteString("\ndependencies (derived from the plan):\n")
	deps := func(m *workorder.Manifest) map[string]string {
		out := map[string]string{}
		for j, ds := range Dependencies(m) {
			var ids []string
			for _, i := range ds {
				ids = append(ids, m.WorkOrders[i].ID)
			}
			out[m.WorkOrders[j].ID] = strings.Join(ids, ", ")
		}
		return out
	}
	was, is := deps(before), deps(after)
	for _, w := range after.WorkOrders {
		line := fmt.Sprintf("  %s after: %s", w.ID, orNone(is[w.ID]))
		if prev, ok := was[w.ID]; ok && prev != is[w.ID] {
			line += fmt.Sprintf(" (was: %s)", orNone(prev))
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// writeOrderFields writes the fields of w that differ from prev (all of
// them for a new order), each value as JSON.
func writeOrderFields(b *strings.Builder, w workorder.WorkOrder, prev *workorder.WorkOrder) {
	fields := planner.ChangedFields(workorder.WorkOrder{}, w)
	if prev != nil {
		fields = planner.ChangedFields(*prev, w)
	}
	value := func(o workorder.WorkOrder, f string) string {
		data, _ := json.Marshal(o)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(data, &m)
		return string(m[f])
	}
	for _, f := range fields {
		if prev != nil {
			fmt.Fprintf(b, "    %s:\n      - %s\n      + %s\n", f, value(*prev, f), value(w, f))
		} else {
			fmt.Fprintf(b, "    %s: %s\n", f, value(w, f))
		}
	}
}

// repairTrailer is the trailer line of a commit of order id, "" for an
// order no repair wrote.
func (b *builder) repairTrailer(id string) string {
	if n := b.repairOf[id]; n > 0 {
		return fmt.Sprintf("%s: %d\n", TrailerRepair, n)
	}
	return ""
}

// PassedAfter says how many of repairs a build that passed needed: ""
// for none, else " after N repairs".
func PassedAfter(repairs []RepairRecord) string {
	applied := 0
	for _, r := range repairs {
		if r.Outcome == RepairApplied {
			applied++
		}
	}
	switch applied {
	case 0:
		return ""
	case 1:
		return " after 1 repair"
	}
	return fmt.Sprintf(" after %d repairs", applied)
}
