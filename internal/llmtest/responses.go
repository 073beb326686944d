package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// DropConnection, as Reply.Status or in ResponsesReply.HTTPErrors or
// PollErrors, closes the connection without an answer instead of sending an
// HTTP error.
const DropConnection = -1

// ResponsesReply scripts one background response of the Responses API.
type ResponsesReply struct {
	// Statuses are returned by successive polls (GET /v1/responses/{id}),
	// e.g. {"queued", "in_progress", "completed"}; the last one repeats, so
	// a script ending in "in_progress" never finishes. Empty means
	// {"completed"}. The submission (POST) always answers "queued".
	Statuses []string
	// Content is the output text when the response is completed, or the
	// partial text when it is incomplete.
	Content string
	// Incomplete is incomplete_details.reason when the status is "incomplete".
	Incomplete string
	// Error is error.message when the status is "failed".
	Error string
	// HTTPErrors are HTTP status codes (with an OpenAI-style error body)
	// returned by the submissions before one succeeds, e.g. {503}; each
	// failed submission consumes one.
	HTTPErrors []int
	// PollErrors are HTTP status codes returned by this response's polls
	// before they walk Statuses; each failed poll consumes one.
	PollErrors []int
	// InputTokens and CachedTokens are the usage reported
	// (input_tokens_details.cached_tokens); InputTokens 0 means 100. A
	// server with SimulateCache reports its cache's figures instead.
	InputTokens, CachedTokens int64
}

// ResponsesServer is a running scripted Responses API server.
type ResponsesServer struct {
	URL string // base URL, ending in /v1

	mu      sync.Mutex
	replies []ResponsesReply
	answer  func(req map[string]any) ResponsesReply // StartResponsesFunc
	requestLog
	cache   *PromptCache
	live    map[string]*liveResponse
	created int
	polls   int
	cancels []string
}

type liveResponse struct {
	reply      ResponsesReply
	model      string
	next       int
	pollErrors []int
	cancelled  bool
}

// StartResponses serves replies, one per successful submission, until the
// test ends. A submission beyond the script gets a 500 so an unexpected
// extra call fails loudly.
func StartResponses(t testing.TB, replies ...ResponsesReply) *ResponsesServer {
	t.Helper()
	s := &ResponsesServer{replies: append([]ResponsesReply(nil), replies...), live: map[string]*liveResponse{}}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL + "/v1"
	return s
}

// StartResponsesFunc answers every submission with answer(the decoded
// request body), for submissions that arrive in no fixed order.
func StartResponsesFunc(t testing.TB, answer func(req map[string]any) ResponsesReply) *ResponsesServer {
	t.Helper()
	s := StartResponses(t)
	s.answer = answer
	return s
}

func (s *ResponsesServer) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/responses")
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "llmtest: no such endpoint "+r.URL.Path)
	case rest == "" && r.Method == http.MethodPost:
		s.submit(w, r)
	case strings.HasSuffix(rest, "/cancel") && r.Method == http.MethodPost:
		s.cancel(w, strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/cancel"))
	case strings.HasPrefix(rest, "/") && r.Method == http.MethodGet:
		s.get(w, strings.TrimPrefix(rest, "/"))
	default:
		writeError(w, http.StatusNotFound, "llmtest: no such endpoint "+r.Method+" "+r.URL.Path)
	}
}

func (s *ResponsesServer) submit(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: bad json")
		return
	}
	s.mu.Lock()
	s.requestLog.add(req, r.Header)
	if s.answer != nil { // HTTPErrors[0], if any, fails this submission
		s.replies = []ResponsesReply{s.answer(req)}
	}
	if len(s.replies) == 0 {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "llmtest: script exhausted")
		return
	}
	if errs := s.replies[0].HTTPErrors; len(errs) > 0 {
		s.replies[0].HTTPErrors = errs[1:]
		s.mu.Unlock()
		failHTTP(w, errs[0])
		return
	}
	reply := s.replies[0]
	s.replies = s.replies[1:]
	if s.cache != nil {
		reply.InputTokens, reply.CachedTokens = s.cache.openai(openaiPrompt(req))
	}
	s.created++
	id := fmt.Sprintf("resp_%d", s.created)
	model, _ := req["model"].(string)
	lr := &liveResponse{reply: reply, model: model, pollErrors: reply.PollErrors}
	s.live[id] = lr
	s.mu.Unlock()
	writeJSON(w, responseObject(id, "queued", lr))
}

func (s *ResponsesServer) get(w http.ResponseWriter, id string) {
	s.mu.Lock()
	s.polls++
	lr := s.live[id]
	if lr == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "llmtest: no response "+id)
		return
	}
	if len(lr.pollErrors) > 0 {
		code := lr.pollErrors[0]
		lr.pollErrors = lr.pollErrors[1:]
		s.mu.Unlock()
		failHTTP(w, code)
		return
	}
	status := "cancelled"
	if !lr.cancelled {
		statuses := lr.reply.Statuses
		if len(statuses) == 0 {
			statuses = []string{"completed"}
		}
		status = statuses[min(lr.next, len(statuses)-1)]
		lr.next++
	}
	body := responseObject(id, status, lr)
	s.mu.Unlock()
	writeJSON(w, body)
}

func (s *ResponsesServer) cancel(w http.ResponseWriter, id string) {
	s.mu.Lock()
	s.cancels = append(s.cancels, id)
	lr := s.live[id]
	if lr == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "llmtest: no response "+id)
		return
	}
	lr.cancelled = true
	body := responseObject(id, "cancelled", lr)
	s.mu.Unlock()
	writeJSON(w, body)
}

// responseObject renders a Responses API response object.
func responseObject(id, status string, lr *liveResponse) map[string]any {
	obj := map[string]any{
		"id": id, "object": "response", "created_at": 0, "status": status, "model": lr.model,
		"background": true, "error": nil, "incomplete_details": nil, "instructions": nil,
		"metadata": map[string]any{}, "output": []any{}, "parallel_tool_calls": true,
		"temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": []any{},
		"usage": nil,
	}
	switch status {
	case "completed", "incomplete":
		obj["output"] = []any{map[string]any{
			"type": "message", "id": "msg_" + id, "status": status, "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": lr.reply.Content, "annotations": []any{}}},
		}}
		in := lr.reply.InputTokens
		if in == 0 {
			in = 100
		}
		obj["usage"] = map[string]any{
			"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": lr.reply.CachedTokens},
			"output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": in + 20,
		}
		if status == "incomplete" {
			obj["incomplete_details"] = map[string]any{"reason": lr.reply.Incomplete}
		}
	case "failed":
		obj["error"] = map[string]any{"code": "server_error", "message": lr.reply.Error}
	}
	return obj
}

func failHTTP(w http.ResponseWriter, code int) {
	if code == DropConnection {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		code = http.StatusBadGateway
	}
	writeError(w, code, fmt.Sprintf("llmtest: scripted HTTP %d", code))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil},
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// SimulateCache makes s report cached tokens as an OpenAI-style prompt
// cache over its submissions would (see PromptCache), and returns the cache.
func (s *ResponsesServer) SimulateCache() *PromptCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = &PromptCache{}
	return s.cache
}

// Polls counts the status polls (GET /v1/responses/{id}) received so far.
func (s *ResponsesServer) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// Cancels returns the ids of the responses a cancel was received for.
func (s *ResponsesServer) Cancels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cancels...)
}

// Remaining reports how many scripted replies were not used.
func (s *ResponsesServer) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}
