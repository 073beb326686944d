package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz targets for what the provider layer reads from a model server: the
// replies of Chat Completions, Responses and Anthropic's streamed Messages,
// parsed by the real SDKs behind the real clients, served by one httptest
// server per target whose answers the fuzzer chooses.

// fuzzModel is the model every fuzzed request names, so that an error can
// be checked for naming it.
const fuzzModel = "fuzz-model"

// fuzzStatuses maps the fuzzer's status byte to an HTTP status; 200 is
// most of them, as the parsers of a successful reply are the target.
var fuzzStatuses = []int{200, 200, 200, 200, 200, 200, 400, 401, 403, 404, 413, 422, 429, 500, 503, 529}

func fuzzStatus(b byte) int { return fuzzStatuses[int(b)%len(fuzzStatuses)] }

// fuzzServer answers each path with what the current fuzz input says.
type fuzzServer struct {
	URL string
	// Client is the server's own, shared by every execution: a client per
	// execution (openai-go clones the default transport for each) keeps
	// its idle connections for 90 s, and at 150–200 executions a
	// second they use up the process's file descriptors, which stalls the
	// worker until the fuzzing engine takes it for hung.
	Client *http.Client
	mu     sync.Mutex
	// route returns the status, content type and body for a request; n is
	// how many requests this input has had so far.
	route func(r *http.Request, n int) (int, string, []byte)
	n     int
}

func startFuzzServer(f *testing.F) *fuzzServer {
	s := &fuzzServer{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		route, n := s.route, s.n
		s.n++
		s.mu.Unlock()
		status, ctype, body := route(r, n)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write(body)
	}))
	f.Cleanup(ts.Close)
	s.URL, s.Client = ts.URL, ts.Client()
	return s
}

func (s *fuzzServer) serve(route func(r *http.Request, n int) (int, string, []byte)) {
	s.mu.Lock()
	s.route, s.n = route, 0
	s.mu.Unlock()
}

// outcome is what Complete returned, comparable across runs.
type outcome struct {
	resp Response
	err  string
}

func run(t *testing.T, m Model, req Request) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := m.Complete(ctx, req)
	o := outcome{resp: resp}
	if err != nil {
		o.err = err.Error()
	}
	return o
}

// checkOutcome asserts what holds for every client: an error names the
// model or the server it came from and is one line; a reply has sane
// usage and valid UTF-8 (it came out of JSON).
func checkOutcome(t *testing.T, o, again outcome, url string) {
	t.Helper()
	if fmt.Sprintf("%#v", o) != fmt.Sprintf("%#v", again) {
		t.Fatalf("not deterministic:\n%#v\n%#v", o, again)
	}
	if o.err != "" {
		if !strings.Contains(o.err, fuzzModel) && !strings.Contains(o.err, url) {
			t.Fatalf("error names neither the model nor the server: %s", o.err)
		}
		if strings.Contains(o.err, "\n") {
			t.Fatalf("error is not one line: %q", o.err)
		}
		if o.resp.Content != "" || o.resp.Usage != (Usage{}) {
			t.Fatalf("error %q with a response %+v", o.err, o.resp)
		}
		return
	}
	u := o.resp.Usage
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 {
		t.Fatalf("negative usage accepted: %+v", u)
	}
	if !utf8.ValidString(o.resp.Content) || !utf8.ValidString(o.resp.Refusal) {
		t.Fatalf("reply text is not valid UTF-8: %q", o.resp.Content)
	}
}

func fuzzRequest(schema bool) Request {
	r := Request{Model: fuzzModel, Messages: []Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "do it"}}}
	if schema {
		r.SchemaName = "answer"
		r.Schema = map[string]any{"type": "object", "additionalProperties": false}
	}
	return r
}

