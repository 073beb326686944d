package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

func responsesClient(url string, progress *bytes.Buffer) *OpenAIResponses {
	cfg := ResponsesConfig{
		APIKey: "k", BaseURL: url,
		PollInterval: time.Millisecond, RetryBase: time.Millisecond, MaxWait: time.Minute,
	}
	if progress != nil {
		cfg.Progress = progress
	}
	return NewOpenAIResponses(cfg)
}

func planRequest() Request {
	r := withSchema(request())
	r.ReasoningEffort = "high"
	r.MaxOutputTokens = 1000
	return r
}

// completeWithin runs Complete and fails the test if it hangs.
func completeWithin(t *testing.T, ctx context.Context, m Model, req Request) (Response, error) {
	t.Helper()
	type result struct {
		resp Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := m.Complete(ctx, req)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-time.After(20 * time.Second):
		t.Fatal("Complete hangs")
		return Response{}, nil
	}
}

func TestResponsesPollsUntilCompleted(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{
		Statuses: []string{"queued", "in_progress", "completed"}, Content: `{"ok":true}`,
	})
	var progress bytes.Buffer
	resp, err := completeWithin(t, context.Background(), responsesClient(srv.URL, &progress), planRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := Response{
		Content: `{"ok":true}`, FinishReason: "completed", Model: "m",
		Usage: Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if srv.Polls() != 3 {
		t.Errorf("polls = %d, want 3", srv.Polls())
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d submissions, want 1", len(reqs))
	}
	body := reqs[0]
	wantBody := map[string]any{
		"model":             "m",
		"background":        true,
		"store":             true,
		"instructions":      "sys",
		"input":             []any{map[string]any{"role": "user", "content": "do the thing"}},
		"reasoning":         map[string]any{"effort": "high"},
		"max_output_tokens": 1000.0,
		"text": map[string]any{"format": map[string]any{
			"type": "json_schema", "name": "write_proposal", "strict": true,
			"schema": map[string]any{"type": "object", "additionalProperties": false},
		}},
	}
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("submission (-want +got):\n%s", diff)
	}
	for _, line := range []string{"resp_1 submitted (model m): queued", "resp_1: in_progress after", "resp_1: completed after"} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress.String())
		}
	}
	if n := strings.Count(progress.String(), "\n"); n != 3 {
		t.Errorf("progress has %d lines, want 3 (one per status change):\n%s", n, progress.String())
	}
}

func TestResponsesMinimalRequest(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "hi"})
	req := request()
	req.Messages = req.Messages[1:] // no system message
	resp, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), req)
	if err != nil || resp.Content != "hi" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	body := srv.Requests()[0]
	for _, absent := range []string{"instructions", "reasoning", "max_output_tokens", "text", "temperature"} {
		if v, ok := body[absent]; ok {
			t.Errorf("unset %s sent as %v", absent, v)
		}
	}

	srv = llmtest.StartResponses(t, llmtest.ResponsesReply{Content: "hi"})
	req.Temperature = 0.5
	if _, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), req); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0]["temperature"]; got != 0.5 {
		t.Errorf("temperature = %v, want 0.5", got)
	}

	req.Messages = append(req.Messages, Message{Role: "assistant", Content: "x"})
	if _, err := responsesClient(srv.URL, nil).Complete(context.Background(), req); err == nil || !strings.Contains(err.Error(), `"assistant"`) {
		t.Errorf("err = %v, want the unsupported role named", err)
	}
}

func TestResponsesRetriesTransportErrors(t *testing.T) {
	tests := []struct {
		name        string
		reply       llmtest.ResponsesReply
		submissions int
	}{
		{name: "503 on submit", reply: llmtest.ResponsesReply{HTTPErrors: []int{503}}, submissions: 2},
		{name: "429 502 504 on submit", reply: llmtest.ResponsesReply{HTTPErrors: []int{429, 502, 504}}, submissions: 4},
		{name: "dropped connection on submit", reply: llmtest.ResponsesReply{HTTPErrors: []int{llmtest.DropConnection}}, submissions: 2},
		{name: "errors on polls", reply: llmtest.ResponsesReply{PollErrors: []int{503, llmtest.DropConnection, 429}}, submissions: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.reply.Statuses = []string{"in_progress", "completed"}
			tt.reply.Content = "done"
			srv := llmtest.StartResponses(t, tt.reply)
			var progress bytes.Buffer
			resp, err := completeWithin(t, context.Background(), responsesClient(srv.URL, &progress), planRequest())
			if err != nil || resp.Content != "done" {
				t.Fatalf("resp = %+v, err = %v", resp, err)
			}
			if n := len(srv.Requests()); n != tt.submissions {
				t.Errorf("%d submissions, want %d", n, tt.submissions)
			}
			if !strings.Contains(progress.String(), "retry 1 of 3") {
				t.Errorf("progress does not report the retry:\n%s", progress.String())
			}
		})
	}
}

