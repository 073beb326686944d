package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/edit"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// Bounds of what a page shows of one text; the rest is behind a link to
// the whole file (and cut with a note in a report).
const (
	maxShownText = 256 << 10
	maxEventTail = 200
)

// Text is a file's text as shown: maybe cut.
type Text struct {
	Text  string `json:"text"`
	Name  string `json:"name"` // relative to the artifact dir, for the link to the whole file
	Size  int64  `json:"size"`
	Cut   bool   `json:"cut,omitempty"`
	Found bool   `json:"found"`
}

func readText(src *source, name string, max int64) Text {
	data, total, err := src.readFile(name, max)
	if err != nil {
		return Text{Name: name}
	}
	return Text{Text: strings.ToValidUTF8(string(data), "\uFFFD"), Name: name, Size: total, Cut: total > int64(len(data)), Found: true}
}

// BuildView is everything the build page shows.
type BuildView struct {
	Out        int                       `json:"out"`
	Hash       string                    `json:"plan_hash"`
	Row        Row                       `json:"row"`
	Summary    *builder.Summary          `json:"summary"`
	Spec       Text                      `json:"spec"`
	Verify     *workorder.VerifyContract `json:"verify_contract"`
	Plan       []workorder.WorkOrder     `json:"plan"`
	WOs        []WOView                  `json:"work_orders"`
	Events     []json.RawMessage         `json:"events"` // the last ones
	EventsFrom int64                     `json:"events_offset"`
	// Damage: lines of events.jsonl skipped as unreadable, and why
	// build_summary.json could not be read. The page says its view is
	// partial.
	EventsSkipped int       `json:"events_skipped"`
	SummaryError  string    `json:"summary_error,omitempty"`
	Activity      *Activity `json:"activity,omitempty"`
	// Repairs are the repairs of the plan; PlanRepair is the repair whose
	// plan Plan is (0: the plan as compiled or given).
	Repairs    []RepairView `json:"repairs"`
	PlanRepair int          `json:"plan_repair,omitempty"`
	PR         *PRView      `json:"pull_request"`
	Src        string       `json:"-"` // the /files/ prefix of the out dir
}

// WOView is one work order of a build: its outcome, its latest run's
// timeline and, once passed, its commit.
type WOView struct {
	ID          string       `json:"id"`
	Title       string       `json:"title"`
	Outcome     string       `json:"outcome"` // PASS, FAIL, running, pending, ...
	Stage       string       `json:"stage,omitempty"`
	Commit      string       `json:"commit,omitempty"`
	Repaired    string       `json:"repaired,omitempty"` // "added by repair 1", ...
	CommitFiles []string     `json:"commit_files,omitempty"`
	Diff        []DiffFile   `json:"diff,omitempty"`
	DiffNote    string       `json:"diff_note,omitempty"`
	Runs        []RunSummary `json:"runs"`
	Timeline    []AttemptTL  `json:"timeline"`
	// StartedS and EndedS are when its latest run started and ended, in
	// seconds since the build started (EndedS 0 while it runs): the orders
	// of a parallel build that ran at the same time overlap.
	StartedS float64 `json:"started_s,omitempty"`
	EndedS   float64 `json:"ended_s,omitempty"`
}

// RunSummary is one run directory of a work order.
type RunSummary struct {
	ID      string                  `json:"id"`
	Summary *factory.RunSummary     `json:"summary"`
	Error   string                  `json:"summary_error,omitempty"` // run_summary.json is there but unreadable
	Briefs  []*factory.FailureBrief `json:"failure_briefs"`
}

// AttemptTL is one attempt in the timeline: its nodes as they finished.
type AttemptTL struct {
	N       int      `json:"attempt"`
	URL     string   `json:"url"`
	Verdict string   `json:"verdict"`
	Stage   string   `json:"stage,omitempty"`
	Tokens  int64    `json:"tokens"`
	Nodes   []NodeTL `json:"nodes"`
}

