package agentclitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
)

// event is one Server-Sent Event.
type event struct {
	name string
	data map[string]any
}

// post sends body to url and returns the status, and the events of an event stream (else nil).
func post(t *testing.T, url, body string) (int, []event) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	var events []event
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s: bad data %q: %v", name, line, err)
			}
			if data["type"] != name {
				t.Errorf("event %s has type %v", name, data["type"])
			}
			events = append(events, event{name, data})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, events
}

func names(events []event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return strings.Join(out, " ")
}

// field walks a decoded JSON value along keys (strings for objects, ints for arrays).
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func TestCodexServer(t *testing.T) {
	content := "it's \"quoted\" $HOME `x`\nno trailing newline"
	s := NewCodex(t,
		Turn{Shell("ls -la"), WriteFile("sub dir/f.txt", content)},
		Turn{Say("all done")},
	)
	if !strings.HasSuffix(s.BaseURL, "/v1") || !strings.HasPrefix(s.BaseURL, "http://127.0.0.1:") {
		t.Fatalf("BaseURL = %q, want http://127.0.0.1:<port>/v1", s.BaseURL)
	}

	status, events := post(t, s.BaseURL+"/responses", `{"stream":true,"input":"first"}`)
	if status != http.StatusOK || names(events) != "response.created response.output_item.done response.output_item.done response.completed" {
		t.Fatalf("turn 1: status %d, events %q", status, names(events))
	}
	var cmds []string
	for _, e := range events[1:3] {
		item := e.data["item"]
		if field(item, "type") != "function_call" || field(item, "name") != "exec_command" || field(item, "call_id") == "" {
			t.Fatalf("turn 1 item = %v, want an exec_command function call", item)
		}
		var args struct{ Cmd string }
		if err := json.Unmarshal([]byte(field(item, "arguments").(string)), &args); err != nil {
			t.Fatalf("arguments: %v", err)
		}
		cmds = append(cmds, args.Cmd)
	}
	if cmds[0] != "ls -la" {
		t.Errorf("shell command = %q, want ls -la", cmds[0])
	}
	// The write command must reproduce the content byte for byte through a real shell.
	dir := t.TempDir()
	if res := proc.Run(context.Background(), proc.Spec{Argv: []string{"sh", "-c", cmds[1]}, Dir: dir}); res.ExitCode != 0 {
		t.Fatalf("sh -c %q: %+v", cmds[1], res)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "sub dir", "f.txt")); err != nil || string(got) != content {
		t.Errorf("the write command wrote %q (%v), want %q", got, err, content)
	}
	if usage := field(events[3].data, "response", "usage", "total_tokens"); usage == nil {
		t.Errorf("response.completed has no usage: %v", events[3].data)
	}

	_, events = post(t, s.BaseURL+"/responses", `{"stream":true,"input":"second"}`)
	if names(events) != "response.created response.output_item.done response.completed" ||
		field(events[1].data, "item", "type") != "message" || field(events[1].data, "item", "content", 0, "text") != "all done" {
		t.Fatalf("turn 2: events %v", events)
	}

	// Past the script: a final message, and the request is flagged.
	_, events = post(t, s.BaseURL+"/responses", `{"stream":true,"input":"third"}`)
	if len(events) != 3 || field(events[1].data, "item", "content", 0, "text") != Exhausted {
		t.Errorf("past the script: events %v, want the %q message", events, Exhausted)
	}
	if status, _ := post(t, s.BaseURL+"/models", `{}`); status != http.StatusNotFound {
		t.Errorf("POST /v1/models: status %d, want 404", status)
	}

	if s.Served() != 2 || len(s.Turns()) != 2 || len(s.Unexpected()) != 2 || len(s.Requests()) != 4 {
		t.Errorf("served %d, turns %d, unexpected %d, requests %d; want 2, 2, 2, 4:\n%s",
			s.Served(), len(s.Turns()), len(s.Unexpected()), len(s.Requests()), s.Summary())
	}
	if got := string(s.Turns()[1].Body); got != `{"stream":true,"input":"second"}` || s.Turns()[1].Turn != 1 {
		t.Errorf("second turn request = %q (turn %d), want its body recorded", got, s.Turns()[1].Turn)
	}
}

