package llm

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

// segmented is an SE-style request: a system prompt and a user turn in
// three cache segments (shared, the order's own, the volatile tail).
func segmented() Request {
	return Request{
		Model: "m", CacheKey: "factory-abc",
		Messages: []Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "shared\n"}, {Role: "user", Content: "order\n"}, {Role: "user", Content: "tail\n"},
		},
	}
}

// costOf meters one call of req on model with the built-in prices.
func costOf(t *testing.T, m Model, req Request) Tally {
	t.Helper()
	meter := NewMeter(m, DefaultPrices(), Budget{})
	if _, err := meter.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return meter.Snapshot()
}

func wantCost(t *testing.T, got Tally, want float64) {
	t.Helper()
	if math.Abs(got.CostUSD-want) > 1e-12 || !got.CostKnown() {
		t.Errorf("cost_usd = %.10f (known %v), want %.10f", got.CostUSD, got.CostKnown(), want)
	}
}

// Each provider's cached tokens are read and priced part by part: uncached
// input, cache reads, cache writes, output.
func TestCachedTokensPriced(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		srv := llmtest.Start(t, llmtest.Reply{Content: "ok", PromptTokens: 2000, CachedTokens: 1536})
		req := segmented()
		req.Model = "gpt-4.1"
		got := costOf(t, client(srv.URL), req)
		want := Tally{Calls: 1, PromptTokens: 2000, CompletionTokens: 20, TotalTokens: 2020, CachedInputTokens: 1536}
		if diff := cmp.Diff(want, got, cmpIgnoreCost); diff != "" {
			t.Errorf("tally (-want +got):\n%s", diff)
		}
		wantCost(t, got, (464*2.00+1536*0.50+20*8.00)/1e6)
	})
	t.Run("chat cache writes", func(t *testing.T) {
		srv := llmtest.Start(t, llmtest.Reply{Content: "ok", PromptTokens: 2000, CachedTokens: 1000, CacheWriteTokens: 500})
		p := DefaultPrices()
		p.models["w"] = Price{InputPerMTok: 1, OutputPerMTok: 2, CachedInputPerMTok: 0.1, CacheWritePerMTok: 1.25}
		req := segmented()
		req.Model = "w"
		meter := NewMeter(client(srv.URL), p, Budget{})
		if _, err := meter.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		wantCost(t, meter.Snapshot(), (500*1+1000*0.1+500*1.25+20*2)/1e6)
	})
	t.Run("responses", func(t *testing.T) {
		srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "ok", InputTokens: 3000, CachedTokens: 2048})
		req := segmented()
		req.Model = "gpt-5"
		got := costOf(t, responsesClient(srv.URL, nil), req)
		if got.CachedInputTokens != 2048 || got.PromptTokens != 3000 {
			t.Errorf("tally = %+v", got)
		}
		wantCost(t, got, (952*1.25+2048*0.125+20*10.00)/1e6)
	})
	t.Run("anthropic streamed", func(t *testing.T) {
		srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: "ok", InputTokens: 50, OutputTokens: 20,
			CacheReadTokens: 3000, CacheWriteTokens: 1000})
		req := segmented()
		req.Model = "claude-sonnet-4-5"
		got := costOf(t, anthropicClient(srv.URL, &sleeps{}), req)
		want := Tally{Calls: 1, PromptTokens: 4050, CompletionTokens: 20, TotalTokens: 4070, CachedInputTokens: 3000, CacheWriteTokens: 1000}
		if diff := cmp.Diff(want, got, cmpIgnoreCost); diff != "" {
			t.Errorf("tally (-want +got):\n%s", diff)
		}
		wantCost(t, got, (50*3.00+3000*0.30+1000*3.75+20*15.00)/1e6)
	})
	t.Run("anthropic 1-hour writes", func(t *testing.T) {
		srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: "ok", InputTokens: 50, OutputTokens: 20,
			CacheReadTokens: 3000, CacheWriteTokens: 1000, CacheWrite1hTokens: 800})
		req := segmented()
		req.Model, req.LongCache = "claude-sonnet-4-5", true
		var resp Response
		meter := NewMeter(modelFunc(func(ctx context.Context, req Request) (Response, error) {
			r, err := anthropicClient(srv.URL, &sleeps{}).Complete(ctx, req)
			resp = r
			return r, err
		}), DefaultPrices(), Budget{})
		if _, err := meter.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if resp.Usage.CacheWriteTokens != 1000 || resp.Usage.CacheWrite1hTokens != 800 {
			t.Errorf("usage = %+v, want 1000 cache writes of which 800 with the 1-hour TTL", resp.Usage)
		}
		wantCost(t, meter.Snapshot(), (50*3.00+3000*0.30+200*3.75+800*6.00+20*15.00)/1e6)
	})
	t.Run("anthropic writes not broken down", func(t *testing.T) {
		for _, long := range []bool{false, true} {
			srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: "ok", InputTokens: 50, OutputTokens: 20,
				CacheWriteTokens: 1000, NoCacheBreakdown: true})
			req := segmented()
			req.Model, req.LongCache = "claude-sonnet-4-5", long
			write := 3.75 // the TTL the request asked for
			if long {
				write = 6.00
			}
			wantCost(t, costOf(t, anthropicClient(srv.URL, &sleeps{}), req), (50*3.00+1000*write+20*15.00)/1e6)
		}
	})
	t.Run("no cache reported", func(t *testing.T) {
		srv := llmtest.Start(t, llmtest.Reply{Content: "ok"})
		req := segmented()
		req.Model = "gpt-4.1"
		wantCost(t, costOf(t, client(srv.URL), req), (100*2.00+20*8.00)/1e6)
	})
}