// chatOracle is what a chat completion body says, read with encoding/json
// and nothing else.
type chatOracle struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzChatReply(f *testing.F) {
	for _, s := range []struct {
		status byte
		body   string
	}{
		{0, `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I assist you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`},
		{0, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"summary\":\"h\u00e9llo\",\"writes\":[]}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`},
		{0, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`},
		{0, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":"},"finish_reason":"length"}]}`},
		{0, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[]}`},
		{0, `{"choices":[{"message":{"content":5}}]}`},
		{0, `<html>bad gateway</html>`},
		{6, `{"error":{"message":"Invalid schema for response_format 'answer'","type":"invalid_request_error","param":"response_format","code":null}}`},
		{7, `{"error":{"message":"Incorrect API key provided: sk-xxx.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{9, `{"error":{"message":"The model 'fuzz-model' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{12, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{13, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`},
		{6, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
	} {
		f.Add(s.status, []byte(s.body), false)
		f.Add(s.status, []byte(s.body), true)
	}
	srv := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, statusByte byte, body []byte, schema bool) {
		status := fuzzStatus(statusByte)
		route := func(r *http.Request, n int) (int, string, []byte) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
				return 404, "application/json", []byte(`{"error":{"message":"no such endpoint"}}`)
			}
			return status, "application/json", body
		}
		c := NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client, Timeout: 20 * time.Second, Sleep: noSleep})
		req := fuzzRequest(schema)
		srv.serve(route)
		o := run(t, c, req)
		srv.serve(route)
		again := run(t, c, req)
		checkOutcome(t, o, again, srv.URL)
		if o.err != "" {
			return
		}
		if status/100 != 2 {
			t.Fatalf("HTTP %d accepted as a reply: %+v", status, o.resp)
		}
		var want chatOracle
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("a body encoding/json cannot read as a chat completion was accepted (%v): %+v", err, o.resp)
		}
		if len(want.Choices) == 0 {
			t.Fatalf("a reply without choices was accepted: %+v", o.resp)
		}
		c0 := want.Choices[0]
		got := o.resp
		if deref(c0.Message.Content) != got.Content || deref(c0.Message.Refusal) != got.Refusal ||
			c0.FinishReason != got.FinishReason || want.Model != got.Model ||
			want.Usage.PromptTokens != got.Usage.PromptTokens || want.Usage.CompletionTokens != got.Usage.CompletionTokens ||
			want.Usage.TotalTokens != got.Usage.TotalTokens {
			t.Fatalf("the client read the reply differently from encoding/json:\n got %+v\nwant %+v", got, want)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// responsesOracle is what a Responses API object says, read with
// encoding/json alone.
type responsesOracle struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Model  string `json:"model"`
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

func (r responsesOracle) text() (content, refusal string) {
	for _, item := range r.Output {
		if item.Type != "message" {
			continue
		}
		for _, part := range item.Content {
			switch part.Type {
			case "output_text":
				content += part.Text
			case "refusal":
				refusal += part.Refusal
			}
		}
	}
	return content, refusal
}

// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzResponsesReply(f *testing.F) {
	completed := `{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[{"type":"message","id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","status":"completed","role":"assistant","content":[{"type":"output_text","text":"{\"work_orders\":[]}","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123},"user":null,"metadata":{}}`
	queued := `{"id":"resp_1","object":"response","created_at":1,"status":"queued","model":"m","output":[]}`
	for _, s := range []struct {
		status      byte
		submit, get string
	}{
		{0, completed, ""},
		{0, queued, completed},
		{0, queued, `{"id":"resp_1","object":"response","status":"in_progress","model":"m","output":[]}`},
		{0, queued, `{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"m","output":[{"type":"reasoning","id":"rs_1","summary":[]}]}`},
		{0, queued, `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed."},"model":"m","output":[]}`},
		{0, `{"id":"resp_1","object":"response","status":"cancelled","model":"m","output":[]}`, ""},
		{0, `{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I cannot help."}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`, ""},
		{0, `{"id":"","object":"response","status":"queued"}`, ""},
		{0, `{"status":"weird"}`, ""},
		{0, `null`, ""},
		{0, queued, `null`},
		// Data after the object: the SDK decodes the first value only.
		{0, completed + `, "usage":{}}`, ""},
		{0, queued, completed + ` {}`},
		{6, `{"error":{"message":"Unsupported parameter: 'temperature'","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`, ""},
		{13, `{"error":{"message":"server error","type":"server_error"}}`, ""},
	} {
		f.Add(s.status, []byte(s.submit), []byte(s.get), false)
		f.Add(s.status, []byte(s.submit), []byte(s.get), true)
	}
	srv := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, statusByte byte, submit, get []byte, schema bool) {
		status := fuzzStatus(statusByte)
		route := func(r *http.Request, n int) (int, string, []byte) {
			switch {
			case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
				return status, "application/json", submit
			case r.Method == http.MethodGet && n <= 4: // one poll per submit attempt, at most
				return 200, "application/json", get
			}
			// Any further poll, and every cancel, ends the exchange.
			return 404, "application/json", []byte(`{"error":{"message":"no such response","type":"invalid_request_error","code":"not_found"}}`)
		}
		c := NewOpenAIResponses(ResponsesConfig{APIKey: "k", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client, PollInterval: time.Nanosecond,
			MaxWait: 20 * time.Second, Sleep: noSleep})
		req := fuzzRequest(schema)
		srv.serve(route)
		o := run(t, c, req)
		srv.serve(route)
		again := run(t, c, req)
		checkOutcome(t, o, again, srv.URL)
		if o.err != "" {
			return
		}
		if status/100 != 2 {
			t.Fatalf("HTTP %d accepted as a reply: %+v", status, o.resp)
		}
		// The answer is the submitted object if that was final, else the
		// polled one; either way encoding/json must read it the same.
		var want responsesOracle
		final := submit
		if err := json.Unmarshal(submit, &want); err != nil || !terminalStatus(want.Status) {
			final = get
		}
		want = responsesOracle{}
		if err := json.Unmarshal(final, &want); err != nil {
			t.Fatalf("a body encoding/json cannot read as a response was accepted (%v): %+v", err, o.resp)
		}
		if want.Status != "completed" {
			t.Fatalf("a response with status %q was accepted: %+v", want.Status, o.resp)
		}
		content, refusal := want.text()
		got := o.resp
		if content != got.Content || refusal != got.Refusal || want.Model != got.Model || got.FinishReason != "completed" ||
			want.Usage.InputTokens != got.Usage.PromptTokens || want.Usage.OutputTokens != got.Usage.CompletionTokens ||
			want.Usage.TotalTokens != got.Usage.TotalTokens {
			t.Fatalf("the client read the reply differently from encoding/json:\n got %+v\nwant %+v", got, want)
		}
	})
}

func terminalStatus(s string) bool { return s != "queued" && s != "in_progress" }

// anthropicOracle replays the server-sent events of a Messages stream with
// encoding/json: the text of the text blocks, the partial JSON of the
// first tool_use block, and whether the message was completed.
type anthropicOracle struct {
	text, toolInput string
	tool            bool
	stopReason      string
	sure            bool // the stream was regular enough to predict the content
}

func readAnthropicStream(body []byte) anthropicOracle {
	o := anthropicOracle{sure: true}
	var blocks []string // block types by index
	for _, ev := range bytes.Split(bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data, name []byte
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
			if n, ok := bytes.CutPrefix(line, []byte("event:")); ok {
				name = bytes.TrimPrefix(n, []byte(" "))
			}
		}
		if len(data) == 0 {
			continue
		}
		var e struct {
			Type         string `json:"type"`
			Index        *int   `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if json.Unmarshal(data, &e) != nil {
			o.sure = false
			continue
		}
		if string(name) != e.Type {
			// The SDK dispatches an event by its SSE name, not its data's
			// type: one without a matching name may be skipped.
			o.sure = false
		}
		switch e.Type {
		case "content_block_start":
			if e.Index == nil || *e.Index != len(blocks) {
				o.sure = false
				continue
			}
			blocks = append(blocks, e.ContentBlock.Type)
			if e.ContentBlock.Type == "text" {
				o.text += e.ContentBlock.Text
			}
		case "content_block_delta":
			if e.Index == nil || *e.Index < 0 || *e.Index >= len(blocks) {
				o.sure = false
				continue
			}
			switch {
			case e.Delta.Type == "text_delta" && blocks[*e.Index] == "text":
				o.text += e.Delta.Text
			case e.Delta.Type == "input_json_delta" && blocks[*e.Index] == "tool_use":
				o.toolInput += e.Delta.PartialJSON
				o.tool = true
			default:
				o.sure = false
			}
		case "message_delta":
			o.stopReason = e.Delta.StopReason
		case "message_start", "content_block_stop", "message_stop", "ping":
		default:
			o.sure = false
		}
	}
	return o
}

// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzAnthropicReply(f *testing.F) {
	sse := func(events ...string) string {
		var b strings.Builder
		for _, e := range events {
			var head struct{ Type string }
			json.Unmarshal([]byte(e), &head)
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", head.Type, e)
		}
		return b.String()
	}
	start := `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	textReply := sse(start,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"ping"}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" wörld"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
		`{"type":"message_stop"}`)
	toolReply := sse(start,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"answer","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"summary\": \"h"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"i\"}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
		`{"type":"message_stop"}`)
	for _, s := range []struct {
		status byte
		body   string
	}{
		{0, textReply},
		{0, toolReply},
		{0, sse(start, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
		{0, sse(start, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut"}}`)},
		{0, sse(start, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}}`,
			`{"type":"message_stop"}`)},
		{0, sse(start, `{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":0}}`, `{"type":"message_stop"}`)},
		{0, sse(`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,`+
			`"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":4000,"cache_creation_input_tokens":900,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":800}}}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5,"cache_creation_input_tokens":900}}`, `{"type":"message_stop"}`)},
		{0, sse(start, `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`)},
		{0, "data: {\"type\":\"message_start\"\n\n"},
		{6, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens for claude-opus-4-20250514"}}`},
		{7, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{15, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{13, `upstream connect error`},
	} {
		f.Add(s.status, []byte(s.body), false)
		f.Add(s.status, []byte(s.body), true)
	}
	srv := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, statusByte byte, body []byte, schema bool) {
		status := fuzzStatus(statusByte)
		route := func(r *http.Request, n int) (int, string, []byte) {
			if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
				return 404, "application/json", []byte(`{"type":"error","error":{"type":"not_found_error","message":"no such endpoint"}}`)
			}
			if status == 200 {
				return status, "text/event-stream", body
			}
			return status, "application/json", body
		}
		c := NewAnthropic(AnthropicConfig{APIKey: "k", BaseURL: srv.URL, HTTPClient: srv.Client, Timeout: 20 * time.Second, Sleep: noSleep})
		req := fuzzRequest(schema)
		srv.serve(route)
		o := run(t, c, req)
		srv.serve(route)
		again := run(t, c, req)
		checkOutcome(t, o, again, srv.URL)
		if o.err != "" {
			return
		}
		if status != 200 {
			t.Fatalf("HTTP %d accepted as a reply: %+v", status, o.resp)
		}
		want := readAnthropicStream(body)
		if want.stopReason == "" {
			t.Fatalf("a stream without a stop_reason was accepted: %+v", o.resp)
		}
		switch o.resp.FinishReason {
		case "stop", "length", "content_filter":
		default:
			t.Fatalf("finish reason %q is not one the callers know", o.resp.FinishReason)
		}
		if u := o.resp.Usage; u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("usage does not add up: %+v", u)
		}
		if u := o.resp.Usage; u.CacheWrite1hTokens < 0 || u.CacheWrite1hTokens > u.CacheWriteTokens {
			t.Fatalf("1-hour cache writes are not a part of the cache writes: %+v", u)
		}
		if want.sure && !want.tool && o.resp.Content != want.text {
			t.Fatalf("the client read the stream's text differently from encoding/json:\n got %q\nwant %q", o.resp.Content, want.text)
		}
	})
}

// A reply whose fields have the wrong types is refused with the field
// named, not read the SDKs' lenient way (findings of FuzzChatReply).
func TestMalformedRepliesAreRefused(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"model":"m","choices":[{"message":{"content":5},"finish_reason":"stop"}]}`, "choices.message.content is a JSON number, not a string"},
		{`{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":"12"}}`, "usage.prompt_tokens is a JSON string, not an integer"},
		{`{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":-5}}`, "usage.prompt_tokens is negative (-5)"},
		{`{"model":{},"choices":[{"message":{"content":"x"}}]}`, "model is a JSON object, not a string"},
		{`null`, "it is null"}, // once a nil dereference (FuzzChatReply)
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(tt.body))
		}))
		_, err := NewOpenAIChat(OpenAIConfig{APIKey: "k", BaseURL: ts.URL, Sleep: noSleep}).Complete(context.Background(), fuzzRequest(false))
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "chat completion with model "+fuzzModel+": the server's reply is malformed: "+tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.body, err, tt.want)
		}
	}
}
