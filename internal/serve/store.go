package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/workorder"
)

// Statuses of builds, single runs and loop runs.
const (
	StatusRunning     = "running"
	StatusPass        = "PASS"
	StatusFail        = "FAIL"
	StatusStuck       = "stuck"
	StatusInterrupted = "interrupted"
	// StatusOpen is a loop run that stopped with work left and nothing
	// wrong: its iteration limit, or a `factory loop step`.
	StatusOpen = "open"
)

// staleAfter is how long an unfinished single run (whose repository its
// artifacts do not name) counts as running after its last write.
const staleAfter = 10 * time.Minute

// idPattern is what a path segment naming a build, run, work order or loop
// run may look like: no separators, no dot segments.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validID(s string) bool { return idPattern.MatchString(s) && !strings.Contains(s, "..") }

// source is one artifact directory serve reads: an --out dir, or a
// --repo's .runner. Every read goes through fsys, by default an os.Root's,
// which refuses names that leave the directory, symlinks included.
type source struct {
	dir    string
	openFS func(dir string) (fs.FS, error) // Options.FS; nil: an os.Root of dir
	mu     sync.Mutex
	fsys   fs.FS    // nil until the directory exists
	root   *os.Root // the default fsys's, to close
}

func (s *source) open() (fs.FS, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fsys == nil {
		if s.openFS != nil {
			fsys, err := s.openFS(s.dir)
			if err != nil {
				return nil, err
			}
			s.fsys = fsys
		} else {
			r, err := os.OpenRoot(s.dir)
			if err != nil {
				return nil, err
			}
			s.root, s.fsys = r, r.FS()
		}
	}
	return s.fsys, nil
}

func (s *source) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root != nil {
		s.root.Close()
	}
	s.root, s.fsys = nil, nil
}

// randFile is an open file that can seek and read at an offset (an
// *os.File, an in-memory file).
type randFile interface {
	fs.File
	io.Seeker
	io.ReaderAt
}

// openFile opens name (slash-separated, relative) for reading.
func (s *source) openFile(name string) (randFile, error) {
	fsys, err := s.open()
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	sf, ok := f.(randFile)
	if !ok {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.ErrUnsupported}
	}
	return sf, nil
}

// readFile reads name from the source, at most max bytes; total is the
// file's size.
func (s *source) readFile(name string, max int64) (data []byte, total int64, err error) {
	f, err := s.openFile(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", name)
	}
	data, err = io.ReadAll(io.LimitReader(f, max))
	return data, info.Size(), err
}

func (s *source) readJSON(name string, v any) error {
	data, _, err := s.readFile(name, 64<<20)
	if err != nil {
		return err
	}
	return decodeWhole(data, v)
}

// decodeWhole decodes data into the value v points to only when all of it
// decodes: json.Unmarshal leaves a value half-filled at a type error
// (`[{"exit_code":0},{"exit_code":"x"}]` gives one command that passed),
// and a damaged file must show nothing of itself but that it is damaged.
func decodeWhole(data []byte, v any) error {
	fresh := reflect.New(reflect.TypeOf(v).Elem())
	if err := json.Unmarshal(data, fresh.Interface()); err != nil {
		return err
	}
	reflect.ValueOf(v).Elem().Set(fresh.Elem())
	return nil
}

func (s *source) stat(name string) (fs.FileInfo, error) {
	fsys, err := s.open()
	if err != nil {
		return nil, err
	}
	return fs.Stat(fsys, name)
}

// changed stats name only to see whether it changed: on disk outside the
// root, one system call where the root's walk takes one per directory;
// every read still goes through the root.
func (s *source) changed(name string) (fs.FileInfo, error) {
	if s.openFS == nil {
		return os.Stat(filepath.Join(s.dir, filepath.FromSlash(name)))
	}
	return s.stat(name)
}

// readDir lists the directory name, sorted by name.
func (s *source) readDir(name string) ([]fs.DirEntry, error) {
	fsys, err := s.open()
	if err != nil {
		return nil, err
	}
	return fs.ReadDir(fsys, name)
}

// Row is one line of the index.
type Row struct {
	Kind    string    `json:"kind"` // build, run or loop
	ID      string    `json:"id"`
	URL     string    `json:"url"`
	Repo    string    `json:"repo,omitempty"`
	Branch  string    `json:"branch,omitempty"`
	Status  string    `json:"status"`
	Detail  string    `json:"detail,omitempty"` // e.g. the build verdict behind FAIL
	Passed  int       `json:"passed"`
	Total   int       `json:"total"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"duration_seconds"`
	Tokens  int64     `json:"tokens"`
	CostUSD *float64  `json:"cost_usd"`
	// InputTokens and CachedInputTokens give the prompt cache's hit rate.
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	HasCount          bool  `json:"-"` // passed/total is known
}