var cmpIgnoreCost = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "CostUSD" }, cmp.Ignore())

// The OpenAI clients send the build's prompt_cache_key and the user
// segments as one message, byte for byte their concatenation.
func TestOpenAICacheKeyAndJoinedSegments(t *testing.T) {
	chat := llmtest.Start(t, llmtest.Reply{Content: "ok"})
	if _, err := client(chat.URL).Complete(context.Background(), segmented()); err != nil {
		t.Fatal(err)
	}
	got := chat.Requests()[0]
	if got["prompt_cache_key"] != "factory-abc" {
		t.Errorf("chat prompt_cache_key = %v", got["prompt_cache_key"])
	}
	want := []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": "shared\norder\ntail\n"}}
	if diff := cmp.Diff(want, got["messages"]); diff != "" {
		t.Errorf("chat messages (-want +got):\n%s", diff)
	}

	resp := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "ok"})
	if _, err := responsesClient(resp.URL, nil).Complete(context.Background(), segmented()); err != nil {
		t.Fatal(err)
	}
	sub := resp.Requests()[0]
	if sub["prompt_cache_key"] != "factory-abc" {
		t.Errorf("responses prompt_cache_key = %v", sub["prompt_cache_key"])
	}
	if input, _ := sub["input"].([]any); len(input) != 1 {
		t.Errorf("responses input = %v, want one message", sub["input"])
	}

	noKey := segmented()
	noKey.CacheKey = ""
	chat2 := llmtest.Start(t, llmtest.Reply{Content: "ok"})
	if _, err := client(chat2.URL).Complete(context.Background(), noKey); err != nil {
		t.Fatal(err)
	}
	if _, ok := chat2.Requests()[0]["prompt_cache_key"]; ok {
		t.Error("a request without a cache key sent prompt_cache_key")
	}
}

// breakpoints lists where an Anthropic request body has cache_control,
// each of which must be want.
func breakpoints(req, want map[string]any) []string {
	var at []string
	mark := func(where string, block any) {
		if b, _ := block.(map[string]any); b["cache_control"] != nil {
			if diff := cmp.Diff(want, b["cache_control"]); diff != "" {
				at = append(at, where+" (bad: "+diff+")")
				return
			}
			at = append(at, where)
		}
	}
	tools, _ := req["tools"].([]any)
	for _, b := range tools {
		mark("tool", b)
	}
	sys, _ := req["system"].([]any)
	for _, b := range sys {
		mark("system", b)
	}
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		content, _ := m.(map[string]any)["content"].([]any)
		for _, b := range content {
			text, _ := b.(map[string]any)["text"].(string)
			mark(strings.TrimSpace(text), b)
		}
	}
	return at
}

