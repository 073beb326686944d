package workorder

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/canon"
)

// minimalOrder has every required field and nothing else.
const minimalOrder = `{"id":"WO-01","title":"T","intent":"Do it.","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["python3 -m unittest"],"context_files":[]}`

// orderWith returns minimalOrder after mutate has changed its decoded form.
func orderWith(t *testing.T, mutate func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(minimalOrder), &m); err != nil {
		t.Fatal(err)
	}
	mutate(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParseOrder(t *testing.T, data []byte) *WorkOrder {
	t.Helper()
	w, err := ParseWorkOrder(data)
	if err != nil {
		t.Fatalf("ParseWorkOrder(%s): %v", data, err)
	}
	return w
}

func TestEmptySHA256(t *testing.T) {
	if got := canon.SHA256Hex(nil); got != EmptySHA256 {
		t.Fatalf("canon.SHA256Hex(nil) = %s, EmptySHA256 = %s", got, EmptySHA256)
	}
	if got := canon.SHA256Hex([]byte{}); got != EmptySHA256 {
		t.Fatalf("canon.SHA256Hex([]byte{}) = %s, EmptySHA256 = %s", got, EmptySHA256)
	}
}

func TestParseWorkOrderValid(t *testing.T) {
	t.Run("minimal", func(t *testing.T) {
		w := mustParseOrder(t, []byte(minimalOrder))
		want := &WorkOrder{
			ID: "WO-01", Title: "T", Intent: "Do it.",
			Preconditions: []Condition{}, Postconditions: []Condition{},
			AllowedFiles: []string{"a.py"}, Forbidden: []string{},
			AcceptanceCommands: []string{"python3 -m unittest"}, ContextFiles: []string{},
		}
		if !reflect.DeepEqual(w, want) {
			t.Fatalf("got %#v\nwant %#v", w, want)
		}
	})
	t.Run("full, with normalisation", func(t *testing.T) {
		w := mustParseOrder(t, orderWith(t, func(m map[string]any) {
			m["allowed_files"] = []any{"./a.py", "src/x/../y.py"}
			m["context_files"] = []any{"./docs//README.md"}
			m["forbidden"] = []any{"./secrets/", "do not touch the db"}
			m["preconditions"] = []any{map[string]any{"kind": "file_exists", "path": "./a.py"}}
			m["postconditions"] = []any{map[string]any{"kind": "file_exists", "path": "src/y.py"}}
			m["notes"] = "n"
			m["verify_exempt"] = true
		}))
		notes := "n"
		want := &WorkOrder{
			ID: "WO-01", Title: "T", Intent: "Do it.",
			Preconditions:      []Condition{{Kind: FileExists, Path: "a.py"}},
			Postconditions:     []Condition{{Kind: FileExists, Path: "src/y.py"}},
			AllowedFiles:       []string{"a.py", "src/y.py"},
			Forbidden:          []string{"./secrets/", "do not touch the db"}, // entries are patterns or prose, kept verbatim
			AcceptanceCommands: []string{"python3 -m unittest"},
			ContextFiles:       []string{"docs/README.md"},
			Notes:              &notes,
			VerifyExempt:       true,
		}
		if !reflect.DeepEqual(w, want) {
			t.Fatalf("got %#v\nwant %#v", w, want)
		}
	})
	t.Run("optional fields null", func(t *testing.T) {
		w := mustParseOrder(t, orderWith(t, func(m map[string]any) {
			m["preconditions"] = nil
			m["postconditions"] = nil
			m["notes"] = nil
			m["verify_exempt"] = nil
		}))
		if w.Preconditions == nil || w.Postconditions == nil || w.Notes != nil || w.VerifyExempt {
			t.Fatalf("optional nulls decoded to %#v", w)
		}
	})
	t.Run("exactly 10 context files", func(t *testing.T) {
		mustParseOrder(t, orderWith(t, func(m map[string]any) {
			var files []any
			for i := range MaxContextFiles {
				files = append(files, fmt.Sprintf("f%d.py", i))
			}
			m["context_files"] = files
		}))
	})
	t.Run("precondition may use file_absent", func(t *testing.T) {
		mustParseOrder(t, orderWith(t, func(m map[string]any) {
			m["preconditions"] = []any{map[string]any{"kind": "file_absent", "path": "new.py"}}
		}))
	})
	t.Run("forbidden file may be a context file", func(t *testing.T) {
		mustParseOrder(t, orderWith(t, func(m map[string]any) {
			m["forbidden"] = []any{"tests/test_calc.py"}
			m["context_files"] = []any{"tests/test_calc.py"}
		}))
	})
}

func TestParseWorkOrderRequiredFields(t *testing.T) {
	for _, field := range []string{"id", "title", "intent", "allowed_files", "forbidden", "acceptance_commands", "context_files"} {
		t.Run("missing "+field, func(t *testing.T) {
			data := orderWith(t, func(m map[string]any) { delete(m, field) })
			_, err := ParseWorkOrder(data)
			wantErr(t, err, field+": required field is missing")
		})
		t.Run("null "+field, func(t *testing.T) {
			data := orderWith(t, func(m map[string]any) { m[field] = nil })
			_, err := ParseWorkOrder(data)
			wantErr(t, err, field+": required field must not be null")
		})
	}
}

func TestParseWorkOrderInvalid(t *testing.T) {
	cond := func(kind, path string) map[string]any { return map[string]any{"kind": kind, "path": path} }
	for _, tc := range []struct {
		name string
		data []byte
		want []string // substrings that must all appear in the error
	}{
		{"unknown top-level field", orderWith(t, func(m map[string]any) { m["priority"] = 1 }),
			[]string{"priority: unknown field", "allowed: "}},
		{"field name in another case", orderWith(t, func(m map[string]any) { m["ID"] = "x" }),
			[]string{"ID: unknown field"}},
		{"unknown field in a condition", orderWith(t, func(m map[string]any) {
			m["preconditions"] = []any{map[string]any{"kind": "file_exists", "path": "a.py", "extra": true}}
		}), []string{"preconditions[0].extra: unknown field"}},
		{"unknown field in a later condition", orderWith(t, func(m map[string]any) {
			m["postconditions"] = []any{cond(FileExists, "a.py"), map[string]any{"kind": "file_exists", "path": "a.py", "mode": "x"}}
		}), []string{"postconditions[1].mode: unknown field"}},
		{"condition missing path", orderWith(t, func(m map[string]any) {
			m["preconditions"] = []any{map[string]any{"kind": "file_exists"}}
		}), []string{"preconditions[0].path: required field is missing"}},
		{"duplicate key", []byte(`{"id":"a","id":"b","title":"T","intent":"I","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["x"],"context_files":[]}`),
			[]string{`duplicate key "id"`}},
		{"duplicate key spelled with an escape", []byte(`{"id":"a","\u0069d":"b","title":"T","intent":"I","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["x"],"context_files":[]}`),
			[]string{`duplicate key "id"`}},
		{"duplicate key in a condition", []byte(`{"id":"a","title":"T","intent":"I","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["x"],"context_files":[],"preconditions":[{"kind":"file_exists","path":"a.py","path":"b.py"}]}`),
			[]string{"preconditions[0]", `duplicate key "path"`}},
		{"wrong type string", orderWith(t, func(m map[string]any) { m["id"] = 5 }),
			[]string{"id: expected string", "number"}},
		{"wrong type bool", orderWith(t, func(m map[string]any) { m["verify_exempt"] = "yes" }),
			[]string{"verify_exempt: expected bool"}},
		{"wrong type notes", orderWith(t, func(m map[string]any) { m["notes"] = []any{"a"} }),
			[]string{"notes: expected"}},
		{"string instead of list", orderWith(t, func(m map[string]any) { m["allowed_files"] = "a.py" }),
			[]string{"allowed_files: expected a JSON array"}},
		{"number in a string list", orderWith(t, func(m map[string]any) { m["allowed_files"] = []any{"a.py", 7} }),
			[]string{"allowed_files", "expected string"}},
		{"null in a string list", orderWith(t, func(m map[string]any) { m["forbidden"] = []any{nil} }),
			[]string{"forbidden[0]: must not be null"}},
		{"null condition", orderWith(t, func(m map[string]any) { m["preconditions"] = []any{nil} }),
			[]string{"preconditions[0]: must not be null"}},
		{"condition not an object", orderWith(t, func(m map[string]any) { m["preconditions"] = []any{"a.py"} }),
			[]string{"preconditions[0]: expected a JSON object"}},
		{"top level array", []byte(`[` + minimalOrder + `]`), []string{"top-level value: expected a JSON object"}},
		{"top level null", []byte(` null `), []string{"top-level value: must not be null"}},
		{"trailing data", []byte(minimalOrder + ` {}`), []string{"unexpected data after the top-level value"}},
		{"trailing garbage", []byte(minimalOrder + `x`), []string{"unexpected data after the top-level value"}},
		{"truncated", []byte(minimalOrder[:len(minimalOrder)-1]), []string{"invalid JSON"}},
		{"empty input", []byte(``), []string{"invalid JSON"}},
		{"invalid UTF-8", []byte(strings.Replace(minimalOrder, `"T"`, "\"T\xff\"", 1)), []string{"not valid UTF-8"}},
		{"empty id", orderWith(t, func(m map[string]any) { m["id"] = " " }), []string{"id: must not be empty"}},
		{"empty title", orderWith(t, func(m map[string]any) { m["title"] = "" }), []string{"title: must not be empty"}},
		{"empty intent", orderWith(t, func(m map[string]any) { m["intent"] = "\n" }), []string{"intent: must not be empty"}},
		{"empty allowed list", orderWith(t, func(m map[string]any) { m["allowed_files"] = []any{} }),
			[]string{"allowed_files: must list at least one file"}},
		{"empty acceptance list", orderWith(t, func(m map[string]any) { m["acceptance_commands"] = []any{} }),
			[]string{"acceptance_commands: must list at least one command"}},
		{"blank acceptance command", orderWith(t, func(m map[string]any) { m["acceptance_commands"] = []any{"true", "  "} }),
			[]string{"acceptance_commands[1]: must not be empty"}},
		{"11 context files", orderWith(t, func(m map[string]any) {
			var files []any
			for i := range MaxContextFiles + 1 {
				files = append(files, fmt.Sprintf("f%d.py", i))
			}
			m["context_files"] = files
		}), []string{"context_files: lists 11 files; at most 10"}},
		{"postcondition file_absent", orderWith(t, func(m map[string]any) {
			m["postconditions"] = []any{cond(FileAbsent, "a.py")}
		}), []string{"postconditions[0].kind", "may only use"}},
		{"bad precondition kind", orderWith(t, func(m map[string]any) {
			m["preconditions"] = []any{cond("file_present", "a.py")}
		}), []string{"preconditions[0].kind", `not "file_present"`}},
		{"bad postcondition kind", orderWith(t, func(m map[string]any) {
			m["postconditions"] = []any{cond("", "a.py")}
		}), []string{"postconditions[0].kind", "must be"}},
		{"allowed and forbidden overlap exactly", orderWith(t, func(m map[string]any) {
			m["allowed_files"] = []any{"a.py", "b.py"}
			m["forbidden"] = []any{"./b.py"}
		}), []string{"allowed_files[1]", `"b.py" is also covered by forbidden`}},
		{"allowed and forbidden overlap by dir", orderWith(t, func(m map[string]any) {
			m["allowed_files"] = []any{"secrets/k.txt"}
			m["forbidden"] = []any{"secrets/"}
		}), []string{"allowed_files[0]", "also covered by forbidden"}},
		{"allowed and forbidden overlap by glob", orderWith(t, func(m map[string]any) {
			m["allowed_files"] = []any{"poetry.lock"}
			m["forbidden"] = []any{"*.lock"}
		}), []string{"allowed_files[0]", "also covered by forbidden"}},
		{"bad path in allowed_files", orderWith(t, func(m map[string]any) { m["allowed_files"] = []any{"a.py", "../x"} }),
			[]string{"allowed_files[1]", "escapes"}},
		{"bad path in context_files", orderWith(t, func(m map[string]any) { m["context_files"] = []any{"/etc/passwd"} }),
			[]string{"context_files[0]", "absolute"}},
		{"bad path in preconditions", orderWith(t, func(m map[string]any) {
			m["preconditions"] = []any{cond(FileExists, ".git/config")}
		}), []string{"preconditions[0].path", ".git"}},
		{"bad path in postconditions", orderWith(t, func(m map[string]any) {
			m["postconditions"] = []any{cond(FileExists, "*.py")}
		}), []string{"postconditions[0].path", "glob"}},
		{"every problem is reported", orderWith(t, func(m map[string]any) {
			m["title"] = ""
			m["allowed_files"] = []any{"../x", "C:y"}
			m["acceptance_commands"] = []any{}
		}), []string{"title: must not be empty", "allowed_files[0]", "allowed_files[1]", "drive letter", "acceptance_commands: must list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWorkOrder(tc.data)
			if w != nil {
				t.Errorf("ParseWorkOrder returned an order alongside the error")
			}
			wantErr(t, err, tc.want...)
		})
	}
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

var runIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

func mustRunID(t *testing.T, w *WorkOrder, commit string) string {
	t.Helper()
	id, err := RunID(w, commit)
	if err != nil {
		t.Fatal(err)
	}
	if !runIDPattern.MatchString(id) {
		t.Fatalf("RunID = %q, want 16 lowercase hex digits", id)
	}
	return id
}

const testCommit = "0123456789abcdef0123456789abcdef01234567"

func TestRunIDGolden(t *testing.T) {
	// The run id is defined as
	//
	//	hex(sha256(canon.JSON(normalised work order) ++ baseline commit))[:16]
	//
	// where canon.JSON sorts object keys by their UTF-8 bytes, has no
	// insignificant whitespace and no HTML escaping. The golden value was
	// computed once from the order and commit below and must not change:
	// run ids name run directories and ledger entries, so a change here
	// silently breaks the link to every earlier run.
	w := mustParseOrder(t, []byte(`{
		"id": "WO-01",
		"title": "Add multiply",
		"intent": "Add multiply(a, b) to calc.py.",
		"preconditions": [{"kind": "file_exists", "path": "calc.py"}],
		"allowed_files": ["calc.py", "./tests/test_multiply.py"],
		"forbidden": ["scripts/verify.sh", "do not touch <db> & co"],
		"acceptance_commands": ["python3 -m unittest -v"],
		"context_files": ["calc.py"],
		"notes": "Keep add() unchanged."
	}`))
	const wantCanon = `{"acceptance_commands":["python3 -m unittest -v"],"allowed_files":["calc.py","tests/test_multiply.py"],` +
		`"context_files":["calc.py"],"forbidden":["scripts/verify.sh","do not touch <db> & co"],"id":"WO-01",` +
		`"intent":"Add multiply(a, b) to calc.py.","notes":"Keep add() unchanged.","postconditions":[],` +
		`"preconditions":[{"kind":"file_exists","path":"calc.py"}],"title":"Add multiply","verify_exempt":false}`
	b, err := canon.JSON(w)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != wantCanon {
		t.Fatalf("canonical JSON changed:\n got %s\nwant %s", b, wantCanon)
	}
	const golden = "a240efa8695d108a"
	if got := mustRunID(t, w, testCommit); got != golden {
		t.Fatalf("RunID = %s, want golden %s", got, golden)
	}
	// The definition, computed independently of RunID.
	sum := sha256.Sum256([]byte(wantCanon + testCommit))
	if want := hex.EncodeToString(sum[:])[:16]; want != golden {
		t.Fatalf("sha256(canonical JSON + commit)[:16] = %s, golden is %s", want, golden)
	}
}

func TestRunIDNormalisation(t *testing.T) {
	base := mustRunID(t, mustParseOrder(t, orderWith(t, func(m map[string]any) {
		m["allowed_files"] = []any{"a.py", "src/y.py"}
		m["context_files"] = []any{"docs/r.md"}
		m["preconditions"] = []any{map[string]any{"kind": "file_exists", "path": "a.py"}}
	})), testCommit)
	for name, data := range map[string]string{
		"dot slash and dot dot": `{"id":"WO-01","title":"T","intent":"Do it.","allowed_files":["./a.py","src/x/../y.py"],"forbidden":[],` +
			`"acceptance_commands":["python3 -m unittest"],"context_files":["./docs//r.md"],"preconditions":[{"kind":"file_exists","path":"./a.py"}]}`,
		"key order and whitespace": "{\n  \"context_files\": [\"docs/r.md\"],\n  \"forbidden\": [],\n  \"preconditions\": [{\"path\": \"a.py\", \"kind\": \"file_exists\"}],\n" +
			"  \"acceptance_commands\": [\"python3 -m unittest\"],\n  \"allowed_files\": [\"a.py\", \"src/y.py\"],\n  \"intent\": \"Do it.\", \"title\": \"T\", \"id\": \"WO-01\"\n}\n",
		"optional fields explicit": `{"id":"WO-01","title":"T","intent":"Do it.","allowed_files":["a.py","src/y.py"],"forbidden":[],` +
			`"acceptance_commands":["python3 -m unittest"],"context_files":["docs/r.md"],"preconditions":[{"kind":"file_exists","path":"a.py"}],` +
			`"postconditions":null,"notes":null,"verify_exempt":false}`,
		"escaped characters": `{"\u0069d":"WO-0\u0031","title":"T","intent":"Do it\u002e","allowed_files":["a.py","src\/y.py"],"forbidden":[],` +
			`"acceptance_commands":["python3 -m unittest"],"context_files":["docs/r.md"],"preconditions":[{"kind":"file_exists","path":"a.py"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if got := mustRunID(t, mustParseOrder(t, []byte(data)), testCommit); got != base {
				t.Fatalf("RunID = %s, want %s (same order after normalisation)", got, base)
			}
		})
	}
}

func TestRunIDChanges(t *testing.T) {
	base := mustParseOrder(t, []byte(minimalOrder))
	baseID := mustRunID(t, base, testCommit)

	t.Run("commit", func(t *testing.T) {
		if mustRunID(t, base, testCommit[:39]+"8") == baseID {
			t.Fatal("RunID does not depend on the commit")
		}
		if mustRunID(t, base, "") == baseID {
			t.Fatal("RunID with an empty commit equals RunID with a commit")
		}
	})

	// One mutation per JSON field; TestRunIDChanges fails if a field of
	// WorkOrder has none, so a new field cannot be left out of the id.
	mutations := map[string][]func(m map[string]any){
		"id":                  {func(m map[string]any) { m["id"] = "WO-02" }},
		"title":               {func(m map[string]any) { m["title"] = "T2" }},
		"intent":              {func(m map[string]any) { m["intent"] = "Do it!" }},
		"allowed_files":       {func(m map[string]any) { m["allowed_files"] = []any{"b.py"} }, func(m map[string]any) { m["allowed_files"] = []any{"a.py", "a.py"} }},
		"forbidden":           {func(m map[string]any) { m["forbidden"] = []any{"x"} }, func(m map[string]any) { m["forbidden"] = []any{""} }},
		"acceptance_commands": {func(m map[string]any) { m["acceptance_commands"] = []any{"python3 -m unittest", "true"} }},
		"context_files":       {func(m map[string]any) { m["context_files"] = []any{"a.py"} }},
		"preconditions": {func(m map[string]any) {
			m["preconditions"] = []any{map[string]any{"kind": "file_exists", "path": "a.py"}}
		}},
		"postconditions": {func(m map[string]any) {
			m["postconditions"] = []any{map[string]any{"kind": "file_exists", "path": "a.py"}}
		}},
		"notes":         {func(m map[string]any) { m["notes"] = "" }, func(m map[string]any) { m["notes"] = "n" }},
		"verify_exempt": {func(m map[string]any) { m["verify_exempt"] = true }},
	}
	for name := range jsonFields(reflect.TypeFor[WorkOrder]()) {
		if _, ok := mutations[name]; !ok {
			t.Errorf("field %s has no RunID mutation test", name)
		}
	}
	seen := map[string]string{baseID: "base"}
	for _, name := range slices.Sorted(maps.Keys(mutations)) {
		for i, mutate := range mutations[name] {
			label := fmt.Sprintf("%s#%d", name, i)
			t.Run(label, func(t *testing.T) {
				id := mustRunID(t, mustParseOrder(t, orderWith(t, mutate)), testCommit)
				if prev, dup := seen[id]; dup {
					t.Fatalf("RunID %s of mutation %s equals that of %s", id, label, prev)
				}
				seen[id] = label
			})
		}
	}
}

// proposal builds a WriteProposal reply from writes given as
// path, base hash, content triples.
func proposal(t *testing.T, summary string, writes ...[3]string) string {
	t.Helper()
	ws := []map[string]string{}
	for _, w := range writes {
		ws = append(ws, map[string]string{"path": w[0], "base_sha256": w[1], "content": w[2]})
	}
	b, err := json.Marshal(map[string]any{"summary": summary, "writes": ws})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseProposalValid(t *testing.T) {
	h := EmptySHA256
	for _, tc := range []struct {
		name, reply string
		want        *WriteProposal
	}{
		{"one write", proposal(t, "add multiply", [3]string{"calc.py", h, "def f():\n    return 1\n"}),
			&WriteProposal{Summary: "add multiply", Writes: []FileWrite{{Path: "calc.py", BaseSHA256: h, Content: "def f():\n    return 1\n"}}}},
		{"surrounding whitespace", "\n  " + proposal(t, "s", [3]string{"a", h, ""}) + "\n\n",
			&WriteProposal{Summary: "s", Writes: []FileWrite{{Path: "a", BaseSHA256: h}}}},
		{"paths are not checked here", proposal(t, "", [3]string{"../x", h, "<&>"}),
			&WriteProposal{Writes: []FileWrite{{Path: "../x", BaseSHA256: h, Content: "<&>"}}}},
		{"file of exactly MaxWriteBytes", proposal(t, "s", [3]string{"a", h, strings.Repeat("a", MaxWriteBytes)}),
			&WriteProposal{Summary: "s", Writes: []FileWrite{{Path: "a", BaseSHA256: h, Content: strings.Repeat("a", MaxWriteBytes)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProposal(tc.reply)
			if err != nil {
				t.Fatalf("ParseProposal: %v", err)
			}
			if !reflect.DeepEqual(p, tc.want) {
				t.Fatalf("got %#v\nwant %#v", p, tc.want)
			}
		})
	}
}

func TestParseProposalInvalid(t *testing.T) {
	h := EmptySHA256
	valid := proposal(t, "s", [3]string{"a.py", h, "x"})
	big := strings.Repeat("a", MaxWriteBytes)
	for _, tc := range []struct {
		name, reply string
		want        []string
	}{
		{"prose before", "Here is the proposal:\n" + valid, []string{"does not start with a JSON object"}},
		{"prose after", valid + "\nLet me know if you need more.", []string{"unexpected data after the top-level value"}},
		{"second object after", valid + valid, []string{"unexpected data after the top-level value"}},
		{"markdown json fence", "```json\n" + valid + "\n```", []string{"does not start with a JSON object", "markdown"}},
		{"markdown bare fence", "```\n" + valid + "\n```", []string{"does not start with a JSON object"}},
		{"top-level array", "[" + valid + "]", []string{"does not start with a JSON object"}},
		{"empty reply", "", []string{"does not start with a JSON object"}},
		{"empty writes", `{"summary":"s","writes":[]}`, []string{"writes and edits are both empty"}},
		{"missing writes", `{"summary":"s"}`, []string{"writes and edits are both empty"}},
		{"edit of a new file", `{"summary":"s","edits":[{"path":"a","base_sha256":"` + h + `","replace":[{"old":"x","new":"y"}]}]}`, []string{"edits[0]: base_sha256 is that of an empty or new file"}},
		{"edit with no replace", `{"summary":"s","edits":[{"path":"a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[]}]}`, []string{"edits[0].replace: must contain at least one edit"}},
		{"edit with a NUL", `{"summary":"s","edits":[{"path":"a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[{"old":"x","new":"\u0000"}]}]}`, []string{"edits[0].replace[0]: contains a NUL byte"}},
		{"edit over MaxWriteBytes", `{"summary":"s","edits":[{"path":"a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[{"old":"` + strings.Repeat("o", MaxWriteBytes/2) + `","new":"` + strings.Repeat("n", MaxWriteBytes/2+1) + `"}]}]}`, []string{"edits[0].replace[0]: old and new are", "per-edit limit"}},
		{"path written and edited", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":""}],"edits":[{"path":"./a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[{"old":"x","new":"y"}]}]}`, []string{"edits[0]: ./a is already named by writes[0]"}},
		{"path edited twice", `{"summary":"s","edits":[{"path":"a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[{"old":"x","new":"y"}]},{"path":"a","base_sha256":"` + strings.Repeat("a", 64) + `","replace":[{"old":"z","new":"y"}]}]}`, []string{"edits[1]: a is already named by edits[0]", "one replace list"}},
		{"missing summary", `{"writes":[{"path":"a","base_sha256":"` + h + `","content":""}]}`, []string{"summary: required field is missing"}},
		{"null writes", `{"summary":"s","writes":null}`, []string{"writes and edits are both empty"}},
		{"null write", `{"summary":"s","writes":[null]}`, []string{"writes[0]: must not be null"}},
		{"writes as an object", `{"summary":"s","writes":{"path":"a","base_sha256":"` + h + `","content":""}}`, []string{"writes: expected a JSON array"}},
		{"missing base_sha256", `{"summary":"s","writes":[{"path":"a","content":""}]}`, []string{"writes[0].base_sha256: required field is missing"}},
		{"missing content", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `"}]}`, []string{"writes[0].content: required field is missing"}},
		{"null content", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":null}]}`, []string{"writes[0].content: required field must not be null"}},
		{"uppercase hash", proposal(t, "s", [3]string{"a", strings.ToUpper(h), ""}), []string{"writes[0].base_sha256", "not 64 lowercase hex"}},
		{"63-char hash", proposal(t, "s", [3]string{"a", h[:63], ""}), []string{"writes[0].base_sha256", "not 64 lowercase hex"}},
		{"65-char hash", proposal(t, "s", [3]string{"a", h + "0", ""}), []string{"writes[0].base_sha256", "not 64 lowercase hex"}},
		{"hash with newline", proposal(t, "s", [3]string{"a", h + "\n", ""}), []string{"writes[0].base_sha256", "not 64 lowercase hex"}},
		{"bad hash in second write", proposal(t, "s", [3]string{"a", h, ""}, [3]string{"b", "0", ""}), []string{"writes[1].base_sha256"}},
		{"NUL in content", proposal(t, "s", [3]string{"a", h, "bin\x00ary"}), []string{"writes[0].content", "NUL"}},
		{"content over MaxWriteBytes", proposal(t, "s", [3]string{"a", h, big + "a"}), []string{"writes[0].content", "per-file limit"}},
		{"total over MaxProposalBytes", proposal(t, "s", [3]string{"a", h, big}, [3]string{"b", h, big}, [3]string{"c", h, big}),
			[]string{"614400 bytes in total", "per-proposal limit"}},
		{"reply over MaxReplyBytes", proposal(t, strings.Repeat("s", MaxReplyBytes), [3]string{"a", h, ""}), []string{"reply is", "the limit is"}},
		{"whitespace padding over MaxReplyBytes", valid + strings.Repeat(" ", MaxReplyBytes), []string{"reply is"}},
		{"duplicate content key", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"x","content":"y"}]}`,
			[]string{"writes[0]", `duplicate key "content"`}},
		{"duplicate top-level key", `{"summary":"s","summary":"t","writes":[{"path":"a","base_sha256":"` + h + `","content":""}]}`,
			[]string{`duplicate key "summary"`}},
		{"extra field mode", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"","mode":"0755"}]}`,
			[]string{"writes[0].mode: unknown field"}},
		{"extra top-level field", `{"summary":"s","deletes":["a"],"writes":[{"path":"a","base_sha256":"` + h + `","content":""}]}`,
			[]string{"deletes: unknown field"}},
		{"content as number", `{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":1}]}`,
			[]string{"content: expected string"}},
		{"invalid UTF-8", "{\"summary\":\"\xff\",\"writes\":[{\"path\":\"a\",\"base_sha256\":\"" + h + "\",\"content\":\"\"}]}",
			[]string{"not valid UTF-8"}},
		{"truncated", valid[:len(valid)-2], []string{"invalid JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProposal(tc.reply)
			if p != nil {
				t.Errorf("ParseProposal returned a proposal alongside the error")
			}
			wantErr(t, err, tc.want...)
		})
	}
}
