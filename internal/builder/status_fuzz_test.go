package builder

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
)

// FuzzReadStatus feeds ReadStatus (`factory status`) arbitrary
// build_summary.json files: the summary only adds the details of a
// failure, so whatever it says, a work order is reported passed exactly
// when a commit on the branch carries its trailers (that commit), every
// outcome is one of the three, and the order ids are the plan's.
func FuzzReadStatus(f *testing.F) {
	dir := f.TempDir()
	repoDir := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		f.Fatal(err)
	}
	git(f, repoDir, "init", "-q", "-b", "main")
	git(f, repoDir, "commit", "-q", "--allow-empty", "-m", "start")
	git(f, repoDir, "checkout", "-q", "-b", "factory/1234567890abcdef")
	git(f, repoDir, "commit", "-q", "--allow-empty", "-m", "factory: WO-01 a\n\nFactory-Work-Order: WO-01\nFactory-Plan: 1234567890abcdef\n")
	wo1 := git(f, repoDir, "rev-parse", "HEAD")
	planDir := filepath.Join(dir, "plan")
	order := func(id string) string {
		return `{"id":"` + id + `","title":"T","intent":"Do it.","allowed_files":["a.py"],"forbidden":[],` +
			`"acceptance_commands":["python3 a.py"],"context_files":["a.py"]}`
	}
	if err := os.MkdirAll(planDir, 0o755); err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"WO-01", "WO-02", "WO-03"} {
		if err := os.WriteFile(filepath.Join(planDir, id+".json"), []byte(order(id)), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	buildDir := filepath.Join(dir, "build")
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	repo, err := gitws.Open(ctx, repoDir)
	if err != nil {
		f.Fatal(err)
	}
	pointer, _ := json.Marshal(Pointer{PlanHash: "1234567890abcdef", PlanDir: planDir, PlanSource: PlanGiven, Branch: "factory/1234567890abcdef", BuildDir: buildDir})
	if err := os.MkdirAll(repo.FactoryFile(""), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(repo.FactoryFile(PointerFile), pointer, 0o644); err != nil {
		f.Fatal(err)
	}
	good, _ := json.MarshalIndent(Summary{Verdict: "FAIL", PlanHash: "1234567890abcdef", Failed: "WO-02", WorkOrders: []WorkOrder{
		{ID: "WO-01", Title: "T", Outcome: OutcomePassed, Commit: wo1, Attempts: 1},
		{ID: "WO-02", Title: "T", Outcome: OutcomeFailed, Stage: "acceptance", Attempts: 3},
		{ID: "WO-03", Title: "T", Outcome: OutcomePending},
	}}, "", "  ")
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"failed":"WO-02","work_orders":[{"id":"WO-02","outcome":"passed","commit":"0123456789abcdef0123456789abcdef01234567"}]}`))
	f.Add([]byte(`{"failed":"WO-03","work_orders":[{"id":"WO-03","outcome":"exploded"}]}`))
	f.Add([]byte(`{"failed":"WO-01","work_orders":[{"id":"WO-01","outcome":"failed"}]}`))
	f.Add([]byte(`{"plan_source":"compiled","work_orders":null}`))
	wantIDs := []string{"WO-01", "WO-02", "WO-03"}
	f.Fuzz(func(t *testing.T, summary []byte) {
		if err := os.WriteFile(filepath.Join(buildDir, "build_summary.json"), summary, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := ReadStatus(ctx, repoDir)
		if err != nil {
			t.Fatalf("a damaged build summary made the status unreadable: %v", err)
		}
		again, err := ReadStatus(ctx, repoDir)
		if err != nil || !reflect.DeepEqual(st, again) {
			t.Fatalf("not deterministic: %v", err)
		}
		var ids []string
		for _, w := range st.WorkOrders {
			ids = append(ids, w.ID)
			switch w.Outcome {
			case OutcomePassed, OutcomeFailed, OutcomePending:
			default:
				t.Fatalf("%s: outcome %q is none of the three", w.ID, w.Outcome)
			}
			if passed := w.ID == "WO-01"; (w.Outcome == OutcomePassed) != passed || passed && w.Commit != wo1 {
				t.Fatalf("%s reported %s (commit %q), but git says passed=%v (commit %s)", w.ID, w.Outcome, w.Commit, passed, wo1)
			}
		}
		if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
			t.Fatalf("work orders %q, want the plan's %q", ids, wantIDs)
		}
	})
}