// CacheHitRate is the share of the input read from a prompt cache, as a
// percentage; "" when nothing was.
func (r Row) CacheHitRate() string {
	if r.CachedInputTokens <= 0 || r.InputTokens <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*float64(r.CachedInputTokens)/float64(r.InputTokens))
}

// buildEntry caches what was read of one build: its events are folded
// incrementally, its summary re-read when it changes.
type buildEntry struct {
	fold    *buildFold
	sumKey  string
	summary *builder.Summary
	sumErr  string // why the summary at sumKey could not be read
}

// loopEntry caches the fold of a loop run's events.jsonl.
type loopEntry struct {
	offset     int64
	first      time.Time
	last       time.Time
	lastEvent  string
	terminal   string // the last complete/stuck/interrupted/repairs_exhausted event
	iterations int
	skipped    int // lines that could not be read
}

type store struct {
	outs  []*source
	loops []*source // each --repo's .runner
	repos []string  // the --repo dirs
	now   func() time.Time

	mu     sync.Mutex
	builds map[string]*buildEntry
	loopsC map[string]*loopEntry
	trees  map[int]treeEntry // by loop repository
	gits   map[string]*gitws.Repo
	// openGit is Options.Git; nil: openGit.
	openGit func(ctx context.Context, dir string) (*gitws.Repo, error)
}

func newStore(o Options) *store {
	s := &store{repos: o.Repos, now: o.Now, openGit: o.Git, builds: map[string]*buildEntry{}, loopsC: map[string]*loopEntry{}, trees: map[int]treeEntry{}, gits: map[string]*gitws.Repo{}}
	for _, d := range o.Outs {
		s.outs = append(s.outs, &source{dir: d, openFS: o.FS})
	}
	for _, r := range o.Repos {
		s.loops = append(s.loops, &source{dir: filepath.Join(r, loop.RunnerDir), openFS: o.FS})
	}
	return s
}

func (s *store) close() {
	for _, src := range append(slices.Clone(s.outs), s.loops...) {
		src.close()
	}
}

// git opens the repository at dir once; nil if it cannot.
func (s *store) git(ctx context.Context, dir string) *gitws.Repo {
	if dir == "" {
		return nil
	}
	s.mu.Lock()
	r, ok := s.gits[dir]
	s.mu.Unlock()
	if ok {
		return r
	}
	open := s.openGit
	if open == nil {
		open = openGit
	}
	r, err := open(ctx, dir)
	if err != nil || r == nil {
		return nil
	}
	s.mu.Lock()
	s.gits[dir] = r
	s.mu.Unlock()
	return r
}

// openGit is the default Options.Git: the repository at dir, an existing
// directory.
func openGit(ctx context.Context, dir string) (*gitws.Repo, error) {
	if info, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !info.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	return gitws.Open(ctx, dir)
}

// build returns the fold and summary of build hash in out dir o, reading
// only what was appended since the last call.
func (s *store) build(o int, hash string) (*buildFold, *builder.Summary, error) {
	src := s.outs[o]
	dir := "builds/" + hash
	key := fmt.Sprint(o, "/", hash)
	s.mu.Lock()
	e := s.builds[key]
	if e == nil {
		e = &buildEntry{fold: &buildFold{}}
		s.builds[key] = e
	}
	s.mu.Unlock()
	// One reader per entry at a time; the fold is cloned for the caller.
	s.mu.Lock()
	defer s.mu.Unlock()
	// The fast path, for an index of many builds: two stats say nothing
	// changed.
	evInfo, evErr := src.changed(dir + "/events.jsonl")
	sumInfo, sumErr := src.changed(dir + "/build_summary.json")
	if evErr == nil && evInfo.Size() == e.fold.Offset && e.fold.Lines > 0 &&
		(sumErr != nil && e.summary == nil && e.sumErr == "" || sumErr == nil && fmt.Sprint(sumInfo.Size(), sumInfo.ModTime().UnixNano()) == e.sumKey) {
		return e.withSummaryError(), e.summary, nil
	}
	found := false
	if f, err := src.openFile(dir + "/events.jsonl"); err == nil {
		found = true
		info, _ := f.Stat()
		if info != nil && info.Size() < e.fold.Offset { // rewritten: start again
			e.fold = &buildFold{}
		}
		off, _ := scanReader(f, e.fold.Offset, func(line []byte, _ int64) bool {
			if ev, ok := decodeEvent(line); ok {
				e.fold.apply(ev)
			} else {
				e.fold.Skipped++
			}
			return true
		})
		e.fold.Offset = off
		f.Close()
	}
	if info, err := src.stat(dir + "/build_summary.json"); err == nil {
		found = true
		k := fmt.Sprint(info.Size(), info.ModTime().UnixNano())
		if k != e.sumKey {
			// A summary that cannot be read is no summary, said so: not the
			// one read before it changed.
			var sum builder.Summary
			if err := src.readJSON(dir+"/build_summary.json", &sum); err == nil {
				e.summary, e.sumErr = &sum, ""
			} else {
				e.summary, e.sumErr = nil, fmt.Sprintf("build_summary.json could not be read: %v", err)
			}
			e.sumKey = k
		}
	} else {
		e.sumErr = ""
	}
	if !found {
		return nil, nil, fs.ErrNotExist
	}
	return e.withSummaryError(), e.summary, nil
}