func TestResponsesGivesUpAfterThreeRetries(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{HTTPErrors: []int{503, 503, 503, 503}, Content: "never"})
	_, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), planRequest())
	if pe, ok := AsProviderError(err); !ok || pe.Kind != KindServerError || !strings.Contains(err.Error(), "scripted HTTP 503") || !strings.Contains(err.Error(), "4 attempts") {
		t.Fatalf("err = %v, want the server's message and the attempt count", err)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("%d submissions, want 4", n)
	}
	if srv.Remaining() != 1 {
		t.Error("the response was created after all")
	}
}

func TestResponsesDoesNotRetryOtherErrors(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{HTTPErrors: []int{400}, Content: "never"})
	_, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), planRequest())
	if pe, ok := AsProviderError(err); !ok || pe.Kind != KindBadRequest || !strings.Contains(err.Error(), "scripted HTTP 400") || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("err = %v, want the server's message without retries", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d submissions, want 1", n)
	}
}

func TestResponsesConnectionRefused(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL + "/v1"
	ts.Close()
	var progress bytes.Buffer
	_, err := completeWithin(t, context.Background(), responsesClient(url, &progress), planRequest())
	pe, ok := AsProviderError(err)
	if !ok || pe.Kind != KindUnreachable || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "--llm-base-url") {
		t.Fatalf("err = %v, want an unreachable server naming %s and --llm-base-url", err, url)
	}
	if strings.Contains(progress.String(), "retry ") {
		t.Errorf("a refused connection was retried:\n%s", progress.String())
	}
}

func TestResponsesIncompleteDoublesBudgetOnce(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		want   float64
	}{
		{name: "set budget", budget: 1000, want: 2000},
		{name: "default budget", budget: 0, want: 2 * DefaultMaxOutputTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.StartResponses(t,
				llmtest.ResponsesReply{Statuses: []string{"in_progress", "incomplete"}, Incomplete: "max_output_tokens", Content: `{"trunc`},
				llmtest.ResponsesReply{Content: `{"ok":true}`},
			)
			req := planRequest()
			req.MaxOutputTokens = tt.budget
			resp, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != `{"ok":true}` || resp.FinishReason != "completed" {
				t.Errorf("resp = %+v", resp)
			}
			wantNote := []string{fmt.Sprintf("max_output_tokens doubled to %d", int64(tt.want))}
			if diff := cmp.Diff(wantNote, resp.Degraded); diff != "" {
				t.Errorf("degraded (-want +got):\n%s", diff)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 || reqs[1]["max_output_tokens"] != tt.want {
				t.Fatalf("retry asked for max_output_tokens %v, want %v", reqs[len(reqs)-1]["max_output_tokens"], tt.want)
			}
			if tt.budget > 0 && reqs[0]["max_output_tokens"] != float64(tt.budget) {
				t.Errorf("first submission asked for %v", reqs[0]["max_output_tokens"])
			}
		})
	}
}

func TestResponsesIncompleteTwiceFails(t *testing.T) {
	incomplete := llmtest.ResponsesReply{Statuses: []string{"incomplete"}, Incomplete: "max_output_tokens", Content: "partial"}
	srv := llmtest.StartResponses(t, incomplete, incomplete)
	_, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), planRequest())
	if err == nil || !strings.Contains(err.Error(), "resp_2") || !strings.Contains(err.Error(), "incomplete (max_output_tokens) at max_output_tokens 2000") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d submissions, want 2", n)
	}
}

func TestResponsesIncompleteForOtherReasonFails(t *testing.T) {
	srv := llmtest.StartResponses(t,
		llmtest.ResponsesReply{Statuses: []string{"incomplete"}, Incomplete: "content_filter"},
		llmtest.ResponsesReply{Content: "never"},
	)
	_, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), planRequest())
	if err == nil || !strings.Contains(err.Error(), "content_filter") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d submissions, want 1", n)
	}
}