// NodeTL is one finished node.
type NodeTL struct {
	Node    string  `json:"node"`
	Seconds float64 `json:"seconds"`
	Tokens  int64   `json:"tokens"`
	Verdict string  `json:"verdict,omitempty"`
	Stage   string  `json:"stage,omitempty"`
}

// Activity is what a running build is doing now.
type Activity struct {
	What  string    `json:"what"`
	Since time.Time `json:"since"`
}

func (s *Server) buildView(ctx context.Context, o int, hash string) (*BuildView, error) {
	if o < 0 || o >= len(s.st.outs) || !validID(hash) {
		return nil, errNotFound
	}
	fold, sum, err := s.st.build(o, hash)
	if err != nil {
		return nil, errNotFound
	}
	row, _ := s.st.buildRow(ctx, o, hash)
	src := s.st.outs[o]
	v := &BuildView{Out: o, Hash: hash, Row: row, Summary: sum, EventsSkipped: fold.Skipped, SummaryError: fold.SummaryError,
		Repairs: s.readRepairs(src, hash), PR: readPR(src, hash), Src: fmt.Sprintf("/files/out/%d", o)}
	s.readPlan(src, hash, v)
	repo := fold.Repo
	if repo == "" && sum != nil {
		repo = sum.Repo
	}
	git := s.st.git(ctx, repo)
	seen := map[string]bool{}
	ids := []string{}
	for _, wo := range v.Plan {
		ids = append(ids, wo.ID)
	}
	for _, w := range fold.WOs {
		ids = append(ids, w.ID)
	}
	titles := map[string]string{}
	if sum != nil { // a plan given with --plan is not in the out dir: the summary names every work order
		for _, w := range sum.WorkOrders {
			ids = append(ids, w.ID)
			titles[w.ID] = w.Title
		}
	}
	for _, id := range ids {
		if seen[id] || !validID(id) {
			continue
		}
		seen[id] = true
		v.WOs = append(v.WOs, s.woView(ctx, src, o, hash, id, fold, sum, git))
	}
	// Repaired plans name orders WO-03r1, after WO-03 and before WO-04.
	slices.SortStableFunc(v.WOs, func(a, b WOView) int { return workorder.CompareIDs(a.ID, b.ID) })
	by := repairedBy(v.Repairs)
	for i := range v.WOs {
		v.WOs[i].Title = titles[v.WOs[i].ID]
		for _, p := range v.Plan {
			if p.ID == v.WOs[i].ID {
				v.WOs[i].Title = p.Title
			}
		}
		v.WOs[i].Repaired = by[v.WOs[i].ID]
	}
	v.Events, v.EventsFrom = tailEvents(src, "builds/"+hash+"/events.jsonl", maxEventTail)
	if row.Status == StatusRunning {
		v.Activity = activity(src, hash, fold)
	}
	return v, nil
}

// readPlan reads the plan and the spec: the plan of the last applied
// repair, else plans/<hash> in the out dir (a build given --plan DIR has
// its plan elsewhere: then each run's work_order.json stands in).
func (s *Server) readPlan(src *source, hash string, v *BuildView) {
	dir := "plans/" + hash
	var m struct {
		Verify *workorder.VerifyContract `json:"verify_contract"`
	}
	if src.readJSON(dir+"/"+planner.ManifestName, &m) == nil {
		v.Verify = m.Verify
	}
	if p, n := repairedPlan(src, hash, v.Repairs); p != nil {
		v.Plan, v.Verify, v.PlanRepair = p.WorkOrders, p.VerifyContract, n
	} else {
		ents, _ := src.readDir(dir)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "WO-") || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			var wo workorder.WorkOrder
			if src.readJSON(dir+"/"+e.Name(), &wo) == nil {
				v.Plan = append(v.Plan, wo)
			}
		}
	}
	if len(v.Plan) == 0 {
		woDirs, _ := src.readDir("builds/" + hash)
		for _, d := range woDirs {
			if !d.IsDir() {
				continue
			}
			runs := runDirs(src, "builds/"+hash+"/"+d.Name())
			if len(runs) == 0 {
				continue
			}
			var wo workorder.WorkOrder
			if src.readJSON("builds/"+hash+"/"+d.Name()+"/"+runs[len(runs)-1]+"/work_order.json", &wo) == nil {
				v.Plan = append(v.Plan, wo)
			}
		}
	}
	if v.PlanRepair == 0 { // listed by file name, where WO-03r10 comes before WO-03r2
		slices.SortStableFunc(v.Plan, func(a, b workorder.WorkOrder) int { return workorder.CompareIDs(a.ID, b.ID) })
	}
	// The spec as the planner saw it: the section of its prompt.
	prompt := readText(src, dir+"/compile_artifacts/prompt_attempt_1.txt", 4<<20)
	const head, tail = "# The product specification\n\n", "\n\n# The repository you start from"
	if i := strings.Index(prompt.Text, head); i >= 0 {
		rest := prompt.Text[i+len(head):]
		if j := strings.Index(rest, tail); j >= 0 {
			v.Spec = Text{Text: rest[:j], Name: prompt.Name, Size: int64(j), Found: true}
		}
	}
}

