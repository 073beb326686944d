// Package llmtest holds scripted model servers on 127.0.0.1 for offline
// tests — OpenAI-compatible Chat Completions (Start), the OpenAI Responses
// API (StartResponses) and Anthropic's Messages API (StartAnthropic): each
// answers requests with queued replies, in order, and keeps every request
// it received.
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
	"time"
)

// Reply is one scripted answer. Content becomes choices[0].message.content;
// a non-zero Status sends an error response with Body instead, and
// DropConnection closes the connection without an answer. Header is added
// to the answer (e.g. Retry-After).
type Reply struct {
	Content string
	// PromptTokens, CachedTokens and CacheWriteTokens are the usage
	// reported (prompt_tokens_details for the cache); PromptTokens 0 means
	// 100. A server with SimulateCache reports its cache's figures instead.
	PromptTokens, CachedTokens, CacheWriteTokens int64
	Status                                       int
	Body                                         string
	Header                                       map[string]string
	Delay                                        time.Duration
}

// Server is a running scripted server.
type Server struct {
	URL string // base URL, ending in /v1

	mu      sync.Mutex
	replies []Reply
	answer  func(req map[string]any) Reply // StartFunc
	cache   *PromptCache
	requestLog
}

// SimulateCache makes s report cached tokens as an OpenAI-style prompt
// cache over its requests would (see PromptCache), and returns the cache.
func (s *Server) SimulateCache() *PromptCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = &PromptCache{}
	return s.cache
}

// Start serves replies until the test ends. A request beyond the script gets
// a 500 so an unexpected extra call fails loudly.
func Start(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{replies: replies}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL + "/v1"
	return s
}

// StartFunc serves every request with answer(the decoded request body),
// for requests that arrive in no fixed order, such as those of builds run
// in parallel.
func StartFunc(t testing.TB, answer func(req map[string]any) Reply) *Server {
	t.Helper()
	s := Start(t)
	s.mu.Lock()
	s.answer = answer
	s.mu.Unlock()
	return s
}

// StartRouted serves route's reply to each request's user prompt, for
// tests whose requests may come in any order or more than once (several
// workers, retries).
func StartRouted(t testing.TB, route func(prompt string) Reply) *Server {
	t.Helper()
	return StartFunc(t, func(req map[string]any) Reply { return route(userPrompt(req)) })
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requestLog.add(req, r.Header)
	if s.answer != nil {
		s.replies = []Reply{s.answer(req)}
	}
	if len(s.replies) == 0 {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"llmtest: script exhausted","type":"server_error"}}`)
		return
	}
	reply := s.replies[0]
	s.replies = s.replies[1:]
	if s.cache != nil && reply.Status == 0 {
		reply.PromptTokens, reply.CachedTokens = s.cache.openai(openaiPrompt(req))
	}
	s.mu.Unlock()

	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Status == DropConnection {
		failHTTP(w, DropConnection)
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if reply.Status != 0 {
		w.WriteHeader(reply.Status)
		io.WriteString(w, reply.Body)
		return
	}
	model, _ := req["model"].(string)
	prompt := reply.PromptTokens
	if prompt == 0 {
		prompt = 100
	}
	resp := map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": reply.Content},
		}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20,
			"prompt_tokens_details": map[string]any{"cached_tokens": reply.CachedTokens, "cache_write_tokens": reply.CacheWriteTokens}},
	}
	json.NewEncoder(w).Encode(resp)
}

// UserPrompt returns the user message of request i.
func (s *Server) UserPrompt(i int) string {
	reqs := s.Requests()
	if i >= len(reqs) {
		return ""
	}
	return userPrompt(reqs[i])
}

func userPrompt(req map[string]any) string {
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm["role"] == "user" {
			c, _ := mm["content"].(string)
			return c
		}
	}
	return ""
}

// Remaining reports how many scripted replies were not used.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Proposal renders a write proposal as the model would send it.
func Proposal(summary string, writes ...Write) string {
	return marshalProposal(summary, writes, nil)
}

// EditProposal renders a proposal with edits, and writes when any, as a
// model following the strict schema sends it: both lists present.
func EditProposal(summary string, writes []Write, edits ...Edit) string {
	if writes == nil {
		writes = []Write{}
	}
	if edits == nil {
		edits = []Edit{}
	}
	return marshalProposal(summary, writes, edits)
}

func marshalProposal(summary string, writes []Write, edits []Edit) string {
	type fw struct {
		Path       string `json:"path"`
		BaseSHA256 string `json:"base_sha256"`
		Content    string `json:"content"`
	}
	type rp struct {
		Old string `json:"old"`
		New string `json:"new"`
	}
	type fe struct {
		Path       string `json:"path"`
		BaseSHA256 string `json:"base_sha256"`
		Replace    []rp   `json:"replace"`
	}
	p := struct {
		Summary string `json:"summary"`
		Writes  []fw   `json:"writes"`
		Edits   []fe   `json:"edits,omitempty"`
	}{Summary: summary}
	for _, w := range writes {
		p.Writes = append(p.Writes, fw(w))
	}
	if edits != nil {
		p.Edits = []fe{}
	}
	for _, e := range edits {
		f := fe{Path: e.Path, BaseSHA256: e.BaseSHA256}
		for _, r := range e.Replace {
			f.Replace = append(f.Replace, rp{Old: r[0], New: r[1]})
		}
		p.Edits = append(p.Edits, f)
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("llmtest: %v", err))
	}
	return string(b)
}

// Write is one file write in a Proposal.
type Write struct{ Path, BaseSHA256, Content string }

// Edit is one file's edits in an EditProposal: Replace holds {old, new} pairs.
type Edit struct {
	Path, BaseSHA256 string
	Replace          [][2]string
}

// requestLog keeps the decoded bodies and headers a scripted server received;
// both servers embed it.
type requestLog struct {
	mu       sync.Mutex
	requests []map[string]any
	headers  []http.Header
}

func (l *requestLog) add(body map[string]any, h http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, body)
	l.headers = append(l.headers, h.Clone())
}

// Requests returns the decoded request bodies received so far (for the
// Responses server: the submissions, failed ones included).
func (l *requestLog) Requests() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.requests...)
}

// Header returns the HTTP headers of request i.
func (l *requestLog) Header(i int) http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.headers) {
		return nil
	}
	return l.headers[i]
}
