package planner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/workorder"
)

func TestLoadPlanFile(t *testing.T) {
	order := `{"id":"WO-03","title":"t","intent":"i","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["true"],"context_files":[]}`
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		lone          bool
		wantErr       string
	}{
		{name: "lone work order", content: order, lone: true},
		{name: "manifest", content: `{"work_orders":[` + order + `]}`},
		{name: "not JSON", content: "{bad"},
		{name: "over the read limit", content: strings.Repeat(" ", maxPlanFileBytes+1), wantErr: "larger than the limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			os.WriteFile(file, []byte(tt.content), 0o644)
			_, lone, err := LoadPlan(file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || lone != tt.lone {
				t.Fatalf("lone = %v, err = %v; want lone = %v", lone, err, tt.lone)
			}
		})
	}
}

func TestLoadPlanDirectory(t *testing.T) {
	wo := func(id string) string {
		return `{"id":"` + id + `","title":"t","intent":"i","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["true"],"context_files":[]}`
	}
	tests := []struct {
		name    string
		files   map[string]string
		want    string // substring of the loaded plan
		wantErr string
	}{
		{name: "orders and contract", files: map[string]string{"WO-01.json": wo("WO-01"), ManifestName: `{"compile":{},"verify_contract":{"command":"bash scripts/verify.sh","requires":[]},"work_orders":[]}`}, want: `"verify_contract":{"command"`},
		{name: "file named after another id", files: map[string]string{"WO-07.json": wo("WO-02")}, wantErr: "name the file after its id"},
		{name: "corrupt manifest", files: map[string]string{"WO-01.json": wo("WO-01"), ManifestName: "{bad"}, wantErr: "not a JSON object"},
		{name: "manifest only", files: map[string]string{ManifestName: `{"compile":{"model":"m"},"verify_contract":null,"work_orders":[` + wo("WO-01") + `]}`}, want: `"work_orders"`},
		{name: "empty directory", files: map[string]string{}, wantErr: "no WO-NN.json files"},
		{name: "work order file over the limit", files: map[string]string{"WO-01.json": wo("WO-01") + strings.Repeat(" ", 1<<20)}, wantErr: "larger than the limit of 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
			}
			got, _, err := LoadPlan(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(string(got), tt.want) || strings.Contains(string(got), `"compile"`) {
				t.Errorf("LoadPlan = %s, %v; want %q and no compile block", got, err, tt.want)
			}
		})
	}
}

// A repaired plan's directory: WO-NNrK.json files are part of the plan, in
// id order (WO-03r2 before WO-03r10), or in the manifest's order when the
// manifest lists exactly the directory's orders.
func TestLoadPlanDirectoryRepairIDs(t *testing.T) {
	wo := func(id string) string {
		return `{"id":"` + id + `","title":"t","intent":"i","allowed_files":["a.py"],"forbidden":[],"acceptance_commands":["true"],"context_files":[]}`
	}
	ids := func(raw []byte) []string {
		var p struct {
			WorkOrders []struct{ ID string } `json:"work_orders"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range p.WorkOrders {
			out = append(out, w.ID)
		}
		return out
	}
	for name, c := range map[string]struct {
		manifest []string // nil: no manifest
		want     []string
	}{
		"id order":                 {nil, []string{"WO-01", "WO-03", "WO-03r1", "WO-03r2", "WO-03r10", "WO-04", "WO-05"}},
		"manifest order":           {[]string{"WO-01", "WO-05", "WO-03r2", "WO-03r1", "WO-03r10", "WO-03", "WO-04"}, []string{"WO-01", "WO-05", "WO-03r2", "WO-03r1", "WO-03r10", "WO-03", "WO-04"}},
		"manifest of another plan": {[]string{"WO-01", "WO-02"}, []string{"WO-01", "WO-03", "WO-03r1", "WO-03r2", "WO-03r10", "WO-04", "WO-05"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, id := range []string{"WO-05", "WO-03r10", "WO-04", "WO-03r2", "WO-01", "WO-03r1", "WO-03"} {
				os.WriteFile(filepath.Join(dir, id+".json"), []byte(wo(id)), 0o644)
			}
			if c.manifest != nil {
				var list []string
				for _, id := range c.manifest {
					list = append(list, wo(id))
				}
				os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"verify_contract":null,"work_orders":[`+strings.Join(list, ",")+`]}`), 0o644)
			}
			raw, _, err := LoadPlan(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(raw); !slices.Equal(got, c.want) {
				t.Errorf("orders %v, want %v", got, c.want)
			}
		})
	}
	// WritePlan removes a stale WO-NNrK.json as it does a WO-NN.json.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "WO-02r1.json"), []byte(wo("WO-02r1")), 0o644)
	var w workorder.WorkOrder
	if err := json.Unmarshal([]byte(wo("WO-01")), &w); err != nil {
		t.Fatal(err)
	}
	if _, err := WritePlan(dir, &workorder.Manifest{WorkOrders: []workorder.WorkOrder{w}}, CompileInfo{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "WO-02r1.json")); !os.IsNotExist(err) {
		t.Errorf("stale WO-02r1.json: %v", err)
	}
}
