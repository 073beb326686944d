package builder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

func order(id, file string, cmds ...string) workorder.WorkOrder {
	return workorder.WorkOrder{ID: id, Title: "t " + id, Intent: "i", AllowedFiles: []string{file}, ContextFiles: []string{file},
		Forbidden: []string{}, AcceptanceCommands: cmds, Preconditions: []workorder.Condition{}, Postconditions: []workorder.Condition{}}
}

// The committed orders come first, in plan order: the branch's history.
func TestCommittedFirst(t *testing.T) {
	m := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{order("WO-01", "a.py"), order("WO-02", "b.py"), order("WO-03", "c.py"), order("WO-04", "d.py")}}
	out, n := committedFirst(m, map[string]string{"WO-01": "c1", "WO-04": "c4", "WO-09": "c9"})
	var ids []string
	for _, w := range out.WorkOrders {
		ids = append(ids, w.ID)
	}
	if n != 2 || !slices.Equal(ids, []string{"WO-01", "WO-04", "WO-02", "WO-03"}) {
		t.Errorf("committedFirst = %v, %d", ids, n)
	}
}

func TestRepairDiff(t *testing.T) {
	before := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{
		order("WO-01", "a.py", "python3 a.py"), order("WO-02", "b.py", "python3 -m unittest tests.test_typo"), order("WO-03", "c.py", "python3 c.py")}}
	wo03 := order("WO-03", "c.py", "python3 c.py b.py")
	after := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{
		before.WorkOrders[0], order("WO-02r1", "b.py", "python3 -m unittest tests.test_b"), wo03}}
	diff := RepairDiff(1, planner.FailedOrder{ID: "WO-02", Title: "t WO-02", Stage: "acceptance_failed"}, before, after)
	for _, want := range []string{
		`repair 1: WO-02 "t WO-02" failed at acceptance_failed`,
		`- WO-02 "t WO-02" removed`,
		`+ WO-02r1 "t WO-02r1" added`,
		`    acceptance_commands: ["python3 -m unittest tests.test_b"]`,
		`~ WO-03 "t WO-03" revised`,
		"    acceptance_commands:\n      - [\"python3 c.py\"]\n      + [\"python3 c.py b.py\"]",
		`  WO-01 "t WO-01" unchanged`,
		"  WO-03 after: WO-02r1 (was: nothing)",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
}

// ReadRepairs reads the records in order and stops at one cut off; a
// record that is not factory's is refused.
func TestReadRepairs(t *testing.T) {
	dir := t.TempDir()
	write := func(n int, rec any) {
		if err := os.MkdirAll(repairDir(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := artifact.WriteJSON(filepath.Join(repairDir(dir, n), "repair.json"), rec); err != nil {
			t.Fatal(err)
		}
	}
	if recs, pending, err := ReadRepairs(dir); err != nil || recs != nil || pending != 0 {
		t.Fatalf("no repairs: %v %v %d", err, recs, pending)
	}
	write(1, RepairRecord{Repair: 1, Failed: "WO-02", Outcome: RepairApplied, Added: []string{"WO-02r1"}})
	write(2, RepairRecord{Repair: 2, Failed: "WO-02r1", Outcome: RepairGaveUp, Reason: "no"})
	if err := os.MkdirAll(repairDir(dir, 3), 0o755); err != nil {
		t.Fatal(err)
	}
	recs, pending, err := ReadRepairs(dir)
	if err != nil || len(recs) != 2 || pending != 3 || RepairedPlanFile(dir, recs) != filepath.Join(repairDir(dir, 1), "plan_after.json") {
		t.Fatalf("ReadRepairs = %+v, %d, %v", recs, pending, err)
	}
	if got := recs[0].Describe(); got != "repair 1 (WO-02 failed at ): added WO-02r1" {
		t.Errorf("Describe = %q", got)
	}
	write(3, map[string]any{"repair": 3, "outcome": "applied", "extra": 1})
	if _, _, err := ReadRepairs(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a record with an unknown field: %v", err)
	}
	write(3, RepairRecord{Repair: 4})
	if _, _, err := ReadRepairs(dir); err == nil {
		t.Errorf("a record numbered wrong was read")
	}
}
