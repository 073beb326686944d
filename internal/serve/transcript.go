package serve

import (
	"encoding/json"
	"math"
	"strings"
)

// TurnEntry is one readable step of an agent CLI's JSON stream: a message,
// a command with its output and exit code, a tool call or its result.
type TurnEntry struct {
	Kind     string `json:"kind"` // message, reasoning, command, tool, result, error
	Text     string `json:"text"`
	Output   string `json:"output,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// transcript reads the JSON lines of Codex's `exec --json` events and
// Claude Code's `--output-format stream-json` messages; nil when no line
// is an event it knows (the log is then shown as it is).
func transcript(log string) []TurnEntry {
	var out []TurnEntry
	for line := range strings.Lines(log) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		out = append(out, turn(m)...)
	}
	return out
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func turn(m map[string]any) []TurnEntry {
	switch str(m, "type") {
	case "item.completed", "item.started": // Codex
		item, _ := m["item"].(map[string]any)
		if item == nil || str(m, "type") == "item.started" && str(item, "type") != "command_execution" {
			return nil
		}
		switch str(item, "type") {
		case "agent_message":
			return []TurnEntry{{Kind: "message", Text: str(item, "text")}}
		case "reasoning":
			return []TurnEntry{{Kind: "reasoning", Text: str(item, "text")}}
		case "command_execution":
			if str(m, "type") == "item.started" {
				return nil
			}
			e := TurnEntry{Kind: "command", Text: str(item, "command"), Output: str(item, "aggregated_output")}
			// Only a whole number an exit status can be: int(0.5) would
			// show a failed command as exit 0, int(1e300) as a negative.
			if c, ok := item["exit_code"].(float64); ok && c == math.Trunc(c) && math.Abs(c) <= math.MaxInt32 {
				n := int(c)
				e.ExitCode = &n
			}
			return []TurnEntry{e}
		case "file_change":
			b, _ := json.Marshal(item["changes"])
			return []TurnEntry{{Kind: "tool", Text: "file change " + string(b)}}
		case "error":
			return []TurnEntry{{Kind: "error", Text: str(item, "message")}}
		}
	case "error", "turn.failed":
		return []TurnEntry{{Kind: "error", Text: str(m, "message")}}
	case "assistant", "user": // Claude Code
		msg, _ := m["message"].(map[string]any)
		content, _ := msg["content"].([]any)
		var out []TurnEntry
		for _, c := range content {
			part, _ := c.(map[string]any)
			switch str(part, "type") {
			case "text":
				out = append(out, TurnEntry{Kind: "message", Text: str(part, "text")})
			case "thinking":
				out = append(out, TurnEntry{Kind: "reasoning", Text: str(part, "thinking")})
			case "tool_use":
				input, _ := part["input"].(map[string]any)
				text := str(part, "name")
				if cmd := str(input, "command"); cmd != "" {
					text += ": " + cmd
				} else if b, err := json.Marshal(input); err == nil {
					text += " " + string(b)
				}
				out = append(out, TurnEntry{Kind: "tool", Text: text})
			case "tool_result":
				e := TurnEntry{Kind: "result", Text: "tool result"}
				switch c := part["content"].(type) {
				case string:
					e.Output = c
				case []any:
					for _, x := range c {
						if xm, ok := x.(map[string]any); ok {
							e.Output += str(xm, "text")
						}
					}
				}
				if isErr, _ := part["is_error"].(bool); isErr {
					e.Text = "tool error"
				}
				out = append(out, e)
			}
		}
		return out
	case "result":
		return []TurnEntry{{Kind: "result", Text: str(m, "result")}}
	}
	return nil
}
