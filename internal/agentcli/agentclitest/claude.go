package agentclitest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// SideReply is the text of every side request Claude Code makes (a request without tools, such as a
// title or a topic check): short, harmless, and the same each time.
const SideReply = "OK"

// NewClaude starts a Messages-API server for Claude Code. `POST /v1/messages` requests that offer
// tools are the agent's conversation and get the next turn of script, streamed as SSE message_start,
// content_block_start/delta/stop per action, message_delta with the stop reason and message_stop:
// Shell actions become tool_use blocks for its Bash tool, WriteFile actions for its Write tool, Say
// actions text blocks. Requests without tools are side requests and get SideReply;
// `/v1/messages/count_tokens` gets an estimate and `HEAD /api/hello` (a connectivity check) 200.
// Anything else is answered 404 and listed in Unexpected.
func NewClaude(tb testing.TB, script ...Turn) *Server {
	s := newServer(tb, script, serveClaude)
	s.BaseURL = s.srv.URL
	return s
}

// messagesRequest is what the server reads of a Messages-API request.
type messagesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func serveClaude(s *Server, r *http.Request, body []byte, w http.ResponseWriter) {
	if r.URL.Path == "/api/hello" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		// Its connectivity check, made unless nonessential traffic is disabled.
		s.record(r, body, "side", 0)
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.Method != http.MethodPost {
		s.record(r, body, "unexpected", 0)
		http.NotFound(w, r)
		return
	}
	switch r.URL.Path {
	case "/v1/messages/count_tokens":
		s.record(r, body, "side", 0)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"input_tokens": len(body) / 4}) // an error means the client left
		return
	case "/v1/messages":
	default:
		s.record(r, body, "unexpected", 0)
		http.NotFound(w, r)
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(r, body, "unexpected", 0)
		http.Error(w, "agentclitest: the request body is not a Messages-API request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.Tools) == 0 {
		s.record(r, body, "side", 0)
		s.claudeReply(w, req, Turn{Say(SideReply)})
		return
	}
	turn, index, ok := s.nextTurn()
	kind := "turn"
	if !ok {
		turn, kind = Turn{Say(Exhausted)}, "unexpected"
	}
	s.record(r, body, kind, index)
	s.claudeReply(w, req, turn)
}

// claudeReply answers with the actions of turn, streamed if the request asked for it.
func (s *Server) claudeReply(w http.ResponseWriter, req messagesRequest, turn Turn) {
	msgID := s.newID("msg")
	stop := "end_turn"
	if turn.hasTools() {
		stop = "tool_use"
	}
	usage := map[string]int{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	blocks := make([]map[string]any, len(turn))
	for i, a := range turn {
		blocks[i] = s.claudeBlock(a)
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{ // an error means the client left
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	stream := startSSE(w)
	stream.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": usage,
		},
	})
	for i, b := range blocks {
		// The block opens empty and its content arrives as one delta, as the real API streams it.
		start, delta := map[string]any{}, map[string]any{}
		switch b["type"] {
		case "tool_use":
			input, _ := json.Marshal(b["input"]) // a map of strings always encodes
			start = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
		default:
			start = map[string]any{"type": "text", "text": ""}
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		}
		stream.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		stream.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		stream.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	stream.event("message_delta", map[string]any{
		"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 10},
	})
	stream.event("message_stop", map[string]any{"type": "message_stop"})
}

// claudeBlock renders an action as a Messages-API content block.
func (s *Server) claudeBlock(a Action) map[string]any {
	switch a.Kind {
	case KindShell:
		return map[string]any{"type": "tool_use", "id": s.newID("toolu"), "name": "Bash",
			"input": map[string]string{"command": a.Command, "description": "scripted command"}}
	case KindWrite:
		return map[string]any{"type": "tool_use", "id": s.newID("toolu"), "name": "Write",
			"input": map[string]string{"file_path": a.Path, "content": a.Content}}
	default:
		return map[string]any{"type": "text", "text": a.Text}
	}
}
