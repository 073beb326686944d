package planner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/workorder"
)

// Issue is one finding of Validate. Codes (ARCHITECTURE.md "Validator",
// plus E007):
//
//	E000  plan structure: size, UTF-8, JSON, top-level keys, work_orders
//	      present and 1..99 long, verify_contract well-formed (its own
//	      errors carry Field "verify_contract…")
//	E001  id not WO-NN, or ids not WO-01, WO-02, … in order
//	E003  acceptance command uses shell syntax (commands run without a shell)
//	E004  glob character in a path (allowed_files, context_files, condition
//	      paths, verify_contract.requires paths); reported instead of E005
//	E005  work order does not conform to the WorkOrder schema
//	E006  python -c code does not compile (or could not be checked)
//	E007  acceptance command does not parse as a command line
//	E101  precondition does not hold given the repository and earlier
//	      work orders' postconditions
//	E102  a path both file_exists and file_absent in one order's preconditions
//	E103  postcondition path not in allowed_files
//	E104  allowed_files entry without a file_exists postcondition
//	E105  acceptance command runs scripts/verify.sh
//	E106  verify_contract.requires does not hold after the last work order
//	E107  a go, cargo or node acceptance command needs a package directory,
//	      manifest or script that neither the repository nor any work
//	      order up to this one (allowed_files) can provide
//	E108  an acceptance command (or verify_contract.command) installs or
//	      downloads packages or files (npm install, pip install, go get,
//	      cargo add, curl, git clone, apt-get install, …), though commands
//	      run without network: the harness installs what the manifests
//	      declare before verification
//	E109  (repairs) a revised or new work order has no acceptance command
//	      that checks its own behaviour: none, or only commands that pass
//	      whatever the code does (true, echo, python -c "pass", a
//	      --version) or global verification itself
//	E110  (repairs) a committed work order, or the verify contract, is not
//	      exactly as it was, or the committed orders do not come first
//	E111  (repairs) an id used before in the build is used again: the
//	      failed order's, or one a repair removed
//	E112  (repairs) the repair changes nothing but ids: the plan that
//	      failed, again
//	W101  acceptance command depends on a file that may not exist (warning)
//	W102  allowed_files entry not in context_files (warning)
type Issue struct {
	Code    string `json:"code"`    // E000…E007, E101…E112, W101, W102
	WOID    string `json:"wo_id"`   // the order's id as written, "work_orders[N]" if it has none, "" for plan-level issues
	Field   string `json:"field"`   // e.g. "acceptance_commands[1]", "preconditions[0].path"; relative to the order, or to the plan when WOID is ""
	Message string `json:"message"` // what is wrong and how to fix it; does not repeat WOID or Field
}

// Warning reports whether the issue does not block the plan.
func (i Issue) Warning() bool { return strings.HasPrefix(i.Code, "W") }

// Env is what Validate knows beyond the plan itself.
type Env struct {
	// RepoFiles are the target repository's tracked files, the initial
	// state of the condition chain. Nil or empty means an empty repository.
	RepoFiles []string
	// RepoUnknown says the starting files are not known (`factory validate`
	// without --repo). Verdicts that only the repository could change are
	// skipped: E101 and E106 for a file_exists condition no earlier work
	// order satisfies, and W101. A file_absent condition that an earlier
	// work order's postcondition contradicts is still E101 or E106.
	RepoUnknown bool
	// LoneOrder says the plan is one work order file, not a sequence: its
	// id must be one `factory run` accepts (E001), not necessarily WO-01.
	LoneOrder bool
	// Python checks python -c code. Nil skips E006 and the W101 warnings
	// for python -c imports; then the plan may hold code that does not
	// compile.
	Python PythonInspector
	// RepairIDs says the plan is one a repair wrote (see Repair): its ids
	// are work order ids (workorder.CheckID: WO-NN or WO-NNrK), unique, in
	// any order, instead of running WO-01, WO-02, … (E001). A plan that
	// holds a WO-NNrK id is taken for a repaired plan without it — only a
	// repair writes such ids —, except the reply to a compile.
	RepairIDs bool
	// Repair, when set, checks the plan as the reply to a repair request
	// (E109–E112 and preconditions at the branch's tip; see
	// ValidateRepair); it implies RepairIDs.
	Repair *RepairContext

	// compiled says the plan is a compile's reply: its ids run WO-01,
	// WO-02, … whatever they hold (Compile sets it).
	compiled bool
}

func (e Env) repairIDs() bool { return e.RepairIDs || e.Repair != nil }

// Result is the outcome of Validate.
type Result struct {
	// Manifest is the plan with every order parsed and normalised as
	// workorder.ParseWorkOrder would; workorder.ParseManifest accepts its
	// JSON. It is nil when the plan or an order could not be parsed (any
	// E000, E004 or E005) or an id is not a work order id at all (E001
	// for an id workorder.CheckID refuses); otherwise it is set even if other errors
	// remain (ids out of sequence, the chain checks), so check Errors()
	// before using it.
	Manifest *workorder.Manifest
	// Issues are the errors and warnings, ordered by work order index
	// (plan-level issues first), then code, then field, then message.
	Issues []Issue
	// PythonErr is the error of Env.Python itself (python3 missing or
	// broken, ctx done). Each python -c command it left unchecked has an
	// E006 issue, so the plan fails closed; a caller should treat this as
	// an environment problem rather than ask the model to fix the plan.
	PythonErr error
}

