// Checks of a repaired plan (Env.Repair): the id rule of repaired plans,
// E109–E112, and the preconditions of the orders still to run against the
// build branch's tip (E101).

package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

// RepairContext is what the reply to a repair request is checked against
// beyond the rules every plan follows (see Env.Repair and Repair).
type RepairContext struct {
	// Before is the plan as it stood when the order failed, its committed
	// orders first.
	Before *workorder.Manifest
	// Committed is how many of Before's orders, from the first, have a
	// commit on the build branch.
	Committed int
	// Failed is the id of the order that failed.
	Failed string
	// Used is every id the build's plans have held: the first plan's and
	// those of every repair applied since.
	Used []string
	// TipFiles are the files at the build branch's tip, where the orders
	// after the committed ones start.
	TipFiles []string
}

// isRepairID reports an id of the form WO-NNrK: an order a repair added.
func isRepairID(id string) bool {
	_, k, ok := workorder.ParseID(id)
	return ok && k > 0
}

// repairID is the E001 check of a repaired plan: every id is a work order
// id (workorder.CheckID: WO-NN or WO-NNrK) and none appears twice; the
// order is free.
func (v *validator) repairID(idx int, o *order, id string, isString bool, seen map[string]int) {
	if !isString {
		return // E005 says what the id must be
	}
	first, dup := seen[id]
	switch {
	case workorder.CheckID(id) != nil:
		v.add(idx, "E001", o.woid, "id", "%v", workorder.CheckID(id))
	case dup:
		v.add(idx, "E001", o.woid, "id", "%q is already the id of work order %d; every work order needs an id of its own", id, first+1)
	}
	if !dup {
		seen[id] = idx
	}
}

// idNumber is NN of WO-NN or WO-NNrK, 0 for another id.
func idNumber(id string) int {
	n, _, _ := workorder.ParseID(id)
	return n
}

// FreshIDs suggests ids for an order that replaces failed, given every id
// taken: failed's number with the first free rK (WO-03r1), and the first
// WO-NN after every number taken ("" past WO-99).
func FreshIDs(failed string, taken []string) (repair, next string) {
	set := map[string]bool{}
	top := 0
	for _, id := range taken {
		set[id] = true
		top = max(top, idNumber(id))
	}
	base := idNumber(failed)
	if base == 0 {
		base = 1
	}
	for k := 1; k <= 99; k++ {
		if id := fmt.Sprintf("WO-%02dr%d", base, k); !set[id] {
			repair = id
			break
		}
	}
	if top < workorder.MaxWorkOrders {
		next = workorder.FormatID(top + 1)
	}
	return repair, next
}

// repair runs the checks of a repair reply (Env.Repair) over the orders as
// far as they were read.
func (v *validator) repair(orders []*order, contract *workorder.VerifyContract, contractOK bool) {
	rc := v.env.Repair
	before := rc.Before
	if before == nil {
		return
	}
	if contractOK && !sameJSON(contract, before.VerifyContract) {
		v.planIssue("E110", "verify_contract", "the verify contract must stay exactly as it was: the committed work orders were verified with it; copy it unchanged from the plan")
	}
	n := min(rc.Committed, len(before.WorkOrders))
	committed := before.WorkOrders[:n]
	committedIDs := map[string]int{}
	var names []string
	for k, w := range committed {
		committedIDs[w.ID] = k
		names = append(names, w.ID)
	}
	list := strings.Join(names, ", ")
	for k, want := range committed {
		if k >= len(orders) {
			v.planIssue("E110", "work_orders", "the plan must start with the %d committed work orders (%s), exactly as they were, but it has only %d work orders", n, list, len(orders))
			break
		}
		o := orders[k]
		switch {
		case o.woid != want.ID:
			v.add(o.idx, "E110", o.woid, "id", "work order %d must be the committed %s, exactly as it was: the committed work orders (%s) come first, in their order, unchanged", k+1, want.ID, list)
		case o.wo == nil:
			v.add(o.idx, "E110", o.woid, "", "%s is committed (its commit is on the build branch), so it must stay exactly as it was; copy it unchanged from the plan", want.ID)
		default:
			if fields := changedFields(want, *o.wo); len(fields) > 0 {
				v.add(o.idx, "E110", o.woid, "", "%s is committed (its commit is on the build branch), so it must stay exactly as it was, but %s changed; copy it unchanged from the plan", want.ID, strings.Join(fields, ", "))
			}
		}
	}
	rest := orders[min(n, len(orders)):]

	pending := map[string]workorder.WorkOrder{}
	for _, w := range before.WorkOrders[n:] {
		if w.ID != rc.Failed {
			pending[w.ID] = w
		}
	}
	used := map[string]bool{} // ids earlier plans of the build held
	taken := slices.Clone(rc.Used)
	for _, w := range before.WorkOrders {
		taken = append(taken, w.ID)
	}
	for _, id := range taken {
		used[id] = true
	}
	for _, o := range orders {
		taken = append(taken, o.woid)
	}
	repairID, nextID := FreshIDs(rc.Failed, taken)
	suggest := repairID
	if nextID != "" {
		suggest += " or " + nextID
	}
	changed := 0 // revised or new orders
	for _, o := range rest {
		id := o.woid
		if workorder.CheckID(id) != nil {
			continue // E001 or E005 says
		}
		if k, ok := committedIDs[id]; ok {
			v.add(o.idx, "E110", id, "id", "%s is committed and stays where it was, as work order %d; it cannot appear again", id, k+1)
			continue
		}
		switch b, isPending := pending[id]; {
		case id == rc.Failed:
			v.add(o.idx, "E111", id, "id", "%s is the id of the work order that failed, and a failed order's id is never used again: give the order that replaces it a new id, such as %s", id, suggest)
			continue
		case !isPending && used[id]:
			v.add(o.idx, "E111", id, "id", "%s was used earlier in this build by a work order a repair removed, and ids are never used again: give this order a new id, such as %s", id, suggest)
			continue
		case isPending && o.wo != nil && sameOrder(b, *o.wo):
			continue // unchanged
		}
		changed++
		v.checksOwnBehaviour(o, contract)
	}
	if len(rest) > 0 && changed > 0 && !slices.ContainsFunc(rest, func(o *order) bool { return o.wo == nil }) {
		after := make([]workorder.WorkOrder, len(rest))
		for i, o := range rest {
			after[i] = *o.wo
		}
		if sameOrdersButIDs(before.WorkOrders[n:], after) {
			v.planIssue("E112", "work_orders", "the repair changes nothing but ids: these are the work orders that failed at %s, again; change what made %s fail (its acceptance commands, notes, context or allowed files; split it, or add a prerequisite order before it), or give up", rc.Failed, rc.Failed)
		}
	}
	v.tipPreconditions(rest)
}

