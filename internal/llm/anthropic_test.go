package llm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

func anthropicClient(url string, s *sleeps) *Anthropic {
	return NewAnthropic(AnthropicConfig{APIKey: "ak", BaseURL: url, Timeout: 20 * time.Second, RetryBase: 100 * time.Millisecond, Sleep: s.sleep})
}

func proposalSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"summary"},
		"properties":           map[string]any{"summary": map[string]any{"type": "string"}},
	}
}

// An SE-style request: the schema becomes one forced tool and the tool
// call's input comes back as the content.
func TestAnthropicSchemaAsForcedTool(t *testing.T) {
	srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: `{"summary":"héllo wörld"}`, InputTokens: 300, OutputTokens: 40})
	req := request()
	req.SchemaName, req.Schema = "write_proposal", proposalSchema()
	resp, err := anthropicClient(srv.URL, &sleeps{}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{Content: `{"summary":"héllo wörld"}`, FinishReason: "stop", Model: "m",
		Usage: Usage{PromptTokens: 300, CompletionTokens: 40, TotalTokens: 340}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	got := srv.Requests()[0]
	wantReq := map[string]any{
		"model": "m", "max_tokens": float64(DefaultAnthropicMaxTokens), "temperature": 0.0, "stream": true,
		"system":   []any{map[string]any{"type": "text", "text": "sys", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "do the thing"}}}},
		"tools": []any{map[string]any{
			"name": "write_proposal", "description": "Reply by calling this tool; its input is the whole answer.",
			"input_schema": map[string]any{
				"type": "object", "additionalProperties": false, "required": []any{"summary"},
				"properties": map[string]any{"summary": map[string]any{"type": "string"}},
			},
		}},
		"tool_choice": map[string]any{"type": "tool", "name": "write_proposal"},
	}
	if diff := cmp.Diff(wantReq, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	h := srv.Header(0)
	if h.Get("X-Api-Key") != "ak" || h.Get("Authorization") != "" || h.Get("Anthropic-Version") == "" {
		t.Errorf("headers: x-api-key %q, authorization %q, anthropic-version %q", h.Get("X-Api-Key"), h.Get("Authorization"), h.Get("Anthropic-Version"))
	}
}

// A planner-style request: one user message, a large output budget (which
// the SDK would refuse without streaming) and a reasoning effort, which is
// not sent.
func TestAnthropicPlannerStyle(t *testing.T) {
	srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: `{"work_orders":[]}`})
	req := Request{Model: "claude-sonnet-4-5", Messages: []Message{{Role: "user", Content: "plan this"}},
		ReasoningEffort: "medium", MaxOutputTokens: 64000, SchemaName: "plan", Schema: proposalSchema()}
	resp, err := anthropicClient(srv.URL, &sleeps{}).Complete(context.Background(), req)
	if err != nil || resp.Content != `{"work_orders":[]}` {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	got := srv.Requests()[0]
	if got["max_tokens"] != 64000.0 || got["system"] != nil || got["reasoning_effort"] != nil || got["thinking"] != nil || got["output_config"] != nil {
		t.Errorf("request = %v", got)
	}
}

func TestAnthropicText(t *testing.T) {
	tests := []struct {
		name  string
		reply llmtest.AnthropicReply
		want  Response
	}{
		{"end_turn", llmtest.AnthropicReply{Content: "plain answer"},
			Response{Content: "plain answer", FinishReason: "stop"}},
		{"cut off", llmtest.AnthropicReply{Content: "partial", StopReason: "max_tokens"},
			Response{Content: "partial", FinishReason: "length"}},
		{"refusal", llmtest.AnthropicReply{Content: "I can't help with that.", StopReason: "refusal"},
			Response{Content: "I can't help with that.", FinishReason: "content_filter", Refusal: "I can't help with that."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.StartAnthropic(t, tt.reply)
			resp, err := anthropicClient(srv.URL, &sleeps{}).Complete(context.Background(), request())
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Model, tt.want.Usage = "m", Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}
			if diff := cmp.Diff(tt.want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if got := srv.Requests()[0]; got["tools"] != nil || got["tool_choice"] != nil {
				t.Errorf("a request without a schema sent tools: %v", got)
			}
		})
	}
}

