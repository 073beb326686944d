package serve

import (
	"time"
)

// buildFold is what a build's events.jsonl says, folded line by line so
// that a log of any length is read once and held in memory as one entry
// per work order, attempt and node.
type buildFold struct {
	Offset int64 // bytes of events.jsonl folded so far
	Lines  int
	// Skipped counts the lines of events.jsonl that could not be read (not
	// a JSON object, or over maxEventLine): the page says its view is
	// partial. SummaryError says why build_summary.json could not be read.
	Skipped      int
	SummaryError string
	Start        time.Time // the first build_start
	Last         time.Time // the last event
	Repo         string
	Branch       string
	BaseCommit   string
	Total        int  // work orders in the plan; 0 until it is known
	Ended        bool // the last session wrote build_end
	Verdict      string
	Tokens       int64
	// InputTokens and CachedInputTokens are summed from the node events.
	InputTokens, CachedInputTokens int64
	CostUSD                        *float64 // cumulative, from the last node event
	WOs                            []*woFold
	// Current is the last event of the session, while it runs.
	Current Event
}

type woFold struct {
	ID      string
	Verdict string // PASS, FAIL, BUDGET, ERROR; "" while it runs
	Stage   string
	Commit  string
	// Started and Ended are when its latest run started and ended: in a
	// parallel build (factory build -j) they show which ran at once.
	Started, Ended time.Time
	Attempts       []*attemptFold
}

type attemptFold struct {
	N       int
	Nodes   []nodeFold
	Verdict string
	Stage   string
	Tokens  int64
}

// maxNodes bounds the nodes kept per attempt (a real one has four).
const maxNodes = 16

type nodeFold struct {
	Node     string
	Duration time.Duration
	Tokens   int64
	Verdict  string
	Stage    string
}

func (f *buildFold) wo(id string) *woFold {
	for _, w := range f.WOs {
		if w.ID == id {
			return w
		}
	}
	w := &woFold{ID: id}
	f.WOs = append(f.WOs, w)
	return w
}

// maxAttemptsKept bounds the attempts kept per work order.
const maxAttemptsKept = 64

func (w *woFold) attempt(n int) *attemptFold {
	for _, a := range w.Attempts {
		if a.N == n {
			return a
		}
	}
	a := &attemptFold{N: n}
	if len(w.Attempts) >= maxAttemptsKept {
		w.Attempts = w.Attempts[1:]
	}
	w.Attempts = append(w.Attempts, a)
	return a
}

// apply folds one event in.
func (f *buildFold) apply(e Event) {
	f.Lines++
	if t := e.Time(); !t.IsZero() {
		if f.Start.IsZero() {
			f.Start = t
		}
		f.Last = t
	}
	f.Current = e
	switch e.Event {
	case "build_start":
		f.Ended, f.Verdict = false, ""
		if e.Repo != "" {
			f.Repo = e.Repo
		}
		f.Branch, f.BaseCommit = e.Branch, e.BaseCommit
	case "plan":
		f.Total = e.WorkOrders
		f.Tokens += e.Tokens
	case "wo_start":
		w := f.wo(e.WO) // a new run of it: the timeline shows the latest
		w.Verdict, w.Stage, w.Attempts = "", "", nil
		w.Started, w.Ended = e.Time(), time.Time{}
	case "node":
		a := f.wo(e.WO).attempt(e.Attempt)
		if len(a.Nodes) >= maxNodes {
			a.Nodes = a.Nodes[1:] // bounded: an attempt has four nodes
		}
		a.Nodes = append(a.Nodes, nodeFold{Node: e.Node, Duration: time.Duration(e.DurationMS) * time.Millisecond,
			Tokens: e.Tokens, Verdict: e.Verdict, Stage: e.Stage})
		a.Tokens += e.Tokens
		if e.Node == "finalize" {
			a.Verdict, a.Stage = e.Verdict, e.Stage
		}
		f.Tokens += e.Tokens
		f.InputTokens += e.InputTokens
		f.CachedInputTokens += e.CachedInputTokens
		if e.CostUSD != nil {
			c := *e.CostUSD
			f.CostUSD = &c
		}
	case "wo_end":
		w := f.wo(e.WO)
		w.Verdict, w.Stage, w.Commit, w.Ended = e.Verdict, e.Stage, e.Commit, e.Time()
	case "integrate": // a parallel build put it on the branch: that commit
		f.wo(e.WO).Commit = e.Commit
	case "build_end":
		f.Ended, f.Verdict = true, e.Verdict
	}
}

// passed counts the work orders whose last outcome is PASS.
func (f *buildFold) passed() int {
	n := 0
	for _, w := range f.WOs {
		if w.Verdict == "PASS" {
			n++
		}
	}
	return n
}

// clone copies the fold so that a cached one can go on growing.
func (f *buildFold) clone() *buildFold {
	c := *f
	c.WOs = make([]*woFold, len(f.WOs))
	for i, w := range f.WOs {
		wc := *w
		wc.Attempts = make([]*attemptFold, len(w.Attempts))
		for j, a := range w.Attempts {
			ac := *a
			ac.Nodes = append([]nodeFold(nil), a.Nodes...)
			wc.Attempts[j] = &ac
		}
		c.WOs[i] = &wc
	}
	return &c
}
