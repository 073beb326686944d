package agentclitest

import (
	"encoding/json"
	"net/http"
	"path"
	"testing"
)

// NewCodex starts a Responses-API server for Codex CLI (`POST /v1/responses`, streamed): each request
// is answered with the next turn of script, as SSE events response.created, one
// response.output_item.done per action and response.completed with usage. Shell and WriteFile actions
// become exec_command function calls; Say actions become assistant messages.
func NewCodex(tb testing.TB, script ...Turn) *Server {
	s := newServer(tb, script, serveCodex)
	s.BaseURL = s.srv.URL + "/v1"
	return s
}

func serveCodex(s *Server, r *http.Request, body []byte, w http.ResponseWriter) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.record(r, body, "unexpected", 0)
		http.NotFound(w, r)
		return
	}
	turn, index, ok := s.nextTurn()
	kind := "turn"
	if !ok {
		turn, kind = Turn{Say(Exhausted)}, "unexpected"
	}
	s.record(r, body, kind, index)

	respID := s.newID("resp")
	stream := startSSE(w)
	stream.event("response.created", map[string]any{
		"type": "response.created", "response": map[string]any{"id": respID},
	})
	for i, a := range turn {
		stream.event("response.output_item.done", map[string]any{
			"type": "response.output_item.done", "output_index": i, "item": s.codexItem(a),
		})
	}
	stream.event("response.completed", map[string]any{
		"type": "response.completed",
		"response": map[string]any{
			"id": respID,
			"usage": map[string]any{
				"input_tokens": len(body) / 4, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
				"total_tokens": len(body)/4 + 10,
			},
		},
	})
}

// codexItem renders an action as a Responses-API output item.
func (s *Server) codexItem(a Action) map[string]any {
	switch a.Kind {
	case KindShell, KindWrite:
		cmd := a.Command
		if a.Kind == KindWrite {
			cmd = "printf '%s' " + shellQuote(a.Content) + " > " + shellQuote(a.Path)
			if dir := path.Dir(a.Path); dir != "." && dir != "/" {
				cmd = "mkdir -p " + shellQuote(dir) + " && " + cmd
			}
		}
		args, _ := json.Marshal(map[string]string{"cmd": cmd}) // a map of strings always encodes
		return map[string]any{
			"type": "function_call", "id": s.newID("fc"), "call_id": s.newID("call"),
			"name": "exec_command", "arguments": string(args),
		}
	default:
		return map[string]any{
			"type": "message", "id": s.newID("msg"), "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": a.Text, "annotations": []any{}}},
		}
	}
}