// Errors returns the issues that block the plan.
func (r Result) Errors() []Issue {
	return filterIssues(r.Issues, func(i Issue) bool { return !i.Warning() })
}

// Warnings returns the issues that do not block the plan.
func (r Result) Warnings() []Issue {
	return filterIssues(r.Issues, Issue.Warning)
}

func filterIssues(issues []Issue, keep func(Issue) bool) []Issue {
	out := []Issue{}
	for _, i := range issues {
		if keep(i) {
			out = append(out, i)
		}
	}
	return out
}

// MaxPlanBytes bounds the raw plan before parsing (E000).
const MaxPlanBytes = 2 << 20

// maxInspections bounds the distinct python -c codes one Validate checks,
// and so the work and the feedback: a plan of MaxPlanBytes could hold
// thousands. Real plans have a few dozen.
const maxInspections = 256

// maxIDBytes is the longest id used as Issue.WOID; longer ones are surely
// not ids, and messages would quote them whole.
const maxIDBytes = 64

// Validate checks a raw plan, a JSON object {"verify_contract": …,
// "work_orders": […]}, deterministically: the same plan, RepoFiles and
// Python give the same Result. It never runs the plan's commands; the only
// side effect is Env.Python inspecting python -c code.
//
// Each work order is decoded on its own, so one broken order does not hide
// the problems of the others, and acceptance commands are checked (E003,
// E006, E007, E105, E108) even in orders that fail E005. The condition chain
// (E101, W101, E106) stops at the first order that cannot be parsed, since
// the state after it is unknown; E102–E104 only need the order itself.
//
// Chain rules follow STATE.md: the state starts as RepoFiles and grows by
// each order's file_exists postconditions (an order without postconditions
// adds nothing, even the files it writes). A path holds if it is a file in
// the state or a directory with a file under it, as the factory's Lstat
// sees it. E101–E104 concern only orders that declare conditions; E105, E108
// and W101 apply to every order. E107 reads go, cargo and node command lines
// (internal/planner/validate_lang.go) and needs a parsable chain and a
// known repository, like W101. W101 covers non-stdlib imports in python -c
// code, `python X.py` and `bash X`/`sh X`; not `python -m`, dynamic
// imports or what scripts themselves import.
func Validate(ctx context.Context, raw []byte, env Env) Result {
	v := &validator{ctx: ctx, env: env}
	m := v.plan(raw)
	return Result{Manifest: m, Issues: v.sorted(), PythonErr: v.pythonErr}
}

type validator struct {
	ctx context.Context
	env Env
	// repaired says the plan's ids follow the rule of repaired plans (see
	// Env.RepairIDs).
	repaired  bool
	issues    []located
	pythonErr error
}

// located is an issue with the index of its work order (-1: plan-level),
// which orders the result.
type located struct {
	idx int
	Issue
}

func (v *validator) add(idx int, code, woid, field, format string, args ...any) {
	v.issues = append(v.issues, located{idx, Issue{Code: code, WOID: woid, Field: field, Message: fmt.Sprintf(format, args...)}})
}

func (v *validator) planIssue(code, field, format string, args ...any) {
	v.add(-1, code, "", field, format, args...)
}

// order is one work order as far as it could be read.
type order struct {
	idx  int
	woid string
	wo   *workorder.WorkOrder // nil when E004/E005 prevented parsing
	// parsed says wo is what workorder.ParseWorkOrder returns for the
	// order. When false but wo is set, only the id is wrong (E001): the
	// order still takes part in the chain checks, but it is no work order
	// `factory run` or workorder.ParseManifest would accept.
	parsed bool
	cmds   []command // by acceptance_commands index, from the lenient view
}

// command is one acceptance command that parsed to an argv.
type command struct {
	argv    []string
	banned  bool        // E105 or E108: no dependency warnings on top
	code    string      // the python -c code, when inspect is set
	inspect bool        // the code is for Env.Python to check (see inspectAll)
	python  *PythonInfo // inspection of python -c code, if done and it compiled
}

// sorted orders the issues (see Result.Issues) and drops exact duplicates.
func (v *validator) sorted() []Issue {
	slices.SortStableFunc(v.issues, func(a, b located) int {
		return cmp.Or(cmp.Compare(a.idx, b.idx), strings.Compare(a.Code, b.Code),
			naturalCompare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	out := []Issue{}
	for i, l := range v.issues {
		if i > 0 && l == v.issues[i-1] {
			continue
		}
		out = append(out, l.Issue)
	}
	return out
}

// naturalCompare orders strings with digit runs compared as numbers, so
// acceptance_commands[2] comes before acceptance_commands[10].
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitPrefix(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
