package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/llmtest"
)

// sleeps records the retry waits a client asked for, without waiting.
type sleeps struct {
	mu  sync.Mutex
	got []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, d)
	return nil
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.got...)
}

func chatClient(url string, s *sleeps) *OpenAIChat {
	return NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: url, Timeout: 20 * time.Second, RetryBase: 100 * time.Millisecond, Sleep: s.sleep})
}

func apiError(status int, code, msg string) llmtest.Reply {
	return llmtest.Reply{Status: status, Body: fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","code":%q}}`, msg, code)}
}

func TestChatRetriesTransientFailures(t *testing.T) {
	busy := apiError(503, "", "busy")
	tests := []struct {
		name    string
		replies []llmtest.Reply
		waits   []time.Duration
	}{
		{
			name: "429 with Retry-After in seconds, twice",
			replies: []llmtest.Reply{
				{Status: 429, Body: `{"error":{"message":"slow down"}}`, Header: map[string]string{"Retry-After": "2"}},
				{Status: 429, Body: `{"error":{"message":"slow down"}}`, Header: map[string]string{"Retry-After": "7"}},
			},
			waits: []time.Duration{2 * time.Second, 7 * time.Second},
		},
		{
			name:    "429 with retry-after-ms",
			replies: []llmtest.Reply{{Status: 429, Body: `{"error":{"message":"slow down"}}`, Header: map[string]string{"Retry-After-Ms": "1500"}}},
			waits:   []time.Duration{1500 * time.Millisecond},
		},
		{
			name:    "Retry-After is capped",
			replies: []llmtest.Reply{{Status: 429, Body: `{}`, Header: map[string]string{"Retry-After": "3600"}}},
			waits:   []time.Duration{MaxRetryWait},
		},
		{
			name:    "503 three times: exponential backoff",
			replies: []llmtest.Reply{busy, busy, busy},
			waits:   []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		},
		{
			name:    "503 with Retry-After",
			replies: []llmtest.Reply{{Status: 503, Body: `{}`, Header: map[string]string{"Retry-After": "3"}}},
			waits:   []time.Duration{3 * time.Second},
		},
		{
			name:    "500 502 504",
			replies: []llmtest.Reply{apiError(500, "", "x"), apiError(502, "", "x"), apiError(504, "", "x")},
			waits:   []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		},
		{
			name:    "408",
			replies: []llmtest.Reply{apiError(408, "", "x")},
			waits:   []time.Duration{100 * time.Millisecond},
		},
		{
			name:    "dropped connection",
			replies: []llmtest.Reply{{Status: llmtest.DropConnection}},
			waits:   []time.Duration{100 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.Start(t, append(tt.replies, llmtest.Reply{Content: "{}"})...)
			var s sleeps
			resp, err := chatClient(srv.URL, &s).Complete(context.Background(), request())
			if err != nil || resp.Content != "{}" {
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

func TestChatGivesUpAfterThreeRetries(t *testing.T) {
	tests := []struct {
		name  string
		reply llmtest.Reply
		kind  ProviderErrorKind
		want  string
	}{
		{"503", apiError(503, "", "overloaded"), KindServerError, "keeps failing (HTTP 503, gave up after 4 attempts): try again later; the server said: overloaded"},
		{"429", apiError(429, "rate_limit_exceeded", "slow down"), KindRateLimited, "still rate-limiting requests (HTTP 429, gave up after 4 attempts)"},
		{"dropped connection", llmtest.Reply{Status: llmtest.DropConnection}, KindConnectionLost, "keeps dropping (gave up after 4 attempts)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.Start(t, tt.reply, tt.reply, tt.reply, tt.reply, llmtest.Reply{Content: "never"})
			var s sleeps
			_, err := chatClient(srv.URL, &s).Complete(context.Background(), request())
			pe, ok := AsProviderError(err)
			if !ok || pe.Kind != tt.kind || pe.Attempts != 4 || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (%+v), want %s after 4 attempts and %q", err, pe, tt.kind, tt.want)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("%d requests, want 4", n)
			}
		})
	}
}

func TestChatTimeoutIsRetried(t *testing.T) {
	slow := llmtest.Reply{Content: "late", Delay: 5 * time.Second}
	srv := llmtest.Start(t, slow, slow, llmtest.Reply{Content: "{}"})
	var s sleeps
	c := NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: srv.URL, Timeout: 100 * time.Millisecond, Sleep: s.sleep})
	resp, err := c.Complete(context.Background(), request())
	if err != nil || resp.Content != "{}" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	if diff := cmp.Diff([]time.Duration{DefaultRetryBase, 2 * DefaultRetryBase}, s.waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestChatProviderErrorsFailAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		reply  llmtest.Reply
		kind   ProviderErrorKind
		want   []string
		absent string // text of the server that must not be shown
	}{
		{
			name:  "401",
			reply: apiError(401, "invalid_api_key", "Incorrect API key provided: sk-abc***xyz"),
			kind:  KindUnauthorized, want: []string{"rejected the API key (HTTP 401): check OPENAI_API_KEY"}, absent: "sk-abc",
		},
		{
			name:  "403",
			reply: apiError(403, "", "Project does not have access to model m"),
			kind:  KindUnauthorized, want: []string{"HTTP 403", "OPENAI_API_KEY", `"m"`}, absent: "Project",
		},
		{
			name:  "404 unknown model",
			reply: apiError(404, "model_not_found", "The model `m` does not exist or you do not have access to it."),
			kind:  KindModelNotFound, want: []string{`does not know model "m" (HTTP 404): check --llm-model`},
		},
		{
			name:  "400 unknown model (Ollama, LM Studio)",
			reply: apiError(400, "", `model "m" not found, try pulling it first`),
			kind:  KindModelNotFound, want: []string{"--llm-model"},
		},
		{
			name:  "404 wrong path",
			reply: llmtest.Reply{Status: 404, Body: "404 page not found"},
			kind:  KindEndpointNotFound, want: []string{"--llm-base-url", "/v1"},
		},
		{
			name:  "400 context_length_exceeded",
			reply: apiError(400, "context_length_exceeded", "This model's maximum context length is 8192 tokens."),
			kind:  KindContextTooLong, want: []string{`the context is too long for model "m" (HTTP 400 context_length_exceeded)`},
		},
		{
			name:  "400 context length without a code (vLLM)",
			reply: apiError(400, "", "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."),
			kind:  KindContextTooLong, want: []string{"the context is too long"},
		},
		{
			name:  "429 insufficient_quota",
			reply: apiError(429, "insufficient_quota", "You exceeded your current quota"),
			kind:  KindQuotaExceeded, want: []string{"quota", "OPENAI_API_KEY"},
		},
		{
			name:  "other 400",
			reply: apiError(400, "invalid_value", "Invalid value for 'n'"),
			kind:  KindBadRequest, want: []string{`rejected the request for model "m" (HTTP 400 invalid_value); the server said: Invalid value for 'n'`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.Start(t, tt.reply, llmtest.Reply{Content: "never"})
			var s sleeps
			_, err := chatClient(srv.URL, &s).Complete(context.Background(), request())
			pe, ok := AsProviderError(err)
			if !ok || pe.Kind != tt.kind || pe.Attempts != 1 || pe.URL != srv.URL {
				t.Fatalf("err = %v (%+v), want kind %s after 1 attempt", err, pe, tt.kind)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if tt.absent != "" && strings.Contains(msg, tt.absent) {
				t.Errorf("message %q shows the server's text %q", msg, tt.absent)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if len(srv.Requests()) != 1 || len(s.waits()) != 0 {
				t.Errorf("%d requests and waits %v, want 1 and none", len(srv.Requests()), s.waits())
			}
		})
	}
}

func TestChatClosedPort(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	base := ts.URL + "/v1"
	ts.Close()
	var s sleeps
	_, err := chatClient(base, &s).Complete(context.Background(), request())
	pe, ok := AsProviderError(err)
	if !ok || pe.Kind != KindUnreachable {
		t.Fatalf("err = %v, want an unreachable server", err)
	}
	want := "cannot connect to the model server at " + base + " (connection refused): check --llm-base-url"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want %q", err, want)
	}
	if len(s.waits()) != 0 {
		t.Errorf("a refused connection was retried: waits %v", s.waits())
	}
}

func TestClassifyConnectionFailures(t *testing.T) {
	op := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://h/v1/chat/completions", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	tests := []struct {
		name      string
		err       error
		kind      ProviderErrorKind
		transient bool
		reason    string
	}{
		{"dns", &url.Error{Op: "Post", URL: "http://nohost/v1", Err: &net.DNSError{Err: "no such host", Name: "nohost", IsNotFound: true}}, KindUnreachable, false, "host nohost not found"},
		{"refused", op(os.NewSyscallError("connect", syscall.ECONNREFUSED)), KindUnreachable, false, "connection refused"},
		{"reset", op(os.NewSyscallError("read", syscall.ECONNRESET)), KindConnectionLost, true, "connection reset by peer"},
		{"timeout", &url.Error{Op: "Post", URL: "http://h", Err: context.DeadlineExceeded}, KindTimeout, true, "request timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := classify(tt.err)
			if !ok || f.kind != tt.kind || f.transient != tt.transient {
				t.Fatalf("classify = %+v %v, want %s transient=%v", f, ok, tt.kind, tt.transient)
			}
			if got := transportReason(tt.err); !strings.Contains(got, tt.reason) {
				t.Errorf("reason = %q, want %q", got, tt.reason)
			}
		})
	}
	for _, err := range []error{context.Canceled, fmt.Errorf("read body: %w", ErrReplyTooLarge), errors.New("decode: bad json")} {
		if f, ok := classify(err); ok {
			t.Errorf("classify(%v) = %+v, want not the provider's", err, f)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "5"}, 5 * time.Second, true},
		{"fraction", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{"milliseconds first", map[string]string{"Retry-After-Ms": "250", "Retry-After": "5"}, 250 * time.Millisecond, true},
		{"HTTP date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second, true},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"huge seconds do not overflow", map[string]string{"Retry-After": "1e30"}, MaxRetryWait, true},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"none", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("retryAfter = %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestReplyOverCapIsRefused(t *testing.T) {
	huge := strings.Repeat("x", MaxReplyBytes)
	srv := llmtest.Start(t, llmtest.Reply{Content: huge}, llmtest.Reply{Content: "never"})
	var s sleeps
	_, err := chatClient(srv.URL, &s).Complete(context.Background(), request())
	if !errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), "larger than 8 MiB") {
		t.Fatalf("err = %v, want ErrReplyTooLarge", err)
	}
	if _, ok := AsProviderError(err); ok {
		t.Error("an oversized reply is the model's answer, not a provider failure")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (not retried)", n)
	}

	rsrv := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: huge})
	_, err = completeWithin(t, context.Background(), responsesClient(rsrv.URL, nil), planRequest())
	if !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("responses: err = %v, want ErrReplyTooLarge", err)
	}
}

