package llm

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

func TestPricesLookup(t *testing.T) {
	p := DefaultPrices()
	for _, tt := range []struct {
		model string
		want  Price
		known bool
	}{
		{"gpt-4.1", openaiPrice(2, 8, 0.5), true},
		{"gpt-4.1-2025-04-14", openaiPrice(2, 8, 0.5), true}, // dated OpenAI snapshot
		{"gpt-4.1-mini", openaiPrice(0.4, 1.6, 0.1), true},   // its own entry, not gpt-4.1's
		{"gpt-4.1-mini-2025-04-14", openaiPrice(0.4, 1.6, 0.1), true},
		{"claude-sonnet-4-5-20250929", anthropicPrice(3, 15), true}, // dated Anthropic snapshot
		{"claude-3-5-haiku-latest", anthropicPrice(0.8, 4), true},
		{"claude-opus-4-20250514", anthropicPrice(15, 75), true},
		{"gpt-5.2-codex", openaiPrice(1.75, 14, 0.175), true},
		{"gpt-4.1-turbo", Price{}, false}, // no prefix guessing
		{"gpt-4", Price{}, false},
		{"qwen2.5-coder:7b", Price{}, false},
		{"gpt-4.1-2025-04", Price{}, false}, // not a date
		{"", Price{}, false},
	} {
		got, ok := p.Lookup(tt.model)
		if got != tt.want || ok != tt.known {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tt.model, got, ok, tt.want, tt.known)
		}
	}
	if _, ok := (*Prices)(nil).Lookup("gpt-4.1"); ok {
		t.Error("a nil table knows a price")
	}
}

