package workorder

import (
	"encoding/json"
	"reflect"
	"testing"
)

// manifestWith builds a manifest of the minimal order (twice) and a verify
// contract, changed by mutate.
func manifestWith(t *testing.T, mutate func(m map[string]any)) []byte {
	t.Helper()
	var order map[string]any
	if err := json.Unmarshal([]byte(minimalOrder), &order); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"verify_contract": map[string]any{
			"command":  "bash scripts/verify.sh",
			"requires": []any{map[string]any{"kind": FileExists, "path": "./scripts/verify.sh"}},
		},
		"work_orders": []any{order, order},
	}
	if mutate != nil {
		mutate(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseManifestValid(t *testing.T) {
	m, err := ParseManifest(manifestWith(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &VerifyContract{Command: "bash scripts/verify.sh", Requires: []Condition{{Kind: FileExists, Path: "scripts/verify.sh"}}}
	if !reflect.DeepEqual(m.VerifyContract, want) {
		t.Errorf("verify_contract = %#v, want %#v (paths normalised)", m.VerifyContract, want)
	}
	order, err := ParseWorkOrder([]byte(minimalOrder))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.WorkOrders) != 2 || !reflect.DeepEqual(&m.WorkOrders[1], order) {
		t.Errorf("work orders = %#v, want two of %#v", m.WorkOrders, order)
	}

	for name, mutate := range map[string]func(m map[string]any){
		"no contract":    func(m map[string]any) { delete(m, "verify_contract") },
		"null contract":  func(m map[string]any) { m["verify_contract"] = nil },
		"empty requires": func(m map[string]any) { m["verify_contract"] = map[string]any{"command": "c", "requires": []any{}} },
		"file_absent requirement": func(m map[string]any) {
			m["verify_contract"] = map[string]any{"command": "c", "requires": []any{map[string]any{"kind": FileAbsent, "path": "x"}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseManifest(manifestWith(t, mutate)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseManifestInvalid(t *testing.T) {
	contract := func(c map[string]any) func(m map[string]any) {
		return func(m map[string]any) { m["verify_contract"] = c }
	}
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
		want   []string
	}{
		{"missing work_orders", func(m map[string]any) { delete(m, "work_orders") }, []string{"work_orders: required field is missing"}},
		{"null work_orders", func(m map[string]any) { m["work_orders"] = nil }, []string{"work_orders: required field must not be null"}},
		{"empty work_orders", func(m map[string]any) { m["work_orders"] = []any{} }, []string{"work_orders: must list at least one"}},
		{"unknown key", func(m map[string]any) { m["compile"] = map[string]any{} }, []string{"compile: unknown field"}},
		{"bad order", func(m map[string]any) {
			m["work_orders"].([]any)[1] = map[string]any{"id": "x"}
		}, []string{"work_orders[1].acceptance_commands: required field is missing"}},
		{"invalid order", func(m map[string]any) {
			var o map[string]any
			json.Unmarshal([]byte(minimalOrder), &o)
			o["allowed_files"] = []any{"../x"}
			o["title"] = " "
			m["work_orders"] = []any{o}
		}, []string{"work_orders[0].allowed_files[0]: path", "escapes", "work_orders[0].title: must not be empty"}},
		{"contract without requires", contract(map[string]any{"command": "c"}), []string{"verify_contract.requires: required field is missing"}},
		{"contract null requires", contract(map[string]any{"command": "c", "requires": nil}), []string{"verify_contract.requires: required field must not be null"}},
		{"contract blank command", contract(map[string]any{"command": "  ", "requires": []any{}}), []string{"verify_contract.command: must not be empty"}},
		{"contract bad kind", contract(map[string]any{"command": "c", "requires": []any{map[string]any{"kind": "exists", "path": "a"}}}),
			[]string{`verify_contract.requires[0].kind: must be "file_exists" or "file_absent", not "exists"`}},
		{"contract bad path", contract(map[string]any{"command": "c", "requires": []any{map[string]any{"kind": FileExists, "path": "/abs"}}}),
			[]string{"verify_contract.requires[0].path: path \"/abs\" is absolute"}},
		{"contract glob", contract(map[string]any{"command": "c", "requires": []any{map[string]any{"kind": FileExists, "path": "tests/*.py"}}}),
			[]string{"verify_contract.requires[0].path", "glob"}},
		{"contract extra field", contract(map[string]any{"command": "c", "requires": []any{}, "timeout": 5}), []string{"verify_contract.timeout: unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest(manifestWith(t, tc.mutate))
			if m != nil {
				t.Error("ParseManifest returned a manifest alongside the error")
			}
			wantErr(t, err, tc.want...)
		})
	}
}

func TestVerifyContractNormalizeNilRequires(t *testing.T) {
	c := VerifyContract{Command: "c"}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Requires == nil {
		t.Fatal("nil requires not turned into an empty list")
	}
}

func TestManifestSchemaValidates(t *testing.T) {
	s := compileSchema(t, "manifest.schema.json")
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
		valid  bool
	}{
		{"full", nil, true},
		{"no contract", func(m map[string]any) { delete(m, "verify_contract") }, true},
		{"null contract", func(m map[string]any) { m["verify_contract"] = nil }, true},
		{"missing work_orders", func(m map[string]any) { delete(m, "work_orders") }, false},
		{"empty work_orders", func(m map[string]any) { m["work_orders"] = []any{} }, false},
		{"extra key", func(m map[string]any) { m["x"] = 1 }, false},
		{"contract without command", func(m map[string]any) { m["verify_contract"] = map[string]any{"requires": []any{}} }, false},
		{"contract as string", func(m map[string]any) { m["verify_contract"] = "bash scripts/verify.sh" }, false},
		{"bad order", func(m map[string]any) { m["work_orders"] = []any{map[string]any{"id": "WO-01"}} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := manifestWith(t, tc.mutate)
			err := validateJSON(t, s, data)
			if tc.valid && err != nil {
				t.Fatalf("schema rejects a valid manifest: %v", err)
			}
			if !tc.valid && err == nil {
				t.Fatalf("schema accepts an invalid manifest: %s", data)
			}
			if _, perr := ParseManifest(data); (perr == nil) != tc.valid {
				t.Fatalf("ParseManifest disagrees with the schema (valid=%v): %v", tc.valid, perr)
			}
		})
	}
}