func TestClaudeServer(t *testing.T) {
	s := NewClaude(t,
		Turn{Say("Let me look."), Shell("ls"), WriteFile("/repo/f.txt", "x\n")},
		Turn{Say("done")},
	)
	url := s.BaseURL + "/v1/messages?beta=true"
	const withTools = `{"model":"m","stream":true,"tools":[{"name":"Bash"},{"name":"Write"}],"messages":[]}`

	status, events := post(t, url, withTools)
	want := "message_start " + strings.Repeat("content_block_start content_block_delta content_block_stop ", 3) + "message_delta message_stop"
	if status != http.StatusOK || names(events) != want {
		t.Fatalf("turn 1: status %d, events %q, want %q", status, names(events), want)
	}
	if got := field(events[1].data, "content_block", "type"); got != "text" || field(events[2].data, "delta", "text") != "Let me look." {
		t.Errorf("block 0 = %v %v, want the text", events[1].data, events[2].data)
	}
	for i, tool := range []struct {
		name  string
		input map[string]any
	}{
		{"Bash", map[string]any{"command": "ls", "description": "scripted command"}},
		{"Write", map[string]any{"file_path": "/repo/f.txt", "content": "x\n"}},
	} {
		start, delta := events[4+3*i].data, events[5+3*i].data
		if field(start, "content_block", "type") != "tool_use" || field(start, "content_block", "name") != tool.name ||
			field(start, "content_block", "id") == "" {
			t.Errorf("block %d start = %v, want a %s tool_use", i+1, start, tool.name)
		}
		var input map[string]any
		if err := json.Unmarshal([]byte(field(delta, "delta", "partial_json").(string)), &input); err != nil ||
			len(input) != len(tool.input) || input["command"] != tool.input["command"] || input["file_path"] != tool.input["file_path"] {
			t.Errorf("block %d input = %v (%v), want %v", i+1, input, err, tool.input)
		}
	}
	if got := field(events[len(events)-2].data, "delta", "stop_reason"); got != "tool_use" {
		t.Errorf("turn 1 stop_reason = %v, want tool_use", got)
	}

	// Side requests do not consume turns.
	if _, events := post(t, url, `{"model":"small","stream":true,"messages":[]}`); field(events[2].data, "delta", "text") != SideReply {
		t.Errorf("streamed side request: events %v, want %q", events, SideReply)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"model":"small","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || field(msg, "content", 0, "text") != SideReply || msg["stop_reason"] != "end_turn" {
		t.Errorf("plain side request: %v (%v), want %q", msg, err, SideReply)
	}
	resp.Body.Close()
	if status, _ := post(t, s.BaseURL+"/v1/messages/count_tokens", `{"messages":[]}`); status != http.StatusOK {
		t.Errorf("count_tokens: status %d", status)
	}
	req, _ := http.NewRequest(http.MethodHead, s.BaseURL+"/api/hello", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /api/hello: %v %v", resp, err)
	}

	_, events = post(t, url, withTools)
	if got := field(events[len(events)-2].data, "delta", "stop_reason"); got != "end_turn" || field(events[2].data, "delta", "text") != "done" {
		t.Errorf("turn 2: events %v, want the final text with end_turn", events)
	}
	if status, _ := post(t, s.BaseURL+"/v1/complete", `{}`); status != http.StatusNotFound {
		t.Errorf("unknown endpoint: status %d, want 404", status)
	}
	if status, _ := post(t, url, `not json`); status != http.StatusBadRequest {
		t.Errorf("bad body: status %d, want 400", status)
	}

	kinds := ""
	for _, r := range s.Requests() {
		kinds += r.Kind + " "
	}
	if want := "turn side side side side turn unexpected unexpected "; kinds != want {
		t.Errorf("request kinds = %q, want %q:\n%s", kinds, want, s.Summary())
	}
	if s.Served() != 2 || s.Requests()[0].Path != "/v1/messages?beta=true" {
		t.Errorf("served %d, first path %q", s.Served(), s.Requests()[0].Path)
	}
}
