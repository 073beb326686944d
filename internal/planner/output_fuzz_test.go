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
func FuzzLoadPlanFile(f *testing.F) {
	for _, p := range []string{"../../example/work_order.json", "../../examples/textstats/answers/plan.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	one := plan(f, nil, wo(1))
	f.Add(one)
	f.Add(mustJSON(f, wo(1)))
	f.Add(bytes.Replace(one, []byte("{"), []byte(`{"compile":{"model":"m"},`), 1))
	f.Add(bytes.Replace(one, []byte("{"), []byte(`{"compile":{},"work_orders":[],`), 1))
	f.Add([]byte(`{"id":"WO-01","id":"WO-02"}`))
	f.Add([]byte(`[1]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "plan.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		raw, lone, err := LoadPlan(file)
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
