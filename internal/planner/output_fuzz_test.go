package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/workorder"
)

// FuzzLoadPlanFile feeds a plan file (a manifest, one written by the
// compiler with its provenance, or a lone work order) through LoadPlan and
// Validate, as `factory validate` and `factory build --plan` do. What the
// validator accepts must be what the strict decoders accept: a lone work
// order exactly as `factory run` reads it (ParseWorkOrder), a plan without
// provenance as ParseManifest reads it, and never a file whose top-level
// object repeats a key (DecodeStrict refuses those; a re-encoding must not
// hide them).
//
// Each input goes through planBytes, what LoadPlan does with a file's
// bytes once read (the seeds are read through LoadPlan too, and must give
// the same; the read limit is TestLoadPlanFile's); the seeds are short
// plans made here: the example plan files (0.9 and 6 KB), written to a
// file and read back for every input, made it a tenth as fast.
func FuzzLoadPlanFile(f *testing.F) {
	python := func(m map[string]any) {
		m["acceptance_commands"] = strs(`python3 -c "from calc import multiply; assert multiply(3, 4) == 12"`, "python3 -m unittest tests.test_multiply -v")
	}
	lone := wo(1, set("preconditions", conds(exists("calc.py"), absent("tests/test_multiply.py"))),
		creates("calc.py", "tests/test_multiply.py"), set("forbidden", strs("scripts/verify.sh")), python, set("notes", "Keep add()."))
	two := plan(f, contract(exists("scripts/verify.sh")),
		wo(1, set("preconditions", conds(absent("calc.py"))), creates("calc.py", "scripts/verify.sh")),
		wo(2, set("preconditions", conds(exists("calc.py"))), creates("calc.py", "tests/test_multiply.py"), python))
	one := plan(f, nil, wo(1))
	seeds := [][]byte{
		mustJSON(f, lone),
		two,
		one,
		mustJSON(f, wo(1)),
		bytes.Replace(one, []byte("{"), []byte(`{"compile":{"model":"m"},`), 1),
		bytes.Replace(one, []byte("{"), []byte(`{"compile":{},"work_orders":[],`), 1),
		[]byte(`{"id":"WO-01","id":"WO-02"}`),
		[]byte(`[1]`),
	}
	file := filepath.Join(f.TempDir(), "plan.json")
	for _, s := range seeds {
		f.Add(s)
		if err := os.WriteFile(file, s, 0o644); err != nil {
			f.Fatal(err)
		}
		raw, lone, err := LoadPlan(file)
		braw, blone, berr := planBytes(s)
		if !bytes.Equal(raw, braw) || lone != blone || (err == nil) != (berr == nil) {
			f.Fatalf("LoadPlan of a file is not planBytes of its bytes: %s", s)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, lone, err := planBytes(data)
		if err != nil {
			return
		}
		res := Validate(context.Background(), raw, Env{LoneOrder: lone, Python: &fakePython{}})
		again := Validate(context.Background(), raw, Env{LoneOrder: lone, Python: &fakePython{}})
		if !reflect.DeepEqual(res, again) {
			t.Fatalf("not deterministic")
		}
		if res.Manifest == nil {
			return
		}
		if dup, ok := canon.RepeatedKey(data); ok {
			t.Fatalf("accepted a plan file whose top level repeats %q: %s", dup, data)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(data, &top)
		switch _, compiled := top["compile"]; {
		case lone:
			w, err := workorder.ParseWorkOrder(data)
			if err != nil {
				t.Fatalf("validate accepts a lone work order that factory run refuses: %v", err)
			}
			if !reflect.DeepEqual(*w, res.Manifest.WorkOrders[0]) {
				t.Fatalf("validate and factory run read the order differently:\n%+v\n%+v", *w, res.Manifest.WorkOrders[0])
			}
		case !compiled:
			m, err := workorder.ParseManifest(data)
			if err != nil {
				t.Fatalf("validate accepts a plan that ParseManifest refuses: %v", err)
			}
			if !reflect.DeepEqual(m, res.Manifest) {
				t.Fatalf("validate and ParseManifest read the plan differently")
			}
		}
	})
}
