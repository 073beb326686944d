package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Tally is what model calls spent. Tallies add up, and Sub gives the
// spending between two snapshots (an attempt, a work order).
type Tally struct {
	Calls            int64 `json:"calls"` // requests sent, failed ones included
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// CachedInputTokens (cache reads) and CacheWriteTokens are the parts of
	// PromptTokens the providers reported as read from and written to their
	// prompt caches.
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	// CostUSD is the estimated cost of the calls whose model has a price;
	// UnpricedCalls counts the others, whose cost is unknown.
	CostUSD       float64 `json:"cost_usd"`
	UnpricedCalls int64   `json:"unpriced_calls"`
}

// CostKnown reports whether every call of the tally had a price.
func (t Tally) CostKnown() bool { return t.UnpricedCalls == 0 }

// Cost is CostUSD, or nil when part of the cost is unknown: the JSON
// null of a summary's "cost_usd".
func (t Tally) Cost() *float64 {
	if !t.CostKnown() {
		return nil
	}
	c := t.CostUSD
	return &c
}

// CacheHitRate is the share of the input read from a prompt cache
// (cached ÷ input), 0 when there was no input.
func (t Tally) CacheHitRate() float64 { return hitRate(t.CachedInputTokens, t.PromptTokens) }

// CacheHitRate is the share of the input read from a prompt cache.
func (u Usage) CacheHitRate() float64 { return hitRate(u.CachedInputTokens, u.PromptTokens) }

func hitRate(cached, input int64) float64 {
	if input <= 0 {
		return 0
	}
	return float64(cached) / float64(input)
}

// Add is t plus u.
func (t Tally) Add(u Tally) Tally { return t.plus(u, 1) }

// Sub is t minus an earlier snapshot s of the same meter.
func (t Tally) Sub(s Tally) Tally { return t.plus(s, -1) }

// plus is t + sign×u, field by field.
func (t Tally) plus(u Tally, sign int64) Tally {
	return Tally{
		Calls: t.Calls + sign*u.Calls, PromptTokens: t.PromptTokens + sign*u.PromptTokens,
		CompletionTokens: t.CompletionTokens + sign*u.CompletionTokens, TotalTokens: t.TotalTokens + sign*u.TotalTokens,
		CachedInputTokens: t.CachedInputTokens + sign*u.CachedInputTokens, CacheWriteTokens: t.CacheWriteTokens + sign*u.CacheWriteTokens,
		CostUSD: t.CostUSD + float64(sign)*u.CostUSD, UnpricedCalls: t.UnpricedCalls + sign*u.UnpricedCalls,
	}
}

// Budget limits what a Meter lets model calls spend; a zero field is no
// limit. MaxTokens counts prompt and completion tokens together.
type Budget struct {
	MaxTokens  int64
	MaxCostUSD float64
}

// Enforceable reports, before any call, whether the budget can be kept
// with models: a cost limit cannot be kept for a model without a price,
// and is refused rather than guessed.
func (b Budget) Enforceable(p *Prices, models ...string) error {
	if b.MaxCostUSD <= 0 {
		return nil
	}
	for _, m := range models {
		if _, ok := p.Lookup(m); !ok {
			return fmt.Errorf("a cost budget cannot be enforced for model %q: it has no price (add one with a prices file)", m)
		}
	}
	return nil
}

// Budget limits, as BudgetError.Limit.
const (
	LimitTokens  = "tokens"
	LimitCostUSD = "cost_usd"
)

// BudgetError refuses a call that could take spending past a Budget. No
// request was sent. Max, Spent and Estimate are in the limit's unit
// (tokens or USD); Spent includes calls still in flight.
type BudgetError struct {
	Limit    string  `json:"limit"` // LimitTokens or LimitCostUSD
	Max      float64 `json:"max"`
	Spent    float64 `json:"spent"`
	Estimate float64 `json:"estimate"` // what the refused call could cost
	Model    string  `json:"model"`
	// Unpriced is set when the limit is a cost and the model has no
	// price: the call could cost anything.
	Unpriced bool `json:"unpriced,omitempty"`
}