// checksOwnBehaviour reports E109 for a revised or new order none of whose
// acceptance commands checks its work: it has none, or each passes
// whatever the code does or only repeats global verification. A command
// that does not parse is left to its own error.
func (v *validator) checksOwnBehaviour(o *order, contract *workorder.VerifyContract) {
	var global []string
	if contract != nil {
		global, _ = proc.ParseCommand(contract.Command)
	}
	what := "it has none"
	if len(o.cmds) > 0 {
		for _, c := range o.cmds {
			if c.argv == nil || !passesAnyway(c.argv, 0) && !isVerifyCommand(c.argv) && !slices.Equal(c.argv, global) {
				return
			}
		}
		what = "each one passes whatever the code does, or only runs global verification, which the harness runs anyway"
	}
	v.add(o.idx, "E109", o.woid, "acceptance_commands", "a revised or new work order needs at least one acceptance command that checks its own behaviour, and %s; a repair may not make an order pass by dropping its checks: write a command that fails unless this order's work is done (fix a wrong check rather than delete it)", what)
}

// tipPreconditions reports E101 for a precondition of an order still to
// run that does not hold at the build branch's tip with the
// postconditions of the orders before it: the base-commit chain (chain)
// trusts postconditions for what the committed orders wrote, the tip
// holds what they did write.
func (v *validator) tipPreconditions(rest []*order) {
	state := newFileState(v.env.Repair.TipFiles)
	for _, o := range rest {
		if o.wo == nil {
			return // the state after it is unknown
		}
		for k, c := range o.wo.Preconditions {
			field := fmt.Sprintf("preconditions[%d].path", k)
			if state.holds(c) || v.has(o.idx, "E101", field) || v.has(o.idx, "E102", field) {
				continue
			}
			hint := "it is not on the branch and no order before this one declares it as a file_exists postcondition"
			if c.Kind == workorder.FileAbsent {
				hint = "the branch already holds it (a committed work order wrote it); drop the condition"
				if origin, _ := state.lookup(c.Path); origin != "" {
					hint = origin + " creates it (file_exists postcondition); drop the condition or reorder the work orders"
				}
			}
			v.add(o.idx, "E101", o.woid, field, "%s %q does not hold at the tip of the build branch, where this work order starts after the committed ones and the orders before it; %s", c.Kind, c.Path, hint)
		}
		for _, c := range o.wo.Postconditions {
			state.add(c.Path, o.wo.ID)
		}
	}
}

// has reports whether an issue with code and field is already recorded
// for the order at idx.
func (v *validator) has(idx int, code, field string) bool {
	return slices.ContainsFunc(v.issues, func(l located) bool { return l.idx == idx && l.Code == code && l.Field == field })
}

