package llm

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

func request() Request {
	return Request{
		Model: "m", Temperature: 0,
		Messages: []Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "do the thing"}},
	}
}

func withSchema(r Request) Request {
	r.SchemaName = "write_proposal"
	r.Schema = map[string]any{"type": "object", "additionalProperties": false}
	return r
}

func client(url string) *OpenAIChat {
	return NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: url, Timeout: 20 * time.Second, Sleep: noSleep})
}

// noSleep skips retry waits.
func noSleep(context.Context, time.Duration) error { return nil }

func TestOpenAIChat(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Reply{Content: `{"ok":true}`})
	resp, err := client(srv.URL).Complete(context.Background(), withSchema(request()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != `{"ok":true}` || resp.Usage.TotalTokens != 120 || resp.FinishReason != "stop" || len(resp.Degraded) != 0 {
		t.Errorf("resp = %+v", resp)
	}
	got := srv.Requests()[0]
	rf, _ := got["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["strict"] != true || js["name"] != "write_proposal" {
		t.Errorf("response_format = %v", rf)
	}
	if got["temperature"] != 0.0 || got["model"] != "m" {
		t.Errorf("request = %v", got)
	}
}

func TestOpenAIChatDegrades(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		dropped  []string
		absent   string
		degrades bool
	}{
		{name: "response_format refused", body: `{"error":{"message":"response_format json_schema is not supported"}}`, dropped: []string{"response_format"}, absent: "response_format", degrades: true},
		{name: "temperature refused", body: `{"error":{"message":"Unsupported value: 'temperature' does not support 0"}}`, dropped: []string{"temperature"}, absent: "temperature", degrades: true},
		{name: "other 400 is an error", body: `{"error":{"message":"'n' must be 1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Reply{Status: 400, Body: tt.body}, llmtest.Reply{Content: "{}"})
			resp, err := client(srv.URL).Complete(context.Background(), withSchema(request()))
			if !tt.degrades {
				if pe, ok := AsProviderError(err); !ok || pe.Kind != KindBadRequest || !strings.Contains(err.Error(), "'n' must be 1") {
					t.Fatalf("err = %v, want the server's message", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.dropped, resp.Degraded); diff != "" {
				t.Errorf("degraded (-want +got):\n%s", diff)
			}
			if _, ok := srv.Requests()[1][tt.absent]; ok {
				t.Errorf("retry still sent %s", tt.absent)
			}
		})
	}
}

func TestRecordThenReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	srv := llmtest.Start(t, llmtest.Reply{Content: "first"}, llmtest.Reply{Status: 400, Body: `{"error":{"message":"nope"}}`})
	rec := &Recorder{Model: client(srv.URL), Path: path}
	r1, r2 := request(), request()
	r2.Messages[1].Content = "second"
	if resp, err := rec.Complete(context.Background(), r1); err != nil || resp.Content != "first" {
		t.Fatalf("record 1: %v %+v", err, resp)
	}
	if _, err := rec.Complete(context.Background(), r2); err == nil {
		t.Fatal("record 2: want the server's error")
	}

	rep, err := LoadReplayer(path)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := rep.Complete(context.Background(), r1); err != nil || resp.Content != "first" || resp.Usage.TotalTokens != 120 {
		t.Fatalf("replay 1: %v %+v", err, resp)
	}
	if _, err := rep.Complete(context.Background(), r2); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("replay 2: err = %v, want the recorded failure", err)
	}
	var mismatch *ReplayMismatchError
	if _, err := rep.Complete(context.Background(), r1); !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "request #3") || !strings.Contains(err.Error(), "only 2 exchange") {
		t.Fatalf("replay 3: err = %v, want exhausted transcript", err)
	}
}

func TestReplayMismatchNamesFirstDifference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	srv := llmtest.Start(t, llmtest.Reply{Content: "x"})
	if _, err := (&Recorder{Model: client(srv.URL), Path: path}).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Request)
		want string
	}{
		{name: "model", edit: func(r *Request) { r.Model = "other" }, want: `model is "other", recorded "m"`},
		{name: "temperature", edit: func(r *Request) { r.Temperature = 0.5 }, want: "temperature is 0.5"},
		{name: "reasoning effort", edit: func(r *Request) { r.ReasoningEffort = "high" }, want: `reasoning_effort is "high"`},
		{name: "output budget", edit: func(r *Request) { r.MaxOutputTokens = 10 }, want: "max_output_tokens is 10"},
		{name: "message", edit: func(r *Request) { r.Messages[1].Content = "do the other thing" }, want: "messages[1].content differs at byte 7"},
		{name: "schema", edit: func(r *Request) { *r = withSchema(*r) }, want: "schema_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := LoadReplayer(path)
			if err != nil {
				t.Fatal(err)
			}
			req := request()
			tt.edit(&req)
			_, err = rep.Complete(context.Background(), req)
			var mismatch *ReplayMismatchError
			if !errors.As(err, &mismatch) || mismatch.Seq != 1 || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want request #1 and %q", err, tt.want)
			}
		})
	}
}

// A replay matches a request that differs from the recorded one only in
// the durations commands printed (a failure's output in the prompt); any
// other difference, digits included, is still a mismatch.
func TestReplayIgnoresOnlyDurations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	srv := llmtest.Start(t, llmtest.Reply{Content: "x"})
	recorded := request()
	recorded.Messages[1].Content = "exit 1:\nRan 1 test in 0.021s\n--- FAIL: TestAdd (0.01s)\nok  calc 1.5s (12.3ms, 40µs)\nFAILED (errors=1)"
	if _, err := (&Recorder{Model: client(srv.URL), Path: path}).Complete(context.Background(), recorded); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, content string
		match         bool
	}{
		{"other durations", "exit 1:\nRan 1 test in 0.000s\n--- FAIL: TestAdd (2.50s)\nok  calc 17s (9ms, 1µs)\nFAILED (errors=1)", true},
		{"another count", "exit 1:\nRan 2 tests in 0.021s\n--- FAIL: TestAdd (0.01s)\nok  calc 1.5s (12.3ms, 40µs)\nFAILED (errors=1)", false},
		{"another exit code", "exit 2:\nRan 1 test in 0.021s\n--- FAIL: TestAdd (0.01s)\nok  calc 1.5s (12.3ms, 40µs)\nFAILED (errors=1)", false},
		{"a duration for a word", "exit 1:\nRan 1 test in 0.021s\n--- FAIL: TestAdd (0.01s)\nok  calc 1.5s (12.3ms, 40µs)\nFAILED (errors=1s)", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := LoadReplayer(path)
			if err != nil {
				t.Fatal(err)
			}
			req := request()
			req.Messages[1].Content = tt.content
			_, err = rep.Complete(context.Background(), req)
			if (err == nil) != tt.match {
				t.Errorf("err = %v, want a match: %v", err, tt.match)
			}
		})
	}
}

func TestLoadReplayerRejectsBadTranscripts(t *testing.T) {
	tests := map[string]string{
		"not json":        "{nope\n",
		"unknown field":   `{"seq":1,"request_sha256":"x","request":{},"response":{"content":""},"extra":1}` + "\n",
		"neither outcome": `{"seq":1,"request_sha256":"x","request":{}}` + "\n",
		"hash mismatch":   `{"seq":1,"request_sha256":"x","request":{},"response":{"content":""}}` + "\n",
		"both outcomes":   `{"seq":1,"request_sha256":"x","request":{},"response":{"content":""},"error":"e"}` + "\n",
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.jsonl")
			os.WriteFile(path, []byte(content), 0o644)
			if _, err := LoadReplayer(path); err == nil || !strings.Contains(err.Error(), "line 1") {
				t.Errorf("err = %v, want an error naming line 1", err)
			}
		})
	}
	if _, err := LoadReplayer(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("missing transcript: want an error")
	}
}

func TestRequestHashIsStable(t *testing.T) {
	a, b := withSchema(request()), withSchema(request())
	if a.Hash() != b.Hash() || len(a.Hash()) != 64 {
		t.Fatalf("hash not stable: %s %s", a.Hash(), b.Hash())
	}
	b.Messages[0].Content += " "
	if a.Hash() == b.Hash() {
		t.Fatal("hash ignores message content")
	}
}

// Both clients share clientOptions; neither may forward what the SDK reads
// from the environment on its own.
func TestClientsSendNoAmbientHeaders(t *testing.T) {
	t.Setenv("OPENAI_ORG_ID", "org-private")
	t.Setenv("OPENAI_PROJECT_ID", "proj-private")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	tests := []struct {
		name string
		call func(t *testing.T) http.Header
	}{
		{"chat completions", func(t *testing.T) http.Header {
			srv := llmtest.Start(t, llmtest.Reply{Content: "{}"})
			c := NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: srv.URL, CustomHeaders: "X-Leak: yes"})
			if _, err := c.Complete(context.Background(), request()); err != nil {
				t.Fatal(err)
			}
			return srv.Header(0)
		}},
		{"responses", func(t *testing.T) http.Header {
			srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "{}"})
			c := NewOpenAIResponses(ResponsesConfig{APIKey: "k", BaseURL: srv.URL, CustomHeaders: "X-Leak: yes", PollInterval: time.Millisecond})
			if _, err := completeWithin(t, context.Background(), c, request()); err != nil {
				t.Fatal(err)
			}
			return srv.Header(0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.call(t)
			for _, name := range []string{"OpenAI-Organization", "OpenAI-Project", "X-Leak"} {
				if v := h.Get(name); v != "" {
					t.Errorf("header %s = %q sent to the server", name, v)
				}
			}
			if h.Get("Authorization") != "Bearer k" {
				t.Errorf("Authorization = %q", h.Get("Authorization"))
			}
		})
	}
}
