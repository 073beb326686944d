package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
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