// comparable is w as orders are compared: verify_exempt is computed from
// the plan, not written by the planner.
func comparable(w workorder.WorkOrder) workorder.WorkOrder {
	w.VerifyExempt = false
	return w
}

// sameOrder reports whether two normalised orders are the same, apart
// from verify_exempt.
func sameOrder(a, b workorder.WorkOrder) bool {
	return sameJSON(comparable(a), comparable(b))
}

// sameOrdersButIDs reports whether two lists of orders are the same apart
// from their ids.
func sameOrdersButIDs(a, b []workorder.WorkOrder) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.ID, y.ID = "", ""
		if !sameOrder(x, y) {
			return false
		}
	}
	return true
}

func sameJSON(a, b any) bool {
	x, err1 := canon.JSON(a)
	y, err2 := canon.JSON(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// changedFields names the JSON fields in which two orders differ, apart
// from verify_exempt.
func changedFields(a, b workorder.WorkOrder) []string {
	fa, fb := fieldsOf(comparable(a)), fieldsOf(comparable(b))
	var out []string
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if !sameJSON(fa[k], fb[k]) {
			out = append(out, k)
		}
	}
	return out
}

func fieldsOf(w workorder.WorkOrder) map[string]any {
	data, _ := json.Marshal(w)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

// Changes is what a repair did to a plan, by id: the orders it removed
// (the failed one among them), added and revised, each list in plan order.
type Changes struct {
	Removed []string `json:"removed"`
	Added   []string `json:"added"`
	Revised []string `json:"revised"`
}

// PlanChanges compares the plan before a repair with the plan after it.
func PlanChanges(before, after *workorder.Manifest) Changes {
	old := map[string]workorder.WorkOrder{}
	for _, w := range before.WorkOrders {
		old[w.ID] = w
	}
	now := map[string]bool{}
	c := Changes{Removed: []string{}, Added: []string{}, Revised: []string{}}
	for _, w := range after.WorkOrders {
		now[w.ID] = true
		switch b, ok := old[w.ID]; {
		case !ok:
			c.Added = append(c.Added, w.ID)
		case !sameOrder(b, w):
			c.Revised = append(c.Revised, w.ID)
		}
	}
	for _, w := range before.WorkOrders {
		if !now[w.ID] {
			c.Removed = append(c.Removed, w.ID)
		}
	}
	return c
}

// ChangedFields names the fields in which order b differs from a (apart
// from verify_exempt), for a repair's readable diff.
func ChangedFields(a, b workorder.WorkOrder) []string { return changedFields(a, b) }

// passesAnyway reports an acceptance command that exits 0 whatever the
// repository holds, so it checks nothing of a work order: true, echo,
// sleep, a --version, `python -c "pass"`, `sh -c "exit 0"`, through the
// wrappers E108 follows (env, timeout, …). It keeps to clear cases.
func passesAnyway(argv []string, depth int) bool {
	if len(argv) == 0 || depth > maxInstallDepth {
		return false
	}
	name, args := path.Base(argv[0]), argv[1:]
	if w, ok := wrappers[name]; ok {
		return passesAnyway(w.command(args), depth+1)
	}
	switch name {
	case "true", ":", "echo", "printf", "sleep", "pwd", "date", "whoami", "uname", "hostname":
		return true
	case "exit":
		return len(args) == 0 || len(args) == 1 && args[0] == "0"
	}
	if len(args) == 1 && versionArgs[args[0]] {
		return true
	}
	switch {
	case isShellName(name):
		script, ok := shellCommandString(args)
		if !ok {
			return false
		}
		if strings.TrimSpace(script) == "" {
			return true
		}
		inner, err := proc.ParseCommand(script)
		return err == nil && passesAnyway(inner, depth+1)
	case isPython(name):
		code, ok := pythonCode(argv)
		return ok && pythonPassesAnyway(code)
	}
	return false
}

var versionArgs = setOf("--version", "-V", "version", "--help", "-h")

// trivialStatement matches Python statements that cannot fail.
var trivialStatement = regexp.MustCompile(`^(pass|\.\.\.|None|True|False|[0-9]+|"[^"\\]*"|'[^'\\]*'|import sys|sys\.exit\((0|None)?\)|exit\(0?\)|quit\(0?\)|raise SystemExit(\((0|None)?\))?|assert (True|1)|print\(\s*("[^"\\]*"|'[^'\\]*'|[0-9]+)?\s*\))$`)

// pythonPassesAnyway reports `python -c` code made only of statements
// that cannot fail.
func pythonPassesAnyway(code string) bool {
	for _, stmt := range strings.FieldsFunc(code, func(r rune) bool { return r == ';' || r == '\n' }) {
		if s := strings.TrimSpace(stmt); s != "" && !trivialStatement.MatchString(s) {
			return false
		}
	}
	return true
}
