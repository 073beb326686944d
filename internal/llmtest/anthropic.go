package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"
)

// AnthropicReply scripts one answer of the Messages API. Content is the
// answer: the input of a tool_use block when the request forces a tool
// (tool_choice {"type":"tool"}), so it must then be JSON, else a text
// block. A non-zero Status sends an Anthropic error body instead
// ({"type":"error","error":{"type":ErrorType,"message":Message}}), and
// DropConnection closes the connection without an answer. StreamError
// sends that error type as an SSE error event in the middle of an HTTP 200
// stream, as Anthropic does when it becomes overloaded while answering.
type AnthropicReply struct {
	Content    string
	StopReason string // default "tool_use" or "end_turn"
	Status     int
	ErrorType  string
	Message    string
	Header     map[string]string
	// StreamError is an error type sent after the first content delta.
	StreamError string
	// InputTokens and OutputTokens are the usage reported; 0 means 100
	// and 20, as the OpenAI servers report. CacheReadTokens and
	// CacheWriteTokens are cache_read_input_tokens and
	// cache_creation_input_tokens, reported in message_start and again,
	// cumulatively, in message_delta. CacheWrite1hTokens is the part of
	// the writes made with the 1-hour TTL: message_start breaks the writes
	// down by TTL in cache_creation, as Anthropic does, unless
	// NoCacheBreakdown. A server with SimulateCache reports its cache's
	// figures instead, its writes made with the TTL of the request's
	// breakpoints.
	InputTokens, OutputTokens         int64
	CacheReadTokens, CacheWriteTokens int64
	CacheWrite1hTokens                int64
	NoCacheBreakdown                  bool
}

// AnthropicServer is a running scripted Messages API server. Only
// streaming requests are answered: the client always streams.
type AnthropicServer struct {
	URL string // base URL, without /v1: the SDK appends /v1/messages

	mu      sync.Mutex
	replies []AnthropicReply
	cache   *PromptCache
	requestLog
}

// SimulateCache makes s report cache reads and writes as Anthropic's prompt
// cache would, at the requests' cache_control breakpoints (see
// PromptCache), and returns the cache.
func (s *AnthropicServer) SimulateCache() *PromptCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = &PromptCache{}
	return s.cache
}

// StartAnthropic serves replies, in order, until the test ends. A request
// beyond the script gets a 500 api_error so an unexpected extra call fails
// loudly.
func StartAnthropic(t testing.TB, replies ...AnthropicReply) *AnthropicServer {
	t.Helper()
	s := &AnthropicServer{replies: append([]AnthropicReply(nil), replies...)}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

func (s *AnthropicServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		anthropicError(w, http.StatusNotFound, "not_found_error", "llmtest: no such endpoint "+r.Method+" "+r.URL.Path)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "llmtest: bad json")
		return
	}
	s.mu.Lock()
	s.requestLog.add(req, r.Header)
	if len(s.replies) == 0 {
		s.mu.Unlock()
		anthropicError(w, http.StatusInternalServerError, "api_error", "llmtest: script exhausted")
		return
	}
	reply := s.replies[0]
	s.replies = s.replies[1:]
	if s.cache != nil && reply.Status == 0 {
		reply.InputTokens, reply.CacheReadTokens, reply.CacheWriteTokens = s.cache.anthropic(anthropicBlocks(req))
		reply.CacheWrite1hTokens = 0
		if longTTL(req) {
			reply.CacheWrite1hTokens = reply.CacheWriteTokens
		}
		if reply.OutputTokens == 0 {
			reply.OutputTokens = 20
		}
	}
	s.mu.Unlock()

	if reply.Status == DropConnection {
		failHTTP(w, DropConnection)
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.Status != 0 {
		msg := reply.Message
		if msg == "" {
			msg = fmt.Sprintf("llmtest: scripted HTTP %d", reply.Status)
		}
		anthropicError(w, reply.Status, reply.ErrorType, msg)
		return
	}
	if req["stream"] != true {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "llmtest: only streaming requests are scripted")
		return
	}
	s.stream(w, req, reply)
}

// stream sends reply as the Messages API's server-sent events, the content
// split over two deltas so that the client has to put it together.
func (s *AnthropicServer) stream(w http.ResponseWriter, req map[string]any, reply AnthropicReply) {
	in, out := reply.InputTokens, reply.OutputTokens
	if in == 0 && out == 0 {
		in, out = 100, 20
	}
	model, _ := req["model"].(string)
	block := map[string]any{"type": "text", "text": ""}
	deltaType, deltaField, stop := "text_delta", "text", "end_turn"
	if tc, _ := req["tool_choice"].(map[string]any); tc["type"] == "tool" {
		block = map[string]any{"type": "tool_use", "id": "toolu_test", "name": tc["name"], "input": map[string]any{}}
		deltaType, deltaField, stop = "input_json_delta", "partial_json", "tool_use"
	}
	if reply.StopReason != "" {
		stop = reply.StopReason
	}
	half := len(reply.Content) / 2
	for half > 0 && !utf8.RuneStart(reply.Content[half]) {
		half-- // split between runes: JSON would mangle half a rune
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	usage := map[string]any{"input_tokens": in, "output_tokens": 1,
		"cache_read_input_tokens": reply.CacheReadTokens, "cache_creation_input_tokens": reply.CacheWriteTokens}
	if !reply.NoCacheBreakdown {
		usage["cache_creation"] = map[string]any{"ephemeral_5m_input_tokens": reply.CacheWriteTokens - reply.CacheWrite1hTokens,
			"ephemeral_1h_input_tokens": reply.CacheWrite1hTokens}
	}
	events := []map[string]any{
		{"type": "message_start", "message": map[string]any{
			"id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": usage,
		}},
		{"type": "content_block_start", "index": 0, "content_block": block},
		{"type": "ping"},
		{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": deltaType, deltaField: reply.Content[:half]}},
	}
	if reply.StreamError != "" {
		events = append(events, map[string]any{"type": "error", "error": map[string]any{"type": reply.StreamError, "message": "llmtest: scripted " + reply.StreamError}})
	} else {
		events = append(events,
			map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": deltaType, deltaField: reply.Content[half:]}},
			map[string]any{"type": "content_block_stop", "index": 0},
			map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out,
				"cache_read_input_tokens": reply.CacheReadTokens, "cache_creation_input_tokens": reply.CacheWriteTokens}},
			map[string]any{"type": "message_stop"},
		)
	}
	for _, e := range events {
		data, _ := json.Marshal(e)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e["type"], data)
	}
}

// longTTL reports whether a Messages request's breakpoints ask for the
// 1-hour TTL.
func longTTL(req map[string]any) bool {
	for _, b := range anthropicBlocks(req) {
		if b.ttl == "1h" {
			return true
		}
	}
	return false
}

func anthropicError(w http.ResponseWriter, status int, errType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "error", "error": map[string]any{"type": errType, "message": msg},
	})
}

// Remaining reports how many scripted replies were not used.
func (s *AnthropicServer) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}
