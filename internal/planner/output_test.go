package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
			}
			got, err := LoadPlan(dir)
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
