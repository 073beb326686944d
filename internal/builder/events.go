package builder

import (
	"fmt"
	"time"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llm"
)

// Spend is what the model calls of a build have cost so far.
type Spend struct {
	Tokens  int64
	CostUSD *float64 // nil when a model's price is unknown
	// InputTokens is the prompt tokens, CachedInputTokens and
	// CacheWriteTokens the parts of them read from and written to the
	// providers' prompt caches.
	InputTokens, CachedInputTokens, CacheWriteTokens int64
}

// CacheHitRate is the share of the input read from a prompt cache.
func (s Spend) CacheHitRate() float64 {
	return llm.Usage{PromptTokens: s.InputTokens, CachedInputTokens: s.CachedInputTokens}.CacheHitRate()
}

func (b *builder) spent() Spend {
	if b.o.Meter != nil {
		return tallySpend(b.o.Meter.Snapshot())
	}
	u := b.usage
	return Spend{Tokens: u.TotalTokens, InputTokens: u.PromptTokens, CachedInputTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens}
}

// orderSpent is what the work orders this builder runs have spent: in a
// parallel build, one work order's own meter (others spend at the same
// time); else the build's.
func (b *builder) orderSpent() Spend {
	if b.own != nil {
		return tallySpend(b.own.Snapshot())
	}
	return b.spent()
}

func tallySpend(t llm.Tally) Spend {
	return Spend{Tokens: t.TotalTokens, CostUSD: t.Cost(), InputTokens: t.PromptTokens,
		CachedInputTokens: t.CachedInputTokens, CacheWriteTokens: t.CacheWriteTokens}
}

// delta is what a work order cost: the difference of two Spends.
func delta(before, after Spend) (int64, *float64) {
	if before.CostUSD == nil || after.CostUSD == nil {
		return after.Tokens - before.Tokens, nil
	}
	c := *after.CostUSD - *before.CostUSD
	return after.Tokens - before.Tokens, &c
}

// total puts the build's spend in the summary.
func (b *builder) total() {
	s := b.spent()
	b.sum.Tokens, b.sum.CostUSD = s.Tokens, s.CostUSD
	b.sum.InputTokens, b.sum.CachedInputTokens, b.sum.CacheWriteTokens = s.InputTokens, s.CachedInputTokens, s.CacheWriteTokens
}

// onEvent reports one node of a work order's run: a progress line and an
// events.jsonl record.
func (b *builder) onEvent(wo string, ev factory.Event) {
	if ev.Command != nil {
		b.event(map[string]any{"event": "command_start", "wo": wo, "attempt": ev.Attempt, "node": ev.Node,
			"name": ev.Command.Name, "argv": ev.Command.Argv})
		b.update(Update{WO: wo, Attempt: ev.Attempt, Node: ev.Node, Command: ev.Command.Argv})
		return
	}
	if b.o.Meter == nil {
		b.usage = b.usage.Add(ev.Usage)
	}
	s := b.spent()
	cost := "cost unknown"
	if s.CostUSD != nil {
		cost = fmt.Sprintf("$%.4f", *s.CostUSD)
	}
	what := ev.Node
	switch {
	case ev.Verdict != "" && ev.Stage != "":
		what += ": " + ev.Verdict + " (" + ev.Stage + ")"
	case ev.Verdict != "":
		what += ": " + ev.Verdict
	}
	tokens := ""
	if ev.Usage.TotalTokens > 0 {
		tokens = fmt.Sprintf(", %d tokens", ev.Usage.TotalTokens)
	}
	if ev.Usage.CachedInputTokens > 0 {
		tokens += fmt.Sprintf(" (%.0f%% of the input cached)", 100*ev.Usage.CacheHitRate())
	}
	b.progress("%s attempt %d: %s (%s%s; build so far: %d tokens, %s)", wo, ev.Attempt, what,
		ev.Duration.Round(time.Millisecond), tokens, s.Tokens, cost)
	b.event(map[string]any{"event": "node", "wo": wo, "attempt": ev.Attempt, "node": ev.Node,
		"verdict": ev.Verdict, "stage": ev.Stage, "tokens": ev.Usage.TotalTokens, "cost_usd": s.CostUSD,
		"input_tokens": ev.Usage.PromptTokens, "cached_input_tokens": ev.Usage.CachedInputTokens,
		"duration_ms": ev.Duration.Milliseconds()})
	b.update(Update{WO: wo, Attempt: ev.Attempt, Node: nextNode(ev), Verdict: ev.Verdict, Stage: ev.Stage})
}

// Update is one change of a build's state, for a live view: the planner
// started, a work order started, a node finished (Node is then the one
// that runs next), a command started, or a work order ended (Done).
type Update struct {
	Planning bool   // the planner is compiling the plan
	WO       string // the work order, "" while planning
	Title    string
	Index    int // of WO in the plan, from 1
	Total    int // work orders in the plan
	Attempt  int
	Node     string   // running now: se, tr, po, finalize; "" between attempts
	Command  []string // running now, in po
	// Verdict and Stage: of an attempt after its finalize; of the work
	// order (PASS, FAIL, BUDGET, ERROR) when Done.
	Verdict, Stage string
	Done           bool
	Commit         string // Done with PASS
	Spend          Spend  // the build's so far
}

func (b *builder) update(u Update) {
	if b.o.OnUpdate == nil {
		return
	}
	if b.plan != nil {
		u.Total = len(b.plan.WorkOrders)
		for i, wo := range b.plan.WorkOrders {
			if wo.ID == u.WO {
				u.Index, u.Title = i+1, wo.Title
			}
		}
	}
	u.Spend = b.spent()
	b.o.OnUpdate(u)
}

// nextNode is the node that runs after ev's: the graph's order within an
// attempt, and a new attempt's se after a failed finalize.
func nextNode(ev factory.Event) string {
	switch ev.Node {
	case "se":
		return "tr"
	case "tr":
		return "po"
	case "po":
		return "finalize"
	}
	return ""
}
