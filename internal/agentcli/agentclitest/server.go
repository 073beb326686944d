// Package agentclitest serves scripted model replies on 127.0.0.1 so that the real Codex and Claude Code
// CLIs can be driven offline: the script decides what the agent does, the real CLI does it.
package agentclitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Action is one thing the scripted model does in a reply. Build it with Shell, WriteFile or Say.
type Action struct {
	Kind    ActionKind
	Command string // Shell: the command line, run by the agent's shell tool
	Path    string // WriteFile: the file, absolute or relative to the agent's working directory
	Content string // WriteFile: the exact bytes to write
	Text    string // Say: the assistant's text
}

// ActionKind says what an Action does.
type ActionKind int

// The kinds of Action.
const (
	KindShell ActionKind = iota + 1
	KindWrite
	KindSay
)

// Shell makes the agent run command with its shell tool (Codex: exec_command; Claude Code: Bash).
func Shell(command string) Action { return Action{Kind: KindShell, Command: command} }

// WriteFile makes the agent write content to path (Codex: a printf through exec_command, as Codex has no
// plain write tool; Claude Code: its Write tool).
func WriteFile(path, content string) Action {
	return Action{Kind: KindWrite, Path: path, Content: content}
}

// Say makes the model answer with text. A turn made only of Say actions ends the agent's session.
func Say(text string) Action { return Action{Kind: KindSay, Text: text} }

// Turn is one model reply: its actions in order. Tool actions make the CLI run them and ask again, and
// the next turn answers that request. Codex may run the tool calls of one reply in parallel, so
// actions that depend on each other belong in separate turns.
type Turn []Action

// hasTools reports whether the reply asks the agent to act, so that it comes back with the results.
func (t Turn) hasTools() bool {
	for _, a := range t {
		if a.Kind != KindSay {
			return true
		}
	}
	return false
}

// Exhausted is what the model says when a CLI asks for more turns than the script has; the request is
// also listed in Unexpected.
const Exhausted = "agentclitest: the script has no more turns"

// Request is one HTTP request a CLI made.
type Request struct {
	Method string
	Path   string // with the query, as in "/v1/messages?beta=true"
	Header http.Header
	Body   []byte
	// Kind is "turn" (a request answered with the next scripted turn), "side" (a request that is not
	// part of the agent's conversation, such as a title, answered with a fixed reply), or "unexpected"
	// (an endpoint the server does not know, answered 404, or a turn past the end of the script).
	Kind string
	// Turn is the index of the scripted turn that answered a "turn" request.
	Turn int
}

// Server is a scripted model server. Its methods are safe for concurrent use.
type Server struct {
	// BaseURL is what the CLI's base-URL setting takes: "http://127.0.0.1:<port>/v1" for Codex,
	// "http://127.0.0.1:<port>" for Claude Code.
	BaseURL string

	srv    *httptest.Server
	script []Turn

	mu       sync.Mutex
	next     int // the index of the next turn to serve
	ids      int // a counter for deterministic tool-call ids
	requests []Request
}

// newServer starts a server whose handler is h, on 127.0.0.1, closed when tb ends.
func newServer(tb testing.TB, script []Turn, h func(s *Server, r *http.Request, body []byte, w http.ResponseWriter)) *Server {
	tb.Helper()
	for i, turn := range script {
		if len(turn) == 0 {
			tb.Fatalf("agentclitest: turn %d of the script is empty; a reply needs at least one action", i)
		}
	}
	s := &Server{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		h(s, r, body, w)
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

// record appends a request to the log.
func (s *Server) record(r *http.Request, body []byte, kind string, turn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, Kind: kind, Turn: turn,
	})
}

// nextTurn returns the next scripted turn and its index, or ok=false when the script is done.
func (s *Server) nextTurn() (turn Turn, index int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.script) {
		return nil, s.next, false
	}
	s.next++
	return s.script[s.next-1], s.next - 1, true
}

// newID returns prefix followed by a number unique within the server.
func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_%d", prefix, s.ids)
}

// Requests returns every request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Turns returns the requests answered with a scripted turn, in order.
func (s *Server) Turns() []Request { return s.filter("turn") }

// Unexpected returns the requests the server did not know how to answer, and those past the script.
func (s *Server) Unexpected() []Request { return s.filter("unexpected") }

func (s *Server) filter(kind string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// Served returns how many scripted turns have been served.
func (s *Server) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Summary lists the requests one per line (method, path, kind), for a test's failure message.
func (s *Server) Summary() string {
	var sb strings.Builder
	for _, r := range s.Requests() {
		fmt.Fprintf(&sb, "%s %s (%s, %d bytes)\n", r.Method, r.Path, r.Kind, len(r.Body))
	}
	return sb.String()
}

// sse writes Server-Sent Events, one JSON object per event.
type sse struct {
	w   http.ResponseWriter
	err error
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event writes one event; the first write error sticks and stops later writes, as the client is gone.
func (e *sse) event(name string, data any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("agentclitest: cannot encode the %s event: %v", name, err)) // a bug in this package
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", name, b)
	if _, e.err = e.w.Write(buf.Bytes()); e.err == nil {
		if f, ok := e.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