func TestResponsesFailedAndCancelled(t *testing.T) {
	srv := llmtest.StartResponses(t,
		llmtest.ResponsesReply{Statuses: []string{"queued", "failed"}, Error: "the model exploded"},
		llmtest.ResponsesReply{Statuses: []string{"cancelled"}},
	)
	c := responsesClient(srv.URL, nil)
	_, err := completeWithin(t, context.Background(), c, planRequest())
	if err == nil || !strings.Contains(err.Error(), "the model exploded") || !strings.Contains(err.Error(), "resp_1") {
		t.Errorf("failed: err = %v, want the server's message", err)
	}
	_, err = completeWithin(t, context.Background(), c, planRequest())
	if err == nil || !strings.Contains(err.Error(), "resp_2") || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestResponsesMaxWait(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Statuses: []string{"queued", "in_progress"}})
	c := NewOpenAIResponses(ResponsesConfig{
		APIKey: "k", BaseURL: srv.URL,
		PollInterval: time.Millisecond, RetryBase: time.Millisecond, MaxWait: 50 * time.Millisecond,
	})
	_, err := completeWithin(t, context.Background(), c, planRequest())
	if err == nil || !strings.Contains(err.Error(), "resp_1") || !strings.Contains(err.Error(), "still in_progress") ||
		!strings.Contains(err.Error(), "max wait") || !strings.Contains(err.Error(), "cancel requested") {
		t.Fatalf("err = %v, want the id, last status and max wait named", err)
	}
	if diff := cmp.Diff([]string{"resp_1"}, srv.Cancels()); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
}

func TestResponsesContextCanceledDuringPolling(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Statuses: []string{"in_progress"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for srv.Polls() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := completeWithin(t, ctx, responsesClient(srv.URL, nil), planRequest())
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resp_1") {
		t.Fatalf("err = %v, want context.Canceled naming the response", err)
	}
	if diff := cmp.Diff([]string{"resp_1"}, srv.Cancels()); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
}

func TestResponsesContextCanceledDuringBackoff(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{HTTPErrors: []int{503, 503}})
	c := NewOpenAIResponses(ResponsesConfig{APIKey: "k", BaseURL: srv.URL, RetryBase: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(srv.Requests()) < 1 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := completeWithin(t, ctx, c, planRequest()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestResponsesHeartbeat(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{Statuses: []string{"queued", "queued", "queued", "completed"}})
	var progress bytes.Buffer
	c := responsesClient(srv.URL, &progress)
	c.heartbeat = time.Nanosecond
	if _, err := completeWithin(t, context.Background(), c, planRequest()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "resp_1: still queued after"); n != 3 {
		t.Errorf("%d heartbeat lines, want 3:\n%s", n, progress.String())
	}
}

func TestResponsesRecordThenReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	srv := llmtest.StartResponses(t,
		llmtest.ResponsesReply{Statuses: []string{"incomplete"}, Incomplete: "max_output_tokens"},
		llmtest.ResponsesReply{Statuses: []string{"in_progress", "completed"}, Content: "plan"},
		llmtest.ResponsesReply{Statuses: []string{"failed"}, Error: "nope"},
	)
	rec := &Recorder{Model: responsesClient(srv.URL, nil), Path: path}
	r1, r2 := planRequest(), planRequest()
	r2.Messages[1].Content = "second"
	first, err := completeWithin(t, context.Background(), rec, r1)
	if err != nil || first.Content != "plan" {
		t.Fatalf("record 1: %v %+v", err, first)
	}
	if _, err := completeWithin(t, context.Background(), rec, r2); err == nil {
		t.Fatal("record 2: want the server's error")
	}

	rep, err := LoadReplayer(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rep.Complete(context.Background(), r1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("replay 1 (-recorded +replayed):\n%s", diff)
	}
	if _, err := rep.Complete(context.Background(), r2); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("replay 2: err = %v, want the recorded failure", err)
	}
	r3 := planRequest()
	r3.ReasoningEffort = "low"
	rep, _ = LoadReplayer(path)
	var mismatch *ReplayMismatchError
	if _, err := rep.Complete(context.Background(), r3); !errors.As(err, &mismatch) {
		t.Fatalf("replay with another reasoning effort: err = %v, want a mismatch", err)
	}
}

func TestRequestHashOmitsUnsetBudgetAndEffort(t *testing.T) {
	// Transcripts recorded before these fields existed must still match.
	a := request()
	b := request()
	b.ReasoningEffort, b.MaxOutputTokens = "", 0
	if a.Hash() != b.Hash() {
		t.Fatal("zero fields change the hash")
	}
	b.ReasoningEffort = "high"
	if a.Hash() == b.Hash() {
		t.Fatal("hash ignores reasoning effort")
	}
	b.ReasoningEffort, b.MaxOutputTokens = "", 10
	if a.Hash() == b.Hash() {
		t.Fatal("hash ignores max output tokens")
	}
}

func TestOpenAIChatPassesBudgetAndEffort(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Reply{Content: "{}"}, llmtest.Reply{Content: "{}"})
	if _, err := client(srv.URL).Complete(context.Background(), planRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := client(srv.URL).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if reqs[0]["reasoning_effort"] != "high" || reqs[0]["max_completion_tokens"] != 1000.0 {
		t.Errorf("request = %v", reqs[0])
	}
	for _, k := range []string{"reasoning_effort", "max_completion_tokens"} {
		if _, ok := reqs[1][k]; ok {
			t.Errorf("unset %s sent", k)
		}
	}
}