func TestCost(t *testing.T) {
	p := DefaultPrices()
	for _, tt := range []struct {
		model string
		u     Usage
		usd   float64
		known bool
	}{
		{"gpt-4.1", Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 10, true},
		{"claude-sonnet-4-5", Usage{PromptTokens: 1000, CompletionTokens: 500}, 0.0105, true},
		{"gpt-4o-mini", Usage{}, 0, true},
		{"local-model", Usage{PromptTokens: 1000}, 0, false},
	} {
		usd, known := p.Cost(tt.model, tt.u)
		if math.Abs(usd-tt.usd) > 1e-12 || known != tt.known {
			t.Errorf("Cost(%q, %+v) = %v, %v; want %v, %v", tt.model, tt.u, usd, known, tt.usd, tt.known)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadPrices(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{"prices": {
		"gpt-4.1": {"input_per_mtok": 1, "output_per_mtok": 4},
		"qwen2.5-coder:7b": {"input_per_mtok": 0, "output_per_mtok": 0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]Price{"gpt-4.1": {1, 4, 1, 1, 1}, "gpt-4.1-2025-04-14": {1, 4, 1, 1, 1}, "qwen2.5-coder:7b": {}, "o3": openaiPrice(2, 8, 0.5)} {
		if got, ok := p.Lookup(model); !ok || got != want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", model, got, ok, want)
		}
	}
	if got, _ := DefaultPrices().Lookup("gpt-4.1"); got != openaiPrice(2, 8, 0.5) {
		t.Error("loading a file changed the built-in table")
	}

	for _, tt := range []struct{ name, content, want string }{
		{"not JSON", `prices`, "invalid character"},
		{"unknown top field", `{"prices": {}, "currency": "EUR"}`, `unknown field "currency"`},
		{"missing prices", `{}`, `missing "prices"`},
		{"prices not an object", `{"prices": []}`, `"prices" must be an object`},
		{"unknown price field", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached": 0.1}}}`, `model "m": json: unknown field "cached"`},
		{"missing output", `{"prices": {"m": {"input_per_mtok": 1}}}`, `model "m": missing output_per_mtok`},
		{"negative", `{"prices": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}`, `model "m": input_per_mtok is -1`},
		{"string price", `{"prices": {"m": {"input_per_mtok": "1", "output_per_mtok": 1}}}`, `model "m"`},
		{"duplicate", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1}, "m": {"input_per_mtok": 2, "output_per_mtok": 2}}}`, `model "m" is listed twice`},
		{"empty name", `{"prices": {"": {"input_per_mtok": 1, "output_per_mtok": 1}}}`, `model name "" is empty`},
		{"space in name", `{"prices": {"gpt 4": {"input_per_mtok": 1, "output_per_mtok": 1}}}`, `has whitespace`},
		{"trailing data", `{"prices": {}} {}`, "trailing data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.content)
			_, err := LoadPrices(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want %q and the path", err, tt.want)
			}
		})
	}
	if _, err := LoadPrices(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read prices") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestEstimateTokens(t *testing.T) {
	req := Request{Model: "m", Messages: []Message{{Role: "system", Content: strings.Repeat("a", 300)}, {Role: "user", Content: strings.Repeat("b", 301)}}}
	if p, o := EstimateTokens(req); p != 2*messageOverhead+201 || o != DefaultOutputEstimate {
		t.Errorf("EstimateTokens = %d, %d", p, o)
	}
	req.MaxOutputTokens = 1000
	req.Schema = map[string]any{"type": "object"} // {"type":"object"}: 17 bytes
	if p, o := EstimateTokens(req); p != 2*messageOverhead+206 || o != 1000 {
		t.Errorf("EstimateTokens with schema and budget = %d, %d", p, o)
	}
}

// fakeModel answers with fixed usage, counting calls.
type fakeModel struct {
	mu    sync.Mutex
	calls int
	usage Usage
	model string // reported
	err   error
	gate  chan struct{} // when set, each call waits for a value
}

func (f *fakeModel) Complete(ctx context.Context, req Request) (Response, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return Response{}, f.err
	}
	return Response{Content: "{}", Model: f.model, Usage: f.usage}, nil
}

// smallReq estimates at 2·8 + 1 prompt and 100 output tokens: 117.
func smallReq(model string) Request {
	return Request{Model: model, MaxOutputTokens: 100, Messages: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}}
}

func TestBudget(t *testing.T) {
	usage := Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200} // gpt-4.1: $0.0036
	tests := []struct {
		name    string
		model   string
		budget  Budget
		allowed int // calls that go through before the refusal
		want    *BudgetError
	}{
		{"no limits", "gpt-4.1", Budget{}, 5, nil},
		{"tokens: room for two", "gpt-4.1", Budget{MaxTokens: 2*1200 + 116}, 2,
			&BudgetError{Limit: LimitTokens, Max: 2516, Spent: 2400, Estimate: 117, Model: "gpt-4.1"}},
		{"tokens: an exact fit is allowed", "gpt-4.1", Budget{MaxTokens: 117}, 1,
			&BudgetError{Limit: LimitTokens, Max: 117, Spent: 1200, Estimate: 117, Model: "gpt-4.1"}},
		{"tokens: the estimate alone is too much", "gpt-4.1", Budget{MaxTokens: 116}, 0,
			&BudgetError{Limit: LimitTokens, Max: 116, Spent: 0, Estimate: 117, Model: "gpt-4.1"}},
		{"cost: room for one", "gpt-4.1", Budget{MaxCostUSD: 0.004}, 1,
			&BudgetError{Limit: LimitCostUSD, Max: 0.004, Spent: 0.0036, Estimate: 0.000834, Model: "gpt-4.1"}},
		{"cost of an unpriced model", "local-model", Budget{MaxCostUSD: 10}, 0,
			&BudgetError{Limit: LimitCostUSD, Max: 10, Model: "local-model", Unpriced: true}},
		{"tokens only: an unpriced model is fine", "local-model", Budget{MaxTokens: 1_000_000}, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fm := &fakeModel{usage: usage}
			m := NewMeter(fm, DefaultPrices(), tt.budget)
			var err error
			n := 0
			for ; n < 5; n++ {
				if _, err = m.Complete(context.Background(), smallReq(tt.model)); err != nil {
					break
				}
			}
			if n != tt.allowed || fm.calls != tt.allowed {
				t.Errorf("%d calls allowed, %d reached the model; want %d", n, fm.calls, tt.allowed)
			}
			var be *BudgetError
			if tt.want == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want a *BudgetError", err)
			}
			if diff := cmp.Diff(tt.want, be, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Errorf("BudgetError (-want +got):\n%s", diff)
			}
			if !strings.Contains(err.Error(), "no request was sent") {
				t.Errorf("message: %v", err)
			}
		})
	}
}

func TestBudgetEnforceable(t *testing.T) {
	p := DefaultPrices()
	if err := (Budget{MaxCostUSD: 1}).Enforceable(p, "gpt-4.1", "claude-sonnet-4-5-20250929"); err != nil {
		t.Error(err)
	}
	if err := (Budget{MaxTokens: 10}).Enforceable(p, "local"); err != nil {
		t.Errorf("a token budget needs no price: %v", err)
	}
	err := (Budget{MaxCostUSD: 1}).Enforceable(p, "gpt-4.1", "local")
	if err == nil || !strings.Contains(err.Error(), `model "local": it has no price`) {
		t.Errorf("err = %v", err)
	}
}

func TestMeterTallies(t *testing.T) {
	fm := &fakeModel{usage: Usage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500}}
	m := NewMeter(fm, DefaultPrices(), Budget{})
	ctx := context.Background()
	m.Complete(ctx, smallReq("gpt-4.1"))
	snap := m.Snapshot()
	m.Complete(ctx, smallReq("claude-sonnet-4-5"))
	fm.model = "gpt-4.1-2025-04-14"
	m.Complete(ctx, smallReq("my-alias")) // priced by the model the server reported
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })
	want := Tally{Calls: 2, PromptTokens: 2000, CompletionTokens: 1000, TotalTokens: 3000, CostUSD: 0.0105 + 0.006}
	if diff := cmp.Diff(want, m.Since(snap), approx); diff != "" {
		t.Errorf("Since (-want +got):\n%s", diff)
	}
	if c := m.Snapshot().Cost(); c == nil || math.Abs(*c-(0.006+0.0105+0.006)) > 1e-12 {
		t.Errorf("total cost = %v", c)
	}

	fm.model = ""
	snap = m.Snapshot()
	m.Complete(ctx, smallReq("local-model"))
	d := m.Since(snap)
	if d.CostKnown() || d.Cost() != nil || d.UnpricedCalls != 1 || m.Snapshot().CostKnown() {
		t.Errorf("unpriced call: %+v", d)
	}
	// A failed call with no usage costs nothing, even without a price.
	fm.err = errors.New("boom")
	snap = m.Snapshot()
	if _, err := m.Complete(ctx, smallReq("local-model")); err == nil {
		t.Fatal("the error was lost")
	}
	if d := m.Since(snap); d != (Tally{Calls: 1}) {
		t.Errorf("failed call: %+v", d)
	}
}

// Calls in flight hold their estimate: two concurrent calls that fit the
// budget only one at a time cannot both start.
func TestMeterConcurrent(t *testing.T) {
	fm := &fakeModel{usage: Usage{TotalTokens: 10}, gate: make(chan struct{})}
	m := NewMeter(fm, nil, Budget{MaxTokens: 200}) // one estimate (117) fits, two do not
	first := make(chan error)
	go func() {
		_, err := m.Complete(context.Background(), smallReq("m"))
		first <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		held := m.reserved.TotalTokens
		m.mu.Unlock()
		if held > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var be *BudgetError
	if _, err := m.Complete(context.Background(), smallReq("m")); !errors.As(err, &be) || be.Spent != 117 {
		t.Errorf("second call while the first is in flight: err = %v", err)
	}
	fm.gate <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	fm.gate = nil
	if _, err := m.Complete(context.Background(), smallReq("m")); err != nil {
		t.Errorf("after the first returned (10 spent): %v", err)
	}

	// Many goroutines: the totals add up (run with -race).
	m = NewMeter(&fakeModel{usage: Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}}, DefaultPrices(), Budget{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Complete(context.Background(), smallReq("gpt-4.1"))
		}()
	}
	wg.Wait()
	if got := m.Snapshot(); got.Calls != 50 || got.TotalTokens != 150 {
		t.Errorf("totals = %+v", got)
	}
}

// The budget refuses before a request reaches the server, for each client.
func TestMeterRefusesBeforeTheServer(t *testing.T) {
	budget := Budget{MaxTokens: 120 + DefaultOutputEstimate} // room for one call, not two
	t.Run("openai", func(t *testing.T) {
		srv := llmtest.Start(t, llmtest.Reply{Content: "{}"}, llmtest.Reply{Content: "{}"})
		m := NewMeter(client(srv.URL), DefaultPrices(), budget)
		if _, err := m.Complete(context.Background(), request()); err != nil {
			t.Fatal(err)
		}
		var be *BudgetError
		if _, err := m.Complete(context.Background(), request()); !errors.As(err, &be) || be.Spent != 120 {
			t.Fatalf("err = %v", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests reached the server, want 1", n)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: "a"}, llmtest.AnthropicReply{Content: "b"})
		m := NewMeter(anthropicClient(srv.URL, &sleeps{}), DefaultPrices(), budget)
		if _, err := m.Complete(context.Background(), request()); err != nil {
			t.Fatal(err)
		}
		var be *BudgetError
		if _, err := m.Complete(context.Background(), request()); !errors.As(err, &be) {
			t.Fatalf("err = %v", err)
		}
		if n := len(srv.Requests()); n != 1 || srv.Remaining() != 1 {
			t.Errorf("%d requests reached the server, want 1", n)
		}
	})
}

// A replayed answer counts its recorded usage, and a refused call does not
// consume the transcript.
func TestMeterReplay(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Reply{Content: "{}"})
	path := filepath.Join(t.TempDir(), "t.jsonl")
	rec := &Recorder{Model: client(srv.URL), Path: path}
	if _, err := rec.Complete(context.Background(), smallReq("gpt-4.1")); err != nil {
		t.Fatal(err)
	}
	rep, err := LoadReplayer(path)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMeter(rep, DefaultPrices(), Budget{MaxTokens: 100}) // below one estimate
	var be *BudgetError
	if _, err := m.Complete(context.Background(), smallReq("gpt-4.1")); !errors.As(err, &be) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	m = NewMeter(rep, DefaultPrices(), Budget{})
	if _, err := m.Complete(context.Background(), smallReq("gpt-4.1")); err != nil {
		t.Fatalf("the refused call consumed the transcript: %v", err)
	}
	if got := m.Snapshot(); got.TotalTokens != 120 || got.Calls != 1 || !got.CostKnown() || got.CostUSD <= 0 {
		t.Errorf("replayed tally = %+v", got)
	}
}

// A resumed meter counts the earlier spending against its budget, and an
// observer sees each call's estimate before it is sent and its usage after.
func TestMeterResumeAndObserve(t *testing.T) {
	fm := &fakeModel{usage: Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	m := NewMeter(fm, nil, Budget{MaxTokens: 1000})
	m.Resume(Tally{Calls: 3, TotalTokens: 800})
	type report struct{ spent, inFlight int64 }
	var got []report
	m.Observe(func(spent, inFlight Tally) error {
		got = append(got, report{spent.TotalTokens, inFlight.TotalTokens})
		return nil
	})
	req := smallReq("m")
	req.MaxOutputTokens = 100
	prompt, output := EstimateTokens(req)
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want := []report{{800, prompt + output}, {815, 0}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(report{})); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	// 815 spent: a call that could take 100+ more does not fit 1000 once the
	// earlier spending counts.
	req.MaxOutputTokens = 190
	var budget *BudgetError
	if _, err := m.Complete(context.Background(), req); !errors.As(err, &budget) || budget.Spent != 815 || fm.calls != 1 {
		t.Errorf("err = %v, spent %+v, calls %d; want a budget refusal at 815", err, budget, fm.calls)
	}
	// An observer that cannot record refuses the call before it is sent.
	m.Observe(func(Tally, Tally) error { return errors.New("disk full") })
	req.MaxOutputTokens = 1
	if _, err := m.Complete(context.Background(), req); err == nil || !strings.Contains(err.Error(), "disk full") || fm.calls != 1 {
		t.Errorf("err = %v, calls %d; want the call refused", err, fm.calls)
	}
}