// Anthropic gets cache_control at the end of the system prompt and of each
// user segment but the last, never more than four; with the 1-hour TTL for
// a long cache, else with none (the default 5 minutes).
func TestAnthropicCacheBreakpoints(t *testing.T) {
	long := segmented()
	long.LongCache = true
	many := segmented()
	for i := range 6 {
		many.Messages = append(many.Messages, Message{Role: "user", Content: strings.Repeat("x", i+1) + "\n"})
	}
	single := request()
	single.SchemaName, single.Schema = "write_proposal", proposalSchema()
	short := map[string]any{"type": "ephemeral"}
	for _, tt := range []struct {
		name string
		req  Request
		want []string
		cc   map[string]any
	}{
		{"segments", segmented(), []string{"system", "shared", "order"}, short},
		{"long cache", long, []string{"system", "shared", "order"}, map[string]any{"type": "ephemeral", "ttl": "1h"}},
		{"one user message", single, []string{"system"}, short},
		{"too many segments", many, []string{"system", "xxx", "xxxx", "xxxxx"}, short},
		{"no system", Request{Model: "m", Messages: []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}}, []string{"a"}, short},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: `{"summary":"x"}`})
			if _, err := anthropicClient(srv.URL, &sleeps{}).Complete(context.Background(), tt.req); err != nil {
				t.Fatal(err)
			}
			got := breakpoints(srv.Requests()[0], tt.cc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("breakpoints (-want +got):\n%s", diff)
			}
			if len(got) > MaxCacheBreakpoints {
				t.Errorf("%d breakpoints, the API accepts %d", len(got), MaxCacheBreakpoints)
			}
			msgs, _ := srv.Requests()[0]["messages"].([]any)
			if len(msgs) != 1 {
				t.Errorf("%d messages, want the user segments as one turn", len(msgs))
			}
		})
	}
}

// The pre-call estimate assumes no cache hit, at the dearest of the
// uncached and cache-write prices, the 1-hour one for a long cache.
func TestEstimateAssumesNoCacheHit(t *testing.T) {
	p := DefaultPrices()
	for _, tt := range []struct {
		model string
		long  bool
		want  float64
	}{
		{"claude-sonnet-4-5", false, (1000*3.75 + 100*15.0) / 1e6},
		{"claude-sonnet-4-5", true, (1000*6.0 + 100*15.0) / 1e6},
		{"gpt-4.1", false, (1000*2.0 + 100*8.0) / 1e6},
		{"gpt-4.1", true, (1000*2.0 + 100*8.0) / 1e6},
	} {
		if got, ok := p.Estimate(tt.model, 1000, 100, tt.long); !ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Estimate(%s, long %v) = %v, want %v", tt.model, tt.long, got, tt.want)
		}
	}
}

// The OpenAI clients ask for the extended retention ("24h") only for a
// long cache and a model that has it; otherwise they send no
// prompt_cache_retention.
func TestOpenAICacheRetention(t *testing.T) {
	for _, tt := range []struct {
		model string
		long  bool
		want  any
	}{
		{"gpt-4.1", true, "24h"},
		{"gpt-5.1-2025-11-13", true, "24h"}, // a snapshot of a model that has it
		{"gpt-4.1", false, nil},
		{"gpt-4.1-mini", true, nil},
		{"qwen2.5-coder:7b", true, nil},
	} {
		t.Run(fmt.Sprintf("%s long %v", tt.model, tt.long), func(t *testing.T) {
			req := segmented()
			req.Model, req.LongCache = tt.model, tt.long
			chat := llmtest.Start(t, llmtest.Reply{Content: "ok"})
			if _, err := client(chat.URL).Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			resp := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "ok"})
			if _, err := responsesClient(resp.URL, nil).Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			for api, body := range map[string]map[string]any{"chat": chat.Requests()[0], "responses": resp.Requests()[0]} {
				if got := body["prompt_cache_retention"]; got != tt.want {
					t.Errorf("%s prompt_cache_retention = %v, want %v", api, got, tt.want)
				}
			}
		})
	}
}

