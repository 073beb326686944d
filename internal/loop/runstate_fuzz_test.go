package loop

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/loop/tree"
)

// activeTrue finds a key spelt "active" in any case set to true, where an
// object's key can stand (not inside a string: a quote there is escaped).
var activeTrue = regexp.MustCompile(`[{,]\s*"(?i:active)"\s*:\s*true`)

// FuzzCommittedRunState feeds committedNoRepair the run.json of a commit,
// as lastValidTree reads it to decide whether that commit's tree counts as
// committed valid. Properties: the same answer twice; "no repair pending"
// only for a file decodeRunState reads, with no active repair, which
// encoding/json also reads whole (a half-decoded file, whose repair may be
// active, is no answer), and in which no key spelt "active" in any case is
// true anywhere, nor an exactly spelt repair.active in a plain reading;
// that answer survives writing the state back as the runner does and is
// lost by cutting the file short; and the runner's own files are read as
// written.
func FuzzCommittedRunState(f *testing.F) {
	root := f.TempDir()
	if err := os.MkdirAll(abs(root, RunnerDir), 0o755); err != nil {
		f.Fatal(err)
	}
	for _, s := range []RunState{
		{RunID: "r1", Branch: "loop/r1"},
		{RunID: "r1", Branch: "loop/r1", Iteration: 3, Repair: tree.Broken("1.2")},
		{RunID: "2026-11-25.a_b", Branch: "loop/2026-11-25.a_b", Iteration: 7, Stuck: "1.2", Repair: tree.RepairState{Failed: 2}},
	} {
		if err := writeRunState(root, s); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(abs(root, RunStatePath))
		if err != nil {
			f.Fatal(err)
		}
		if got := committedNoRepair(data); got == s.Repair.Active {
			f.Fatalf("the runner's own run.json %s: no repair pending = %v", data, got)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"run_id":"r1","repair":{"active":true},"iteration":"x"}`))           // half-decoded: the old reading passed it
	f.Add([]byte(`{"run_id":"r1","repair":{"ACTIVE":true}}`))                           // encoding/json: active after all
	f.Add([]byte(`{"run_id":"r1","REPAIR":{"active":true},"repair":{}}`))               // two spellings fill one field
	f.Add([]byte(`{"run_id":"r1","repair":{"active":true},"REPAIR":{"ACTIVE":false}}`)) // the last wins: passed before
	f.Add([]byte(`{"run_id":"r1","repair":{"active":true,"active":false}}`))            // repeated key
	f.Add([]byte(`{"run_id":"r1","repair":{"active":false}} {"repair":{"active":true}}`))
	f.Add([]byte(`{"run_id":"r1","repair":{"active":tr`))
	f.Add([]byte(`{"run_id":"r1","branch":"x\",\"active\":true","repair":null}`))
	f.Add([]byte(`{"run_id":"r1","repair":{"\u0061ctive":true}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ok := committedNoRepair(data)
		if ok != committedNoRepair(data) {
			t.Fatal("differs run to run")
		}
		s, err := decodeRunState(data)
		if err == nil && ok == s.Repair.Active {
			t.Fatalf("decoded with repair %+v, and no repair pending = %v", s.Repair, ok)
		}
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("no repair pending, from a run.json decodeRunState refuses: %v", err)
		}
		var plain RunState
		if err := json.Unmarshal(data, &plain); err != nil || plain.Repair.Active {
			t.Fatalf("no repair pending, where encoding/json reads %+v, %v", plain.Repair, err)
		}
		if activeTrue.Match(data) {
			t.Fatalf("no repair pending, in a file with an active key set to true: %s", data)
		}
		var generic map[string]any
		if err := json.Unmarshal(data, &generic); err != nil {
			t.Fatal(err)
		}
		if rep, _ := generic["repair"].(map[string]any); rep != nil && rep["active"] == true {
			t.Fatalf("no repair pending, with repair.active true: %s", data)
		}
		for _, v := range []any{generic, generic["repair"]} {
			if m, _ := v.(map[string]any); m != nil {
				for k, x := range m {
					if strings.EqualFold(k, "active") && x == true {
						t.Fatalf("no repair pending, with %q true: %s", k, data)
					}
				}
			}
		}
		written, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if !committedNoRepair(append(written, '\n')) {
			t.Fatalf("written back as the runner does, %s reads otherwise", written)
		}
		if back, _ := decodeRunState(written); back != s {
			t.Fatalf("round trip: %+v, then %+v", s, back)
		}
		trimmed := bytes.TrimRight(data, " \t\r\n")
		for _, n := range []int{len(trimmed) - 1, len(trimmed) / 2, 1} {
			if n >= 0 && n < len(trimmed) && committedNoRepair(trimmed[:n]) {
				t.Fatalf("cut to %d bytes, %q still says no repair is pending", n, trimmed[:n])
			}
		}
	})
}