// runDirs lists the run directories under dir, oldest first.
func runDirs(src *source, dir string) []string {
	ents, err := src.readDir(dir)
	if err != nil {
		return nil
	}
	type rd struct {
		name string
		t    time.Time
	}
	var rs []rd
	for _, e := range ents {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		info, err := src.stat(dir + "/" + e.Name() + "/work_order.json")
		if err != nil {
			continue
		}
		rs = append(rs, rd{e.Name(), info.ModTime()})
	}
	slices.SortStableFunc(rs, func(a, b rd) int { return a.t.Compare(b.t) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

func (s *Server) woView(ctx context.Context, src *source, o int, hash, id string, fold *buildFold, sum *builder.Summary, git *gitws.Repo) WOView {
	w := WOView{ID: id, Outcome: "pending", Runs: []RunSummary{}}
	base := "builds/" + hash + "/" + id
	runs := runDirs(src, base)
	for _, r := range runs {
		rs := RunSummary{ID: r}
		var rsum factory.RunSummary
		if err := src.readJSON(base+"/"+r+"/run_summary.json", &rsum); err == nil {
			rs.Summary = &rsum
			for _, a := range rsum.Attempts {
				if a.FailureBrief != nil {
					rs.Briefs = append(rs.Briefs, a.FailureBrief)
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			rs.Error = fmt.Sprintf("run_summary.json could not be read: %v", err)
		}
		w.Runs = append(w.Runs, rs)
	}
	for _, f := range fold.WOs {
		if f.ID != id {
			continue
		}
		if !f.Started.IsZero() {
			w.StartedS = f.Started.Sub(fold.Start).Seconds()
		}
		if !f.Ended.IsZero() {
			w.EndedS = f.Ended.Sub(fold.Start).Seconds()
		}
		switch {
		case f.Verdict != "":
			w.Outcome, w.Stage, w.Commit = f.Verdict, f.Stage, f.Commit
		default:
			w.Outcome = "running"
		}
		latest := ""
		if len(runs) > 0 {
			latest = runs[len(runs)-1]
		}
		for _, a := range f.Attempts {
			tl := AttemptTL{N: a.N, Verdict: a.Verdict, Stage: a.Stage, Tokens: a.Tokens}
			if latest != "" {
				tl.URL = fmt.Sprintf("/builds/%d/%s/%s/%s/%d", o, hash, id, latest, a.N)
			}
			for _, n := range a.Nodes {
				tl.Nodes = append(tl.Nodes, NodeTL{Node: n.Node, Seconds: n.Duration.Seconds(), Tokens: n.Tokens, Verdict: n.Verdict, Stage: n.Stage})
			}
			w.Timeline = append(w.Timeline, tl)
		}
	}
	if sum != nil && w.Commit == "" {
		for _, l := range sum.WorkOrders {
			if l.ID == id && l.Outcome == builder.OutcomePassed {
				w.Outcome, w.Commit = "PASS", l.Commit
			}
		}
	}
	if w.Outcome == "running" && fold.Ended {
		w.Outcome = "stopped"
	}
	if w.Commit != "" {
		w.Diff, w.CommitFiles, w.DiffNote = s.commitDiff(ctx, git, w.Commit)
	}
	return w
}

type commitDiffs struct {
	files []DiffFile
	names []string
}

// commitDiff is the diff a work order's commit made, from git; a commit
// never changes, so it is kept.
func (s *Server) commitDiff(ctx context.Context, git *gitws.Repo, commit string) ([]DiffFile, []string, string) {
	if git == nil {
		return nil, nil, "the repository is not readable here: no diff"
	}
	key := git.Root + "@" + commit
	s.diffMu.Lock()
	d, ok := s.diffs[key]
	s.diffMu.Unlock()
	if ok {
		return d.files, d.names, ""
	}
	files, names, note := commitDiff(ctx, git, commit)
	if note == "" {
		s.diffMu.Lock()
		if len(s.diffs) > 4096 {
			clear(s.diffs)
		}
		s.diffs[key] = commitDiffs{files, names}
		s.diffMu.Unlock()
	}
	return files, names, note
}

func commitDiff(ctx context.Context, git *gitws.Repo, commit string) ([]DiffFile, []string, string) {
	if git == nil {
		return nil, nil, "the repository is not readable here: no diff"
	}
	log, err := git.Log(ctx, commit, 1)
	if err != nil || len(log) != 1 || log[0].Parent == "" {
		return nil, nil, "commit " + gitws.ShortHash(commit) + " not found in the repository"
	}
	patch, err := git.Diff(ctx, log[0].Parent, commit)
	if err != nil {
		return nil, nil, "git diff failed: " + err.Error()
	}
	if len(patch) > 8<<20 {
		return nil, nil, fmt.Sprintf("diff of %d bytes not shown", len(patch))
	}
	files := parsePatch(string(patch))
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	return files, names, ""
}

// tailEvents returns the last n lines of an events log (read line by
// line, holding n) and the offset after them.
func tailEvents(src *source, name string, n int) ([]json.RawMessage, int64) {
	f, err := src.openFile(name)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	ring := make([]json.RawMessage, 0, n)
	end, _ := scanReader(f, 0, func(line []byte, _ int64) bool {
		if !json.Valid(line) {
			return true
		}
		if len(ring) == n {
			ring = append(ring[:0], ring[1:]...)
		}
		ring = append(ring, json.RawMessage(slices.Clone(line)))
		return true
	})
	return ring, end
}

// activity says what a running build does now: the node after the last
// event, and for PO the command whose log was created last.
func activity(src *source, hash string, f *buildFold) *Activity {
	e := f.Current
	a := &Activity{Since: e.Time()}
	switch e.Event {
	case "build_start", "plan_compile_start":
		a.What = "planning"
	case "plan", "wo_end":
		a.What = "starting the next work order"
	case "wo_start":
		a.What = e.WO + " attempt 1: SE (model call)"
	case "node":
		next := map[string]string{"se": "TR (writing files)", "tr": "PO (running commands)", "po": "finalize", "finalize": "SE (model call)"}[e.Node]
		n := e.Attempt
		if e.Node == "finalize" {
			n++
		}
		a.What = fmt.Sprintf("%s attempt %d: %s", e.WO, n, next)
		if e.Node == "tr" {
			if cmd := runningLog(src, hash, e.WO, e.Attempt); cmd != "" {
				a.What += ", now " + cmd
			}
		}
	case "command_start": // the command runs since the event
		a.What = fmt.Sprintf("%s attempt %d: %s running %s: %s", e.WO, e.Attempt, strings.ToUpper(e.Node), e.Name, quoteArgv(e.Argv))
	default:
		a.What = e.Event
	}
	return a
}

// runningLog names the command of an attempt whose log was created last
// (verify_1, acceptance_2, ..., deps_npm_1 for the dependency step's).
func runningLog(src *source, hash, wo string, attempt int) string {
	runs := runDirs(src, "builds/"+hash+"/"+wo)
	if len(runs) == 0 {
		return ""
	}
	dir := fmt.Sprintf("builds/%s/%s/%s/attempt_%d/logs", hash, wo, runs[len(runs)-1], attempt)
	ents, _ := src.readDir(dir)
	var name string
	var t time.Time
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || info.ModTime().Before(t) {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".stdout.txt"):
			name, t = strings.TrimSuffix(e.Name(), ".stdout.txt"), info.ModTime()
		case depsLogFile.MatchString(e.Name()):
			name, t = strings.TrimSuffix(e.Name(), ".txt"), info.ModTime()
		}
	}
	return name
}

// AttemptView is everything the attempt page shows.
type AttemptView struct {
	Title     string                 `json:"title"`
	Back      string                 `json:"back"` // the build or run page
	N         int                    `json:"attempt"`
	WorkOrder *workorder.WorkOrder   `json:"work_order"`
	Record    *factory.AttemptRecord `json:"record"`
	Verdict   string                 `json:"verdict"`
	Prompt    Text                   `json:"se_prompt"`
	Reply     Text                   `json:"reply"`
	Proposal  string                 `json:"proposal_summary"`
	Writes    []DiffFile             `json:"writes"`
	Write     *factory.WriteResult   `json:"write_result"`
	Deps      *DepsView              `json:"deps"`
	Commands  []CmdView              `json:"commands"`
	Brief     *factory.FailureBrief  `json:"failure_brief"`
	EnvPassed []string               `json:"env_passed"`
	Sandbox   string                 `json:"sandbox"`
	Files     string                 `json:"-"` // the /files/ prefix of the run dir
	Src       string                 `json:"-"` // the /files/ prefix of the artifact dir
	URL       string                 `json:"url"`
	Model     string                 `json:"model"`
	// Damaged lists the artifacts that are there but could not be read:
	// the page is a partial view, and says so.
	Damaged []string `json:"damaged,omitempty"`
}

// CmdView is one command an attempt ran.
type CmdView struct {
	Kind string            `json:"kind"` // verify or acceptance
	Argv string            `json:"argv"`
	Res  factory.CmdResult `json:"result"`
	Out  string            `json:"stdout_url"`
	Err  string            `json:"stderr_url"`
}

// attemptView reads attempt n of the run in dir (relative to out dir o).
func (s *Server) attemptView(ctx context.Context, o int, dir string, n int, repo string) (*AttemptView, error) {
	src := s.st.outs[o]
	ad := dir + "/attempt_" + strconv.Itoa(n)
	if _, err := src.stat(ad); err != nil {
		return nil, errNotFound
	}
	v := &AttemptView{N: n, Files: fmt.Sprintf("/files/out/%d/%s", o, dir), Src: fmt.Sprintf("/files/out/%d", o)}
	read := func(name string, x any) bool {
		err := src.readJSON(name, x)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.Damaged = append(v.Damaged, fmt.Sprintf("%s could not be read: %v", name[strings.LastIndex(name, "/")+1:], err))
		}
		return err == nil
	}
	var wo workorder.WorkOrder
	if read(dir+"/work_order.json", &wo) {
		v.WorkOrder = &wo
	}
	var sum factory.RunSummary
	baseline := ""
	record := depsPending
	if !read(dir+"/run_summary.json", &sum) {
		if _, err := src.stat(dir + "/run_summary.json"); err == nil {
			record = depsUnreadable
		}
	} else {
		record = depsAbsent
		v.EnvPassed, v.Model = sum.EnvPassed, sum.LLMModel
		v.Sandbox = fmt.Sprintf("%s: %s (network: %s)", sum.Sandbox.Mode, sum.Sandbox.Mechanism, sum.Sandbox.Network)
		baseline = sum.BaselineCommit
		for i := range sum.Attempts {
			if sum.Attempts[i].AttemptIndex == n {
				v.Record, record = &sum.Attempts[i], depsRecorded
				baseline = v.Record.BaselineCommit
			}
		}
	}
	v.Prompt = readText(src, ad+"/se_prompt.txt", s.maxText)
	v.Reply = readText(src, ad+"/llm_response_raw.txt", s.maxText)
	var prop workorder.WriteProposal
	if read(ad+"/proposed_writes.json", &prop) {
		v.Proposal = prop.Summary
		git := s.st.git(ctx, repo)
		for _, w := range prop.Writes {
			v.Writes = append(v.Writes, proposalDiff(ctx, git, baseline, w))
		}
		for _, e := range prop.Edits {
			v.Writes = append(v.Writes, editDiff(ctx, git, baseline, e))
		}
	}
	var wr factory.WriteResult
	if read(ad+"/write_result.json", &wr) {
		v.Write = &wr
	}
	var rep *deps.Report
	if v.Record != nil {
		rep = v.Record.Deps
	}
	v.Deps = s.depsView(src, dir, n, record, rep)
	var verify, accept []factory.CmdResult
	read(ad+"/verify_result.json", &verify)
	read(ad+"/acceptance_result.json", &accept)
	if v.Record != nil && verify == nil && accept == nil {
		verify, accept = v.Record.Verify, v.Record.Acceptance
	}
	for _, c := range verify {
		v.Commands = append(v.Commands, cmdView("verify", c, v.Files))
	}
	for _, c := range accept {
		v.Commands = append(v.Commands, cmdView("acceptance", c, v.Files))
	}
	var brief factory.FailureBrief
	if read(ad+"/failure_brief.json", &brief) {
		v.Brief = &brief
	} else if v.Record != nil {
		v.Brief = v.Record.FailureBrief
	}
	switch {
	case v.Record != nil && v.Record.FailureBrief == nil:
		v.Verdict = "PASS"
	case v.Brief != nil:
		v.Verdict = "FAIL"
	case len(v.Damaged) > 0: // not "running": what would say otherwise is unreadable
		v.Verdict = "unknown"
	default:
		v.Verdict = "running"
	}
	return v, nil
}

func cmdView(kind string, c factory.CmdResult, files string) CmdView {
	v := CmdView{Kind: kind, Argv: quoteArgv(c.Command), Res: c}
	if c.StdoutPath != "" && safeRel(c.StdoutPath) {
		v.Out = files + "/" + c.StdoutPath
	}
	if c.StderrPath != "" && safeRel(c.StderrPath) {
		v.Err = files + "/" + c.StderrPath
	}
	return v
}

// safeRel reports whether p is a relative slash path without dot segments.
func safeRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// proposalDiff diffs a proposed write against its base content: nothing
// for a new file, else the file at the attempt's baseline commit.
func proposalDiff(ctx context.Context, git *gitws.Repo, baseline string, w workorder.FileWrite) DiffFile {
	if w.BaseSHA256 == workorder.EmptySHA256 {
		d := textDiff(w.Path, "", w.Content)
		d.New = true
		return d
	}
	if git == nil || baseline == "" {
		d := textDiff(w.Path, "", w.Content)
		d.Note = "base content not available (the repository is not readable here): shown as all new"
		return d
	}
	before, err := git.Show(ctx, baseline, w.Path)
	if err != nil {
		d := textDiff(w.Path, "", w.Content)
		d.Note = fmt.Sprintf("%s not in %s: shown as all new", w.Path, gitws.ShortHash(baseline))
		return d
	}
	return textDiff(w.Path, string(before), w.Content)
}

// editDiff shows a file's edits as the diff they make to its baseline
// content; where that content cannot be read or the edits do not apply
// (the attempt was refused: edit_mismatch), as their old texts against
// their new ones, with a note saying why.
func editDiff(ctx context.Context, git *gitws.Repo, baseline string, e workorder.FileEdit) DiffFile {
	reps := make([]edit.Replace, len(e.Replace))
	var olds, news strings.Builder
	for i, r := range e.Replace {
		reps[i] = edit.Replace{Old: r.Old, New: r.New}
		fmt.Fprintf(&olds, "%s\n", strings.TrimSuffix(r.Old, "\n"))
		fmt.Fprintf(&news, "%s\n", strings.TrimSuffix(r.New, "\n"))
	}
	pairs := func(note string) DiffFile {
		d := textDiff(e.Path, olds.String(), news.String())
		d.Note = fmt.Sprintf("%d edit(s), shown as their old texts against their new ones: %s", len(e.Replace), note)
		return d
	}
	if git == nil || baseline == "" {
		return pairs("base content not available (the repository is not readable here)")
	}
	before, err := git.Show(ctx, baseline, e.Path)
	if err != nil {
		return pairs(fmt.Sprintf("%s not in %s", e.Path, gitws.ShortHash(baseline)))
	}
	after, _, err := edit.Apply(string(before), reps)
	if err != nil {
		return pairs("they do not apply to the baseline: " + err.Error())
	}
	d := textDiff(e.Path, string(before), after)
	d.Note = fmt.Sprintf("changed by %d edit(s)", len(e.Replace))
	return d
}

// RunView is a single `factory run`.
type RunView struct {
	Out      int                  `json:"out"`
	ID       string               `json:"run_id"`
	Row      Row                  `json:"row"`
	WO       *workorder.WorkOrder `json:"work_order"`
	Summary  *factory.RunSummary  `json:"summary"`
	Attempts []int                `json:"attempts"`
}

func (s *Server) runView(o int, id string) (*RunView, error) {
	if o < 0 || o >= len(s.st.outs) || !validID(id) {
		return nil, errNotFound
	}
	row, ok := s.st.runRow(o, id)
	if !ok {
		return nil, errNotFound
	}
	src := s.st.outs[o]
	v := &RunView{Out: o, ID: id, Row: row}
	var wo workorder.WorkOrder
	if src.readJSON(id+"/work_order.json", &wo) == nil {
		v.WO = &wo
	}
	var sum factory.RunSummary
	if src.readJSON(id+"/run_summary.json", &sum) == nil {
		v.Summary = &sum
	}
	v.Attempts = attemptNumbers(src, id)
	return v, nil
}

func attemptNumbers(src *source, dir string) []int {
	ents, _ := src.readDir(dir)
	var ns []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "attempt_")); err == nil && e.IsDir() && strings.HasPrefix(e.Name(), "attempt_") {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}

// LoopView is everything the loop page shows.
type LoopView struct {
	Repo       int               `json:"repo"`
	ID         string            `json:"run_id"`
	Row        Row               `json:"row"`
	Current    bool              `json:"current"` // the tree and memory files are this run's
	Tree       *tree.Node        `json:"tree"`
	TreeErr    string            `json:"tree_problem,omitempty"`
	Selected   string            `json:"selected,omitempty"`
	Goal       Text              `json:"goal"`
	Assume     Text              `json:"assumptions"`
	Questions  Text              `json:"human_questions"`
	Iterations []IterLine        `json:"iterations"`
	Events     []json.RawMessage `json:"events"`
	EventsFrom int64             `json:"events_offset"`
	Src        string            `json:"-"`
	// Damage: unreadable lines of events.jsonl, and why run.json could
	// not be read (then whether the tree is this run's is unknown).
	EventsSkipped int    `json:"events_skipped"`
	RunStateError string `json:"run_state_error,omitempty"`
}

// IterLine is one iteration's directory and meta.json.
type IterLine struct {
	Dir  string     `json:"dir"` // "3", or "3.interrupted"
	N    int        `json:"n"`
	Meta *loop.Meta `json:"meta"`
	// MetaError says why a meta.json that is there could not be read.
	MetaError string `json:"meta_error,omitempty"`
	URL       string `json:"url"`
}

func (s *Server) loopView(ctx context.Context, l int, id string) (*LoopView, error) {
	if l < 0 || l >= len(s.st.loops) || !validID(id) || !slices.Contains(s.st.loopRuns(l), id) {
		return nil, errNotFound
	}
	src := s.st.loops[l]
	v := &LoopView{Repo: l, ID: id, Row: s.st.loopRow(ctx, l, id), Src: fmt.Sprintf("/files/loop/%d", l)}
	st := s.st.loopState(l, id)
	v.Current, v.Tree, v.TreeErr, v.RunStateError = st.Current, st.Tree, st.TreeErr, st.RunErr
	v.EventsSkipped = s.st.loopFold(l, id).skipped
	if st.Sel.Node != nil && st.Sel.Status == tree.StatusOpen {
		v.Selected = st.Sel.Node.ID
	}
	if st.Current {
		v.Goal = readText(src, "GOAL.md", s.maxText)
		v.Assume = readText(src, "ASSUMPTIONS.md", s.maxText)
		v.Questions = readText(src, "HUMAN_QUESTIONS.md", s.maxText)
	}
	ents, _ := src.readDir("iterations/" + id)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), ".")
		n, err := strconv.Atoi(num)
		if err != nil || !validID(e.Name()) {
			continue
		}
		it := IterLine{Dir: e.Name(), N: n, URL: fmt.Sprintf("/loops/%d/%s/%s", l, id, e.Name())}
		it.Meta, it.MetaError = readMeta(src, "iterations/"+id+"/"+e.Name()+"/meta.json")
		v.Iterations = append(v.Iterations, it)
	}
	slices.SortStableFunc(v.Iterations, func(a, b IterLine) int { return a.N - b.N })
	v.Events, v.EventsFrom = tailEvents(src, "iterations/"+id+"/events.jsonl", maxEventTail)
	return v, nil
}