func (e *BudgetError) Error() string {
	if e.Unpriced {
		return fmt.Sprintf("cost budget of $%.4f: model %q has no price, so its next call could cost anything; no request was sent", e.Max, e.Model)
	}
	if e.Limit == LimitTokens {
		return fmt.Sprintf("token budget reached: %.0f of %.0f tokens spent and the next call to model %q could use up to %.0f more; no request was sent",
			e.Spent, e.Max, e.Model, e.Estimate)
	}
	return fmt.Sprintf("cost budget reached: $%.4f of $%.4f spent and the next call to model %q could cost up to $%.4f more; no request was sent",
		e.Spent, e.Max, e.Model, e.Estimate)
}

// Estimate of one call, used by budgets before it is sent.
const (
	// BytesPerToken estimates prompt tokens from prompt bytes. Tokenizers
	// average about 4 bytes per token on English and code; 3 overestimates,
	// so a budget errs on the side of stopping.
	BytesPerToken = 3
	// DefaultOutputEstimate is the output assumed for a request without
	// MaxOutputTokens: the Anthropic client's max_tokens for such requests.
	DefaultOutputEstimate = DefaultAnthropicMaxTokens
	// messageOverhead covers the role and framing tokens of each message.
	messageOverhead = 8
)

// EstimateTokens is a conservative estimate of what req can spend: its
// prompt (messages and schema) at BytesPerToken, and its output budget
// (MaxOutputTokens, else DefaultOutputEstimate). A client that retries an
// incomplete answer with a larger budget (OpenAIResponses doubles it once)
// can spend more.
func EstimateTokens(req Request) (prompt, output int64) {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		prompt += messageOverhead
	}
	if req.Schema != nil {
		if b, err := json.Marshal(req.Schema); err == nil {
			n += len(b)
		}
	}
	prompt += int64((n + BytesPerToken - 1) / BytesPerToken)
	output = req.MaxOutputTokens
	if output <= 0 {
		output = DefaultOutputEstimate
	}
	return prompt, output
}

// Meter is a Model that passes calls to another, counting the usage and
// estimated cost of each, and refusing, before anything is sent, a call that
// could take spending past its Budget. Wrap the outermost model with it (a
// Recorder or a Replayer included: replayed answers count their recorded
// usage, and a refused call is neither recorded nor replayed). It is safe
// for concurrent use: calls in flight hold their estimate against the
// budget until they return.
type Meter struct {
	model  Model
	prices *Prices
	budget Budget

	mu       sync.Mutex
	total    Tally
	reserved Tally // estimates of the calls in flight
	observe  func(spent, inFlight Tally) error
}

// NewMeter meters model with prices (nil: every cost unknown) and budget.
func NewMeter(model Model, prices *Prices, budget Budget) *Meter {
	return &Meter{model: model, prices: prices, budget: budget}
}

// Prices is the price table m uses.
func (m *Meter) Prices() *Prices { return m.prices }

// Snapshot returns what was spent so far; Since(snapshot) is the spending
// after it.
func (m *Meter) Snapshot() Tally {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// Resume counts prior as already spent by m, against its budget: the
// spending of an earlier process of the same build. Call it before any call.
func (m *Meter) Resume(prior Tally) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total = m.total.Add(prior)
}

// Observe makes m report, to fn, what was spent and the estimates of the
// calls in flight each time either changes: before a call is sent and after
// it returns. fn runs under m's lock, so reports arrive in order. An error
// from fn before a call refuses the call (nothing is sent); after a call
// it is returned with the call's answer. It is how a build keeps its
// spending durable across processes.
func (m *Meter) Observe(fn func(spent, inFlight Tally) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observe = fn
}