func TestReplyAtCapIsRead(t *testing.T) {
	body := strings.Repeat("y", 100)
	c := &cappedBody{ReadCloser: io.NopCloser(strings.NewReader(body)), left: 100}
	buf := make([]byte, 1000)
	var got int
	for {
		n, err := c.Read(buf)
		got += n
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v after %d bytes, want EOF", err, got)
			}
			break
		}
	}
	if got != 100 {
		t.Errorf("read %d bytes, want 100", got)
	}
}

func TestResponsesProviderErrorFailsAtOnce(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{HTTPErrors: []int{401}, Content: "never"})
	_, err := completeWithin(t, context.Background(), responsesClient(srv.URL, nil), planRequest())
	pe, ok := AsProviderError(err)
	if !ok || pe.Kind != KindUnauthorized || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("err = %v, want unauthorized naming OPENAI_API_KEY", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d submissions, want 1", n)
	}
}

func TestResponsesBackoffUsesInjectedSleep(t *testing.T) {
	srv := llmtest.StartResponses(t, llmtest.ResponsesReply{HTTPErrors: []int{503, 503}, Content: "ok"})
	var s sleeps
	c := NewOpenAIResponses(ResponsesConfig{APIKey: "k", BaseURL: srv.URL, PollInterval: time.Millisecond, RetryBase: 10 * time.Second, Sleep: s.sleep})
	if resp, err := completeWithin(t, context.Background(), c, planRequest()); err != nil || resp.Content != "ok" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	if diff := cmp.Diff([]time.Duration{10 * time.Second, 20 * time.Second}, s.waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestProviderErrorSurvivesRecordAndReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	srv := llmtest.Start(t, apiError(401, "", "bad key"))
	var s sleeps
	rec := &Recorder{Model: chatClient(srv.URL, &s), Path: path}
	_, recErr := rec.Complete(context.Background(), request())
	if _, ok := AsProviderError(recErr); !ok {
		t.Fatalf("record: err = %v, want a ProviderError", recErr)
	}
	rep, err := LoadReplayer(path)
	if err != nil {
		t.Fatal(err)
	}
	_, repErr := rep.Complete(context.Background(), request())
	pe, ok := AsProviderError(repErr)
	if !ok || pe.Kind != KindUnauthorized || repErr.Error() != recErr.Error() {
		t.Fatalf("replay: err = %v, want the recorded %v", repErr, recErr)
	}
}