// IterView is one loop iteration.
type IterView struct {
	Repo       int         `json:"repo"`
	RunID      string      `json:"run_id"`
	Dir        string      `json:"dir"`
	Meta       *loop.Meta  `json:"meta"`
	Prompt     Text        `json:"prompt"`
	Guard      Text        `json:"guard_log"`
	Executor   Text        `json:"executor_log"`
	Transcript []TurnEntry `json:"transcript,omitempty"`
	Diff       []DiffFile  `json:"diff"`
	MetaError  string      `json:"meta_error,omitempty"`
	Files      string      `json:"-"`
	Src        string      `json:"-"`
	URL        string      `json:"url"`
}

func (s *Server) iterView(l int, id, dir string) (*IterView, error) {
	if l < 0 || l >= len(s.st.loops) || !validID(id) || !validID(dir) {
		return nil, errNotFound
	}
	src := s.st.loops[l]
	base := "iterations/" + id + "/" + dir
	if _, err := src.stat(base); err != nil {
		return nil, errNotFound
	}
	v := &IterView{Repo: l, RunID: id, Dir: dir, Files: fmt.Sprintf("/files/loop/%d/%s", l, base), Src: fmt.Sprintf("/files/loop/%d", l),
		URL: fmt.Sprintf("/loops/%d/%s/%s", l, id, dir)}
	v.Meta, v.MetaError = readMeta(src, base+"/meta.json")
	v.Prompt = readText(src, base+"/prompt.md", s.maxText)
	v.Guard = readText(src, base+"/guard.log", s.maxText)
	v.Executor = readText(src, base+"/executor.log", s.maxText)
	v.Transcript = transcript(v.Executor.Text)
	patch := readText(src, base+"/diff.patch", 4<<20)
	v.Diff = parsePatch(patch.Text)
	return v, nil
}

// readMeta reads an iteration's meta.json: nil and "" when there is none
// (the iteration was cut off), nil and why when it is there but unreadable.
func readMeta(src *source, name string) (*loop.Meta, string) {
	var m loop.Meta
	err := src.readJSON(name, &m)
	switch {
	case err == nil:
		return &m, ""
	case errors.Is(err, fs.ErrNotExist):
		return nil, ""
	}
	return nil, fmt.Sprintf("meta.json could not be read: %v", err)
}

func isNotFound(err error) bool { return errors.Is(err, errNotFound) || errors.Is(err, fs.ErrNotExist) }