func (e *buildEntry) withSummaryError() *buildFold {
	c := e.fold.clone()
	c.SummaryError = e.sumErr
	return c
}

// buildStatus decides a build's status. Finished sessions say so in their
// last event (build_end). An unfinished one is running exactly while its
// repository's lock is held by a live process that works on this build
// (the repository's build pointer names this build directory); otherwise
// it was killed: interrupted.
func (s *store) buildStatus(ctx context.Context, o int, hash string, f *buildFold, sum *builder.Summary) (status, detail string) {
	if f.Ended || f.Lines == 0 && sum != nil {
		v := f.Verdict
		if f.Lines == 0 {
			v = sum.Verdict
		}
		return verdictStatus(v, sum)
	}
	repo := f.Repo
	if repo == "" && sum != nil {
		repo = sum.Repo
	}
	if r := s.git(ctx, repo); r != nil {
		if _, held := r.LockHolder(); held {
			if p, err := builder.ReadPointer(r); err == nil && samePath(p.BuildDir, filepath.Join(s.outs[o].dir, "builds", hash)) {
				return StatusRunning, ""
			}
		}
		return StatusInterrupted, "no build_end event and no factory holds the repository's lock"
	}
	// The repository is gone or unknown: the log's age decides.
	if !f.Last.IsZero() && s.now().Sub(f.Last) < staleAfter {
		return StatusRunning, "repository not readable; judged by the age of the last event"
	}
	return StatusInterrupted, "no build_end event"
}

func samePath(a, b string) bool {
	if a == b {
		return true
	}
	ia, err1 := os.Stat(a)
	ib, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ia, ib)
}

