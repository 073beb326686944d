package serve

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzAgentTranscript feeds transcript (the web view's reader of an agent
// CLI's JSON stream, which the agent's output decides) arbitrary logs. The
// properties: the same entries every time; none when no line is a JSON
// object (plain text is shown as it is); every entry of a known kind;
// an exit code only where the stream gave that whole number.
func FuzzAgentTranscript(f *testing.F) {
	// Short seeds, an event or two each: an input that finds new code is
	// minimized before fuzzing goes on, in time that grows with the square
	// of its length (the two whole streams these were, ~1 KB, stalled a
	// run for seconds).
	for _, seed := range []string{
		`{"type":"thread.started"}` + "\n" + `{"type":"item.completed","item":{"type":"agent_message","text":"I will"}}` + "\n",
		`{"type":"item.started","item":{"type":"command_execution","command":"pytest"}}`,
		`{"type":"item.completed","item":{"type":"command_execution","command":"pytest","aggregated_output":"1 passed","exit_code":0}}`,
		`{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"a.py","kind":"update"}]}}`,
		`{"type":"item.completed","item":{"type":"reasoning","text":"hm"}}` + "\n" + `{"type":"turn.failed","message":"stream error"}` + "\n",
		`{"type":"assistant","message":{"content":[{"type":"text","text":"Adding"},{"type":"thinking","thinking":"hm"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","name":"Edit","input":{"file_path":"a.py"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"ok"}],"is_error":true}]}}` + "\r\n" + `{"type":"result","result":"done"}` + "\r\n",
		`{"type":"item.completed","item":{"type":"command_execution","command":"x","exit_code":0.5}}`,
		`{"type":"item.completed","item":{"type":"command_execution","command":"x","exit_code":1e300}}`,
		`{"type":"item.completed","item":{"type":"command_execution","command":"x","exit_code":-1}}`,
		"just text\n",
		"{not json}\n[1,2]\n",
		`{"type":"result","result":"a"} trailing`,
		`{"type":"result","type":"error","message":"m"}`,
		"",
	} {
		f.Add(seed)
	}
	kinds := []string{"message", "reasoning", "command", "tool", "result", "error"}
	f.Fuzz(func(t *testing.T, log string) {
		got := transcript(log)
		if again := transcript(log); !reflect.DeepEqual(got, again) {
			t.Fatalf("differs run to run: %+v / %+v", got, again)
		}
		var exitCodes []float64 // every whole-number exit_code in an object line
		objects := 0
		for line := range strings.Lines(log) {
			line = strings.TrimSpace(line)
			var m map[string]any
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			objects++
			if item, ok := m["item"].(map[string]any); ok {
				if c, ok := item["exit_code"].(float64); ok && c == math.Trunc(c) {
					exitCodes = append(exitCodes, c)
				}
			}
		}
		if objects == 0 && got != nil {
			t.Fatalf("no JSON object line, and %d entries", len(got))
		}
		for _, e := range got {
			if !slices.Contains(kinds, e.Kind) {
				t.Fatalf("entry of unknown kind %q", e.Kind)
			}
			if e.ExitCode != nil {
				if e.Kind != "command" || !slices.Contains(exitCodes, float64(*e.ExitCode)) {
					t.Fatalf("exit code %d shown, the stream's whole-number exit codes are %v", *e.ExitCode, exitCodes)
				}
			}
		}
	})
}
