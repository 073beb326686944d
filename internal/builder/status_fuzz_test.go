package builder

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
)

// FuzzReadStatus feeds ReadStatus (`factory status`) arbitrary
// build_summary.json files: the summary only adds the details of a
// failure, so whatever it says, a work order is reported passed exactly
// when a commit on the branch carries its trailers (that commit), every
// outcome is one of the three, the order ids and what each depends on are
// the plan's, and the rest is the pointer's, the spend record's and git's.
// Git and the files are read once (readStatusFacts, as ReadStatus reads
// them; ReadStatus of the first seed is checked to be their merge) and
// each input is merged with them (statusFacts.status, what ReadStatus
// does with them): about eight git processes an input took 1 s on two
// loaded cores, and a 10 s run executed 12 inputs.
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
	good, _ := json.Marshal(Summary{Verdict: "FAIL", PlanHash: "1234567890abcdef", Failed: "WO-02", WorkOrders: []WorkOrder{
		{ID: "WO-01", Title: "T", Outcome: OutcomePassed, Commit: wo1, Attempts: 1},
		{ID: "WO-02", Title: "T", Outcome: OutcomeFailed, Stage: "acceptance", Attempts: 3},
		{ID: "WO-03", Title: "T", Outcome: OutcomePending},
	}})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"failed":"WO-02","work_orders":[{"id":"WO-02","outcome":"passed","commit":"0123456789abcdef0123456789abcdef01234567"}]}`))
	f.Add([]byte(`{"failed":"WO-03","work_orders":[{"id":"WO-03","outcome":"exploded"}]}`))
	f.Add([]byte(`{"failed":"WO-01","work_orders":[{"id":"WO-01","outcome":"failed"}]}`))
	f.Add([]byte(`{"failed":"WO-02","work_orders":[{"id":"WO-02","outcome":"failed","depends_on":["WO-09"]}]}`))
	f.Add([]byte(`{"plan_source":"compiled","work_orders":null}`))

	// The files and git, read once, as ReadStatus reads them.
	if err := os.WriteFile(filepath.Join(buildDir, "build_summary.json"), good, 0o644); err != nil {
		f.Fatal(err)
	}
	facts, err := readStatusFacts(ctx, repoDir)
	if err != nil {
		f.Fatal(err)
	}
	st, err := ReadStatus(ctx, repoDir)
	if err != nil {
		f.Fatal(err)
	}
	if !bytes.Equal(facts.summary, good) || !reflect.DeepEqual(st, facts.status()) {
		f.Fatalf("ReadStatus is not the merge of what it reads:\n%+v\n%+v", st, facts.status())
	}
	if facts.passed["WO-01"] != wo1 || len(facts.passed) != 1 {
		f.Fatalf("git's passed orders %v, want WO-01 at %s", facts.passed, wo1)
	}
	// What no summary changes: the status without one.
	bare := *facts
	bare.summary = nil
	base := bare.status()
	wantIDs := []string{"WO-01", "WO-02", "WO-03"}
	f.Fuzz(func(t *testing.T, summary []byte) {
		in := *facts
		in.summary = summary
		st := in.status()
		if again := in.status(); !reflect.DeepEqual(st, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", st, again)
		}
		var ids []string
		for i, w := range st.WorkOrders {
			ids = append(ids, w.ID)
			switch w.Outcome {
			case OutcomePassed, OutcomeFailed, OutcomePending:
			default:
				t.Fatalf("%s: outcome %q is none of the three", w.ID, w.Outcome)
			}
			if passed := w.ID == "WO-01"; (w.Outcome == OutcomePassed) != passed || passed && w.Commit != wo1 {
				t.Fatalf("%s reported %s (commit %q), but git says passed=%v (commit %s)", w.ID, w.Outcome, w.Commit, passed, wo1)
			}
			if i < len(base.WorkOrders) && !slices.Equal(w.DependsOn, base.WorkOrders[i].DependsOn) {
				t.Fatalf("%s depends on %q, the plan says %q", w.ID, w.DependsOn, base.WorkOrders[i].DependsOn)
			}
		}
		if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
			t.Fatalf("work orders %q, want the plan's %q", ids, wantIDs)
		}
		rest := *st
		rest.WorkOrders = base.WorkOrders
		if !reflect.DeepEqual(&rest, base) {
			t.Fatalf("the summary changed more than the work orders' details:\n%+v\n%+v", rest, *base)
		}
	})
}