// verdictStatus maps a build verdict to a status: PASS, interrupted for
// an ERROR that an interrupt caused, else FAIL with the verdict as detail.
func verdictStatus(v string, sum *builder.Summary) (string, string) {
	switch v {
	case builder.VerdictPass:
		return StatusPass, ""
	case builder.VerdictError:
		if sum != nil && strings.Contains(sum.Error, "interrupted") {
			return StatusInterrupted, sum.Error
		}
		if sum != nil && sum.Error != "" {
			return StatusFail, "ERROR: " + firstLine(sum.Error)
		}
		return StatusFail, v
	case builder.VerdictFail:
		if sum != nil && sum.Failed != "" {
			return StatusFail, sum.Failed + " failed"
		}
		return StatusFail, ""
	case "":
		return StatusInterrupted, ""
	}
	return StatusFail, v
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

// rows lists every build, single run and loop run, newest first.
func (s *store) rows(ctx context.Context) []Row {
	var rows []Row
	for o, src := range s.outs {
		if ents, err := src.readDir("builds"); err == nil {
			for _, d := range ents {
				if !d.IsDir() || !validID(d.Name()) {
					continue
				}
				if r, ok := s.buildRow(ctx, o, d.Name()); ok {
					rows = append(rows, r)
				}
			}
		}
		if ents, err := src.readDir("."); err == nil {
			for _, d := range ents {
				if !d.IsDir() || !validID(d.Name()) || d.Name() == "builds" || d.Name() == "plans" {
					continue
				}
				if r, ok := s.runRow(o, d.Name()); ok {
					rows = append(rows, r)
				}
			}
		}
	}
	for l := range s.loops {
		for _, id := range s.loopRuns(l) {
			rows = append(rows, s.loopRow(ctx, l, id))
		}
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := b.Started.Compare(a.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return rows
}

func (s *store) buildRow(ctx context.Context, o int, hash string) (Row, bool) {
	f, sum, err := s.build(o, hash)
	if err != nil {
		return Row{}, false
	}
	r := Row{Kind: "build", ID: hash, URL: fmt.Sprintf("/builds/%d/%s", o, hash), Repo: f.Repo, Branch: f.Branch,
		Started: f.Start, Tokens: f.Tokens, CostUSD: f.CostUSD, Passed: f.passed(), Total: f.Total, HasCount: true,
		InputTokens: f.InputTokens, CachedInputTokens: f.CachedInputTokens}
	if sum != nil {
		if r.Repo == "" {
			r.Repo = sum.Repo
		}
		if r.Branch == "" {
			r.Branch = sum.Branch
		}
		if f.Ended || f.Lines == 0 {
			r.Tokens, r.CostUSD = sum.Tokens, sum.CostUSD
			r.InputTokens, r.CachedInputTokens = sum.InputTokens, sum.CachedInputTokens
			if r.Total == 0 {
				r.Total = len(sum.WorkOrders)
			}
		}
	}
	r.Status, r.Detail = s.buildStatus(ctx, o, hash, f, sum)
	end := f.Last
	if r.Status == StatusRunning {
		end = s.now()
	}
	if !f.Start.IsZero() {
		r.Seconds = end.Sub(f.Start).Seconds()
	}
	return r, true
}

// runRow is a single `factory run` in out dir o: a directory holding
// work_order.json.
func (s *store) runRow(o int, id string) (Row, bool) {
	src := s.outs[o]
	woInfo, err := src.stat(id + "/work_order.json")
	if err != nil {
		return Row{}, false
	}
	r := Row{Kind: "run", ID: id, URL: fmt.Sprintf("/runs/%d/%s", o, id), Started: woInfo.ModTime(), Total: 1, HasCount: true}
	var wo workorder.WorkOrder
	if src.readJSON(id+"/work_order.json", &wo) == nil {
		r.Detail = wo.ID
	}
	var sum factory.RunSummary
	sumInfo, err := src.stat(id + "/run_summary.json")
	if err == nil && src.readJSON(id+"/run_summary.json", &sum) == nil {
		r.Seconds = sumInfo.ModTime().Sub(woInfo.ModTime()).Seconds()
		r.Tokens, r.CostUSD = sum.Usage.TotalTokens, sum.CostUSD
		r.InputTokens, r.CachedInputTokens = sum.Usage.PromptTokens, sum.Usage.CachedInputTokens
		switch {
		case sum.Verdict == factory.VerdictPass:
			r.Status, r.Passed = StatusPass, 1
		case sum.Verdict == factory.VerdictError && strings.Contains(sum.Error, "interrupted"):
			r.Status = StatusInterrupted
		default:
			r.Status = StatusFail
		}
		r.Detail = strings.TrimSpace(wo.ID + " " + sum.Verdict)
		return r, true
	}
	// No summary yet: running while its files change (a run's artifacts do
	// not name its repository, so there is no lock to look at).
	last := latestMod(src, id)
	r.Seconds = s.now().Sub(woInfo.ModTime()).Seconds()
	if s.now().Sub(last) < staleAfter {
		r.Status = StatusRunning
	} else {
		r.Status, r.Seconds = StatusInterrupted, last.Sub(woInfo.ModTime()).Seconds()
	}
	return r, true
}

// latestMod is the newest modification time of the run directory and its
// attempt directories.
func latestMod(src *source, dir string) time.Time {
	var last time.Time
	if info, err := src.stat(dir); err == nil {
		last = info.ModTime()
	}
	ents, _ := src.readDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().After(last) {
			last = info.ModTime()
		}
		if e.IsDir() {
			sub, _ := src.readDir(dir + "/" + e.Name())
			for _, f := range sub {
				if info, err := f.Info(); err == nil && info.ModTime().After(last) {
					last = info.ModTime()
				}
			}
		}
	}
	return last
}

// loopRuns lists the run ids with logs under .runner/iterations of repo l.
func (s *store) loopRuns(l int) []string {
	ents, err := s.loops[l].readDir("iterations")
	if err != nil {
		return nil
	}
	var ids []string
	for _, d := range ents {
		if d.IsDir() && validID(d.Name()) {
			ids = append(ids, d.Name())
		}
	}
	return ids
}

// loopFold folds the run's events.jsonl, incrementally.
func (s *store) loopFold(l int, id string) loopEntry {
	key := fmt.Sprint(l, "/", id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.loopsC[key]
	if e == nil {
		e = &loopEntry{}
		s.loopsC[key] = e
	}
	f, err := s.loops[l].openFile("iterations/" + id + "/events.jsonl")
	if err != nil {
		return *e
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() < e.offset {
		*e = loopEntry{}
	}
	e.offset, _ = scanReader(f, e.offset, func(line []byte, _ int64) bool {
		var ev loop.Event
		if line == nil || json.Unmarshal(line, &ev) != nil {
			e.skipped++
			return true
		}
		t, _ := time.Parse(time.RFC3339Nano, ev.Time)
		if e.first.IsZero() {
			e.first = t
		}
		e.last, e.lastEvent = t, ev.Event
		switch ev.Event {
		case "complete", "stuck", "interrupted", "repairs_exhausted", "iteration_aborted":
			e.terminal = ev.Event
		case "iteration_started", "run_started":
			e.terminal = ""
		}
		if ev.Event == "iteration_committed" {
			e.iterations++
		}
		return true
	})
	return *e
}

// loopState is what the index and the loop page know of a loop run.
type loopState struct {
	Current  bool // the run .runner/run.json names
	RunState loop.RunState
	RunErr   string     // why run.json could not be read
	Tree     *tree.Node // the current tree, for the current run
	TreeErr  string
	Sel      tree.Selection
}

func (s *store) loopState(l int, id string) loopState {
	var st loopState
	src := s.loops[l]
	err := src.readJSON("run.json", &st.RunState)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		st.RunErr = fmt.Sprintf(".runner/run.json could not be read: %v", err)
	}
	if err == nil && st.RunState.RunID == id {
		st.Current = true
		data, _, err := src.readFile("tree.json", tree.MaxFileBytes+1)
		if err == nil {
			e := s.decodeTree(l, data)
			st.Tree, st.Sel, st.TreeErr = e.tree, e.sel, e.err
		}
	}
	return st
}

// treeEntry is a loop repository's tree.json decoded (validated against
// the schema, which costs more than the rest of a loop page) and the
// selection in it, for as long as its bytes stay the same. The tree is
// shared: read only.
type treeEntry struct {
	data []byte
	tree *tree.Node
	sel  tree.Selection
	err  string // why it does not decode
}

// decodeTree decodes data, loop repository l's tree.json, or returns the
// decoding of the same bytes before.
func (s *store) decodeTree(l int, data []byte) treeEntry {
	s.mu.Lock()
	e, ok := s.trees[l]
	s.mu.Unlock()
	if ok && bytes.Equal(e.data, data) {
		return e
	}
	e = treeEntry{data: data}
	if t, err := tree.Decode(data); err != nil {
		e.err = err.Error()
	} else {
		e.tree, e.sel = t, tree.Select(t)
	}
	s.mu.Lock()
	s.trees[l] = e
	s.mu.Unlock()
	return e
}

// loopStatus: the current run's tree decides PASS and stuck; the lock
// decides running; else the last terminal event.
func (s *store) loopStatus(ctx context.Context, l int, st loopState, e loopEntry) string {
	if st.Current && st.Tree != nil {
		switch st.Sel.Status {
		case tree.StatusComplete:
			return StatusPass
		case tree.StatusStuck:
			return StatusStuck
		}
		if r := s.git(ctx, s.repos[l]); r != nil {
			if _, held := r.LockHolder(); held && e.terminal == "" {
				return StatusRunning
			}
		}
	}
	switch e.terminal {
	case "complete":
		return StatusPass
	case "stuck":
		return StatusStuck
	case "repairs_exhausted":
		return StatusFail
	case "interrupted", "iteration_aborted":
		return StatusInterrupted
	}
	if e.lastEvent == "iteration_started" { // cut off without a word: killed
		return StatusInterrupted
	}
	return StatusOpen
}

func (s *store) loopRow(ctx context.Context, l int, id string) Row {
	e := s.loopFold(l, id)
	st := s.loopState(l, id)
	r := Row{Kind: "loop", ID: id, URL: fmt.Sprintf("/loops/%d/%s", l, id), Repo: s.repos[l], Branch: loop.BranchPrefix + id, Started: e.first}
	r.Status = s.loopStatus(ctx, l, st, e)
	end := e.last
	if r.Status == StatusRunning {
		end = s.now()
	}
	if !e.first.IsZero() {
		r.Seconds = end.Sub(e.first).Seconds()
	}
	if st.Tree != nil {
		st.Tree.Walk(func(n, _ *tree.Node, _ int) {
			if n.IsLeaf() {
				r.Total++
				if n.Passes {
					r.Passed++
				}
			}
		})
		r.HasCount = true
	}
	r.Detail = fmt.Sprintf("%d iterations", e.iterations)
	return r
}

var errNotFound = errors.New("not found")