// Since returns what was spent after the snapshot s.
func (m *Meter) Since(s Tally) Tally { return m.Snapshot().Sub(s) }

// Complete implements Model. A refused call returns a *BudgetError.
func (m *Meter) Complete(ctx context.Context, req Request) (Response, error) {
	return m.complete(ctx, m.model, req)
}

// Wrap returns a Model that passes calls to model, metered by m: one Meter
// counts and bounds several clients, such as a build's planner and its
// work orders' model.
func (m *Meter) Wrap(model Model) Model {
	return modelFunc(func(ctx context.Context, req Request) (Response, error) { return m.complete(ctx, model, req) })
}

// modelFunc is a function that implements Model.
type modelFunc func(ctx context.Context, req Request) (Response, error)

func (f modelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

func (m *Meter) complete(ctx context.Context, model Model, req Request) (Response, error) {
	est, err := m.reserve(req)
	if err != nil {
		return Response{}, err
	}
	resp, err := model.Complete(ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved = m.reserved.Sub(est)
	m.total.Calls++
	m.total.PromptTokens += resp.Usage.PromptTokens
	m.total.CompletionTokens += resp.Usage.CompletionTokens
	m.total.TotalTokens += resp.Usage.TotalTokens
	m.total.CachedInputTokens += resp.Usage.CachedInputTokens
	m.total.CacheWriteTokens += resp.Usage.CacheWriteTokens
	if usd, ok := m.cost(req.Model, resp.Model, resp.Usage); ok {
		m.total.CostUSD += usd
	} else if err == nil || resp.Usage.TotalTokens > 0 {
		// A failed call that reported no usage cost nothing, price or not.
		m.total.UnpricedCalls++
	}
	if m.observe != nil {
		if oerr := m.observe(m.total, m.reserved); oerr != nil && err == nil {
			err = fmt.Errorf("record what model calls spent: %w", oerr)
		}
	}
	return resp, err
}

// cost prices usage by the requested model name, else by the name the
// server reported (a dated snapshot, say).
func (m *Meter) cost(requested, reported string, u Usage) (float64, bool) {
	if usd, ok := m.prices.Cost(requested, u); ok {
		return usd, true
	}
	if reported != "" {
		return m.prices.Cost(reported, u)
	}
	return 0, false
}

// reserve checks req against the budget and, when it fits, holds its
// estimate until the call returns.
func (m *Meter) reserve(req Request) (Tally, error) {
	prompt, output := EstimateTokens(req)
	est := Tally{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output}
	usd, priced := m.prices.Estimate(req.Model, prompt, output, req.LongCache)
	est.CostUSD = usd
	m.mu.Lock()
	defer m.mu.Unlock()
	spent := m.total.Add(m.reserved)
	b := m.budget
	switch {
	case b.MaxTokens > 0 && spent.TotalTokens+est.TotalTokens > b.MaxTokens:
		return Tally{}, &BudgetError{Limit: LimitTokens, Max: float64(b.MaxTokens), Spent: float64(spent.TotalTokens),
			Estimate: float64(est.TotalTokens), Model: req.Model}
	case b.MaxCostUSD > 0 && !priced:
		return Tally{}, &BudgetError{Limit: LimitCostUSD, Max: b.MaxCostUSD, Spent: spent.CostUSD, Model: req.Model, Unpriced: true}
	case b.MaxCostUSD > 0 && spent.CostUSD+est.CostUSD > b.MaxCostUSD:
		return Tally{}, &BudgetError{Limit: LimitCostUSD, Max: b.MaxCostUSD, Spent: spent.CostUSD, Estimate: est.CostUSD, Model: req.Model}
	}
	if m.observe != nil {
		if err := m.observe(m.total, m.reserved.Add(est)); err != nil {
			return Tally{}, fmt.Errorf("record what model calls spent: %w", err)
		}
	}
	m.reserved = m.reserved.Add(est)
	return est, nil
}
