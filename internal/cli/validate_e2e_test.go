package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/planner"
)

func TestValidateReportsErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.json")
	os.WriteFile(path, []byte(invalidPlan(t)), 0o644)
	res := runFactory(t, nil, "validate", "--json", path)
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (errors found)\n%s%s", res.code, res.stdout, res.stderr)
	}
	var out struct {
		Errors   []planner.Issue `json:"errors"`
		Warnings []planner.Issue `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || len(out.Errors) != 1 || out.Errors[0].Code != "E105" || out.Warnings == nil {
		t.Errorf("result = %+v (%v)\n%s", out, err, res.stdout)
	}
}

// A repaired plan written out (a directory of WO-NN.json and WO-NNrK.json
// files, or its manifest alone, as a build's repairs/<N>/plan_after.json)
// validates: WO-03r1 is a work order id.
func TestValidateAcceptsRepairedPlan(t *testing.T) {
	var p struct {
		VerifyContract json.RawMessage  `json:"verify_contract"`
		WorkOrders     []map[string]any `json:"work_orders"`
	}
	if err := json.Unmarshal([]byte(validPlan(t)), &p); err != nil {
		t.Fatal(err)
	}
	added := maps.Clone(p.WorkOrders[1])
	added["id"], added["title"] = "WO-03r1", "Multiply again, as a repair revised it"
	p.WorkOrders = append(p.WorkOrders, added)
	dir := t.TempDir()
	for _, w := range p.WorkOrders {
		data, _ := json.Marshal(w)
		os.WriteFile(filepath.Join(dir, w["id"].(string)+".json"), data, 0o644)
	}
	manifest, _ := json.Marshal(p)
	os.WriteFile(filepath.Join(dir, planner.ManifestName), manifest, 0o644)
	for _, path := range []string{dir, filepath.Join(dir, planner.ManifestName), filepath.Join(dir, "WO-03r1.json")} {
		res := runFactory(t, nil, "validate", "--json", path)
		if res.code != 0 {
			t.Fatalf("validate %s: exit %d, want 0\n%s%s", path, res.code, res.stdout, res.stderr)
		}
	}
	// Ids still may not repeat.
	dup := maps.Clone(p.WorkOrders[1])
	dup["id"] = "WO-03r1"
	p.WorkOrders[1] = dup
	manifest, _ = json.Marshal(p)
	file := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(file, manifest, 0o644)
	if res := runFactory(t, nil, "validate", file); res.code != 1 || !strings.Contains(res.stdout, "E001") {
		t.Errorf("a repaired plan with WO-03r1 twice: exit %d, want 1 and E001\n%s%s", res.code, res.stdout, res.stderr)
	}
}