func TestAnthropicRetries(t *testing.T) {
	tests := []struct {
		name    string
		replies []llmtest.AnthropicReply
		waits   []time.Duration
	}{
		{"429 with retry-after", []llmtest.AnthropicReply{{Status: 429, ErrorType: "rate_limit_error", Message: "slow down", Header: map[string]string{"Retry-After": "2"}}},
			[]time.Duration{2 * time.Second}},
		{"529 overloaded twice", []llmtest.AnthropicReply{{Status: 529, ErrorType: "overloaded_error"}, {Status: 529, ErrorType: "overloaded_error"}},
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"overloaded in the middle of a stream", []llmtest.AnthropicReply{{Content: `{"x":1}`, StreamError: "overloaded_error"}},
			[]time.Duration{100 * time.Millisecond}},
		{"dropped connection", []llmtest.AnthropicReply{{Status: llmtest.DropConnection}},
			[]time.Duration{100 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.StartAnthropic(t, append(tt.replies, llmtest.AnthropicReply{Content: "done"})...)
			var s sleeps
			resp, err := anthropicClient(srv.URL, &s).Complete(context.Background(), request())
			if err != nil || resp.Content != "done" {
				t.Fatalf("resp = %+v, err = %v", resp, err)
			}
			if diff := cmp.Diff(tt.waits, s.waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if n := len(srv.Requests()); n != len(tt.replies)+1 {
				t.Errorf("%d requests, want %d", n, len(tt.replies)+1)
			}
		})
	}
}

// Every failure becomes a ProviderError whose one line names the cause and
// the fix, with Anthropic's variables in the hints.
func TestAnthropicErrors(t *testing.T) {
	rl := llmtest.AnthropicReply{Status: 429, ErrorType: "rate_limit_error", Message: "slow down"}
	ov := llmtest.AnthropicReply{Status: 529, ErrorType: "overloaded_error", Message: "Overloaded"}
	tests := []struct {
		name     string
		replies  []llmtest.AnthropicReply
		kind     ProviderErrorKind
		want     string
		attempts int
	}{
		{"401", []llmtest.AnthropicReply{{Status: 401, ErrorType: "authentication_error", Message: "invalid x-api-key"}},
			KindUnauthorized, "rejected the API key (HTTP 401): check ANTHROPIC_API_KEY", 1},
		{"403", []llmtest.AnthropicReply{{Status: 403, ErrorType: "permission_error", Message: "no access"}},
			KindUnauthorized, "check that the key in ANTHROPIC_API_KEY may use this model", 1},
		{"unknown model", []llmtest.AnthropicReply{{Status: 404, ErrorType: "not_found_error", Message: "model: claude-nope"}},
			KindModelNotFound, `does not know model "m" (HTTP 404): check --llm-model`, 1},
		{"prompt too long", []llmtest.AnthropicReply{{Status: 400, ErrorType: "invalid_request_error", Message: "prompt is too long: 212345 tokens > 200000 maximum"}},
			KindContextTooLong, `the context is too long for model "m" (HTTP 400 invalid_request_error)`, 1},
		{"request too large", []llmtest.AnthropicReply{{Status: 413, ErrorType: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}},
			KindContextTooLong, "the context is too long", 1},
		{"no credit", []llmtest.AnthropicReply{{Status: 400, ErrorType: "invalid_request_error", Message: "Your credit balance is too low to access the Anthropic API."}},
			KindQuotaExceeded, "check the billing of the key in ANTHROPIC_API_KEY", 1},
		{"other 400", []llmtest.AnthropicReply{{Status: 400, ErrorType: "invalid_request_error", Message: "temperature: range: 0..1"}},
			KindBadRequest, "the server said: temperature: range: 0..1", 1},
		{"rate limit exhausted", []llmtest.AnthropicReply{rl, rl, rl, rl},
			KindRateLimited, "still rate-limiting requests (HTTP 429, gave up after 4 attempts)", 4},
		{"overloaded exhausted", []llmtest.AnthropicReply{ov, ov, ov, ov},
			KindServerError, "keeps failing (HTTP 529, gave up after 4 attempts): try again later; the server said: Overloaded", 4},
		{"stream error exhausted", []llmtest.AnthropicReply{{StreamError: "overloaded_error"}, {StreamError: "overloaded_error"}, {StreamError: "overloaded_error"}, {StreamError: "api_error"}},
			KindServerError, "HTTP 500, gave up after 4 attempts", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.StartAnthropic(t, append(tt.replies, llmtest.AnthropicReply{Content: "never"})...)
			_, err := anthropicClient(srv.URL, &sleeps{}).Complete(context.Background(), request())
			pe, ok := AsProviderError(err)
			if !ok || pe.Kind != tt.kind || pe.Attempts != tt.attempts || pe.Provider != ProviderAnthropic || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (%+v), want %s after %d attempt(s) and %q", err, pe, tt.kind, tt.attempts, tt.want)
			}
			if strings.Contains(err.Error(), "OPENAI") {
				t.Errorf("an Anthropic error names OpenAI's variables: %v", err)
			}
		})
	}
	t.Run("wrong base URL", func(t *testing.T) {
		srv := llmtest.StartAnthropic(t)
		_, err := anthropicClient(srv.URL+"/v1", &sleeps{}).Complete(context.Background(), request())
		if pe, ok := AsProviderError(err); !ok || pe.Kind != KindEndpointNotFound || !strings.Contains(err.Error(), "check --llm-base-url") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		_, err := anthropicClient("http://127.0.0.1:1", &sleeps{}).Complete(context.Background(), request())
		want := "cannot connect to the model server at http://127.0.0.1:1 (connection refused): check --llm-base-url (or ANTHROPIC_BASE_URL)"
		if pe, ok := AsProviderError(err); !ok || pe.Kind != KindUnreachable || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})
}

// A max_tokens above the model's output limit is retried once at the limit
// the server names, and the drop is on record.
func TestAnthropicLowersMaxTokens(t *testing.T) {
	srv := llmtest.StartAnthropic(t,
		llmtest.AnthropicReply{Status: 400, ErrorType: "invalid_request_error",
			Message: "max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens for claude-opus-4-20250514"},
		llmtest.AnthropicReply{Content: "ok"})
	req := request()
	req.MaxOutputTokens = 64000
	var s sleeps
	resp, err := anthropicClient(srv.URL, &s).Complete(context.Background(), req)
	if err != nil || resp.Content != "ok" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	if diff := cmp.Diff([]string{"max_tokens lowered to 32000"}, resp.Degraded); diff != "" {
		t.Errorf("degraded (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1]["max_tokens"] != 32000.0 || len(s.waits()) != 0 {
		t.Errorf("requests %v, waits %v", reqs, s.waits())
	}
}