// A prices file may set the cache prices; without them cached input costs
// what uncached input does, and 1-hour writes what other writes do. The new
// fields are decoded as strictly as the others.
func TestLoadPricesCacheFields(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{"prices": {
		"a": {"input_per_mtok": 1, "output_per_mtok": 4, "cached_input_per_mtok": 0.1, "cache_write_per_mtok": 1.25},
		"b": {"input_per_mtok": 2, "output_per_mtok": 8, "cached_input_per_mtok": 0},
		"c": {"input_per_mtok": 3, "output_per_mtok": 9},
		"d": {"input_per_mtok": 1, "output_per_mtok": 4, "cached_input_per_mtok": 0.1, "cache_write_per_mtok": 1.25, "cache_write_1h_per_mtok": 2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]Price{"a": {1, 4, 0.1, 1.25, 1.25}, "b": {2, 8, 0, 2, 2}, "c": {3, 9, 3, 3, 3}, "d": {1, 4, 0.1, 1.25, 2}} {
		if got, _ := p.Lookup(model); got != want {
			t.Errorf("Lookup(%q) = %+v, want %+v", model, got, want)
		}
	}
	u := Usage{PromptTokens: 1000, CachedInputTokens: 600, CacheWriteTokens: 300, CompletionTokens: 10}
	if got, _ := p.Cost("a", u); math.Abs(got-(100*1+600*0.1+300*1.25+10*4)/1e6) > 1e-15 {
		t.Errorf("Cost(a) = %v", got)
	}
	if got, _ := p.Cost("c", u); math.Abs(got-(1000*3+10*9)/1e6) > 1e-15 {
		t.Errorf("Cost(c) = %v: without cache prices, cached input costs what input does", got)
	}
	u.CacheWrite1hTokens = 200
	if got, _ := p.Cost("d", u); math.Abs(got-(100*1+600*0.1+100*1.25+200*2+10*4)/1e6) > 1e-15 {
		t.Errorf("Cost(d) = %v: 1-hour writes at cache_write_1h_per_mtok", got)
	}
	for _, tt := range []struct{ name, content, want string }{
		{"negative cached", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": -0.1}}}`, `model "m": cached_input_per_mtok is -0.1`},
		{"huge write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_per_mtok": 1e9}}}`, `model "m": cache_write_per_mtok is 1e+09`},
		{"string cached", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": "0.1"}}}`, `model "m"`},
		{"null write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_per_mtok": null}}}`, ``},
		{"misspelt", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_read_per_mtok": 0.1}}}`, `unknown field "cache_read_per_mtok"`},
		{"negative 1h write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1h_per_mtok": -2}}}`, `model "m": cache_write_1h_per_mtok is -2; want a price from 0 to 1e+06`},
		{"huge 1h write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1h_per_mtok": 2e6}}}`, `model "m": cache_write_1h_per_mtok is 2e+06`},
		{"string 1h write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1h_per_mtok": "2"}}}`, `model "m": json: cannot unmarshal string`},
		{"null 1h write", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1h_per_mtok": null}}}`, ``},
		{"misspelt 1h", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1hr_per_mtok": 2}}}`, `unknown field "cache_write_1hr_per_mtok"`},
		{"repeated 1h", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_1h_per_mtok": 2, "cache_write_1h_per_mtok": 3}}}`, `model "m": cache_write_1h_per_mtok appears twice`},
		{"repeated", `{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": 0.1, "cached_input_per_mtok": 0.2}}}`, `appears twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.content)
			_, err := LoadPrices(path)
			if tt.want == "" {
				if err != nil {
					t.Errorf("err = %v, want none (null is absent)", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want %q and the path", err, tt.want)
			}
		})
	}
}
