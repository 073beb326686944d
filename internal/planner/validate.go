package planner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/proc"
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
//	W101  acceptance command depends on a file that may not exist (warning)
//	W102  allowed_files entry not in context_files (warning)
type Issue struct {
	Code    string `json:"code"`    // E000…E007, E101…E106, W101, W102
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
}

// Result is the outcome of Validate.
type Result struct {
	// Manifest is the plan with every order parsed and normalised as
	// workorder.ParseWorkOrder would. It is nil when the plan or an order
	// could not be parsed (any E000, E004 or E005); otherwise it is set
	// even if other errors remain, so check Errors() before using it.
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
// E006, E007, E105) even in orders that fail E005. The condition chain
// (E101, W101, E106) stops at the first order that cannot be parsed, since
// the state after it is unknown; E102–E104 only need the order itself.
//
// Chain rules follow STATE.md: the state starts as RepoFiles and grows by
// each order's file_exists postconditions (an order without postconditions
// adds nothing, even the files it writes). A path holds if it is a file in
// the state or a directory with a file under it, as the factory's Lstat
// sees it. E101–E104 concern only orders that declare conditions; E105 and
// W101 apply to every order. W101 covers non-stdlib imports in python -c
// code, `python X.py` and `bash X`/`sh X`; not `python -m`, dynamic
// imports or what scripts themselves import.
func Validate(ctx context.Context, raw []byte, env Env) Result {
	v := &validator{ctx: ctx, env: env}
	m := v.plan(raw)
	return Result{Manifest: m, Issues: v.sorted(), PythonErr: v.pythonErr}
}

type validator struct {
	ctx       context.Context
	env       Env
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
	cmds []command            // by acceptance_commands index, from the lenient view
}

// command is one acceptance command that parsed to an argv.
type command struct {
	argv    []string
	banned  bool        // E105: no dependency warnings on top
	code    string      // the python -c code, when inspect is set
	inspect bool        // the code is for Env.Python to check (see inspectAll)
	python  *PythonInfo // inspection of python -c code, if done and it compiled
}

// plan checks the top level and returns the manifest if every part parsed.
func (v *validator) plan(raw []byte) *workorder.Manifest {
	top, ok := v.topLevel(raw)
	if !ok {
		return nil
	}
	fatal := false
	for _, key := range top.unknown {
		v.planIssue("E000", key, "unknown top-level key; the plan object has only verify_contract and work_orders")
		fatal = true
	}
	var contract *workorder.VerifyContract
	if rawC, ok := top.keys["verify_contract"]; ok && !isNull(rawC) {
		if contract, ok = v.contract(rawC); !ok {
			fatal = true
		}
	}
	rawOrders, ok := v.workOrderList(top.keys)
	if !ok {
		fatal = true
	}
	orders := make([]*order, len(rawOrders))
	seen := map[string]int{}
	for i, r := range rawOrders {
		orders[i] = v.order(i, r, seen)
		if orders[i].wo == nil {
			fatal = true
		}
	}
	v.inspectAll(orders)
	v.chain(orders, contract, !fatal)
	if fatal || len(orders) == 0 {
		return nil
	}
	m := &workorder.Manifest{VerifyContract: contract, WorkOrders: make([]workorder.WorkOrder, len(orders))}
	for i, o := range orders {
		m.WorkOrders[i] = *o.wo
	}
	return m
}

type topObject struct {
	keys    map[string]json.RawMessage
	unknown []string // in order of appearance
}

// topLevel checks size, encoding and JSON syntax and splits the object into
// its keys. Any failure is E000 and ends validation.
func (v *validator) topLevel(raw []byte) (topObject, bool) {
	if len(raw) > MaxPlanBytes {
		v.planIssue("E000", "", "the plan is %d bytes; the limit is %d", len(raw), MaxPlanBytes)
		return topObject{}, false
	}
	if !utf8.Valid(raw) {
		v.planIssue("E000", "", "the plan is not valid UTF-8")
		return topObject{}, false
	}
	trimmed := bytes.TrimSpace(raw)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var val json.RawMessage
	if err := dec.Decode(&val); err != nil {
		hint := ""
		if len(trimmed) == 0 || trimmed[0] != '{' {
			hint = "; reply with only the JSON object, no prose or markdown fences"
		}
		v.planIssue("E000", "", "the plan is not valid JSON: %v%s", err, hint)
		return topObject{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		v.planIssue("E000", "", "the plan has data after the JSON object; reply with exactly one JSON object")
		return topObject{}, false
	}
	if val[0] != '{' {
		v.planIssue("E000", "", "the plan is a JSON %s; it must be an object with a work_orders array", jsonKind(val))
		return topObject{}, false
	}
	top := topObject{keys: map[string]json.RawMessage{}}
	obj := json.NewDecoder(bytes.NewReader(val))
	obj.Token() // '{'; the value is known to be valid JSON
	for obj.More() {
		tok, _ := obj.Token()
		key, _ := tok.(string)
		var item json.RawMessage
		if err := obj.Decode(&item); err != nil {
			v.planIssue("E000", key, "cannot read the value: %v", err)
			return topObject{}, false
		}
		if _, dup := top.keys[key]; dup {
			v.planIssue("E000", key, "the key appears twice; give it once")
			return topObject{}, false
		}
		top.keys[key] = item
		if key != "verify_contract" && key != "work_orders" {
			top.unknown = append(top.unknown, key)
		}
	}
	return top, true
}

// workOrderList checks that work_orders is an array of 1..99 entries and
// returns them undecoded.
func (v *validator) workOrderList(keys map[string]json.RawMessage) ([]json.RawMessage, bool) {
	raw, ok := keys["work_orders"]
	if !ok {
		v.planIssue("E000", "work_orders", "required key is missing; the plan must list its work orders in work_orders")
		return nil, false
	}
	if kind := jsonKind(raw); kind != "array" {
		v.planIssue("E000", "work_orders", "must be an array of work orders, not %s", kind)
		return nil, false
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		v.planIssue("E000", "work_orders", "cannot read the array: %v", err)
		return nil, false
	}
	switch {
	case len(list) == 0:
		v.planIssue("E000", "work_orders", "is empty; the plan needs at least one work order")
		return nil, false
	case len(list) > workorder.MaxWorkOrders:
		// The orders are not checked: the plan must be restructured anyway,
		// and this bounds the feedback.
		v.planIssue("E000", "work_orders", "lists %d work orders; ids WO-01…WO-%02d allow at most %d, so merge work orders", len(list), workorder.MaxWorkOrders, workorder.MaxWorkOrders)
		return nil, false
	}
	return list, true
}

// contract decodes and checks verify_contract. Its problems are E000 (E004
// for glob characters in its paths), with Field under "verify_contract".
func (v *validator) contract(raw json.RawMessage) (*workorder.VerifyContract, bool) {
	var c workorder.VerifyContract
	if err := workorder.DecodeStrict(raw, &c); err != nil {
		v.decodeError(-1, "", "verify_contract", err, raw, reflect.TypeFor[workorder.VerifyContract](), "requires")
		return nil, false
	}
	before := len(v.issues)
	globOnly := map[string]bool{}
	for k, r := range c.Requires {
		field := fmt.Sprintf("requires[%d].path", k)
		if v.globCheck(-1, "", "verify_contract."+field, r.Path) {
			globOnly[field] = true
		}
	}
	if err := c.Normalize(); err != nil {
		for _, part := range splitErrors(err) {
			field, msg := splitField(part.Error())
			if !globOnly[field] {
				v.planIssue("E000", join("verify_contract", field), "%s", msg)
			}
		}
	}
	if strings.TrimSpace(c.Command) != "" {
		if _, err := proc.ParseCommand(c.Command); err != nil {
			v.planIssue("E000", "verify_contract.command", "%s", commandReason(err))
		}
	}
	if len(v.issues) > before {
		return nil, false
	}
	return &c, true
}

// decodeError reports a DecodeStrict error: E005 for a work order (idx >=
// 0), E000 under prefix for the verify contract. When several fields are
// unknown, DecodeStrict names one of them at random; every unknown field is
// reported instead, in a fixed order, so that the result is deterministic
// (and the model learns all of them at once).
func (v *validator) decodeError(idx int, woid, prefix string, err error, raw json.RawMessage, t reflect.Type, condKeys ...string) {
	code := "E005"
	if idx < 0 {
		code = "E000"
	}
	if strings.Contains(err.Error(), ": unknown field (allowed: ") {
		if unknown := unknownFields(raw, t, condKeys); len(unknown) > 0 {
			for _, u := range unknown {
				v.add(idx, code, woid, join(prefix, u.field), "unknown field (allowed: %s)", u.allowed)
			}
			return
		}
	}
	field, msg := splitField(err.Error())
	v.add(idx, code, woid, join(prefix, field), "%s", msg)
}

type unknownField struct{ field, allowed string }

// unknownFields lists the keys of the object raw that t has no field for,
// and those of the condition objects in its condKeys arrays.
func unknownFields(raw json.RawMessage, t reflect.Type, condKeys []string) []unknownField {
	var out []unknownField
	check := func(at string, obj map[string]json.RawMessage, t reflect.Type) {
		known := jsonFieldNames(t)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if !slices.Contains(known, key) {
				out = append(out, unknownField{join(at, key), strings.Join(known, ", ")})
			}
		}
	}
	obj := looseObject(raw)
	check("", obj, t)
	for _, key := range condKeys {
		for i, c := range looseArray(obj[key]) {
			check(fmt.Sprintf("%s[%d]", key, i), looseObject(c), reflect.TypeFor[workorder.Condition]())
		}
	}
	return out
}

// jsonFieldNames returns the sorted JSON names of t's fields.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			names = append(names, cmp.Or(name, f.Name))
		}
	}
	slices.Sort(names)
	return names
}

// globCheck reports E004 for a path with a glob character and returns
// whether the glob is its only problem, so that E005 need not repeat it.
func (v *validator) globCheck(idx int, woid, field, p string) bool {
	if !strings.ContainsAny(p, "*?[") {
		return false
	}
	v.add(idx, "E004", woid, field, "%s contains a glob character (*, ? or [); list each file by its exact path", clip(p, 200))
	_, err := workorder.NormalizePath(strings.Map(func(r rune) rune {
		if strings.ContainsRune("*?[", r) {
			return 'x'
		}
		return r
	}, p))
	return err == nil
}

// order runs the checks that need only the order itself: E001, E003–E007,
// E105. seen maps ids to the index that used them first.
func (v *validator) order(idx int, raw json.RawMessage, seen map[string]int) *order {
	o := &order{idx: idx, woid: fmt.Sprintf("work_orders[%d]", idx)}
	loose := looseObject(raw)

	id, isString := looseString(loose["id"])
	if isString && id != "" && len(id) <= maxIDBytes && !strings.ContainsFunc(id, unicode.IsControl) {
		o.woid = id
	}
	want := workorder.FormatID(idx + 1)
	if v.env.LoneOrder && workorder.CheckID(id) == nil {
		want = id // one work order, not a plan: any id run accepts will do
	}
	if isString && id != want {
		switch first, dup := seen[id]; {
		case workorder.CheckID(id) != nil:
			v.add(idx, "E001", o.woid, "id", "%s is not of the form WO-NN (two digits); work order %d must be %q", clip(id, maxIDBytes), idx+1, want)
		case dup:
			v.add(idx, "E001", o.woid, "id", "%q is already the id of work order %d; ids run WO-01, WO-02, … without duplicates, so work order %d must be %q", id, first+1, idx+1, want)
		default:
			v.add(idx, "E001", o.woid, "id", "%q is out of sequence; ids run WO-01, WO-02, … without gaps, so work order %d must be %q", id, idx+1, want)
		}
	}
	if _, dup := seen[id]; isString && !dup {
		seen[id] = idx
	}

	globOnly := map[string]bool{}
	for _, key := range []string{"allowed_files", "context_files"} {
		for k, p := range looseStrings(loose[key]) {
			field := fmt.Sprintf("%s[%d]", key, k)
			if p != nil && v.globCheck(idx, o.woid, field, *p) {
				globOnly[field] = true
			}
		}
	}
	for _, key := range []string{"preconditions", "postconditions"} {
		for k, c := range looseArray(loose[key]) {
			field := fmt.Sprintf("%s[%d].path", key, k)
			if p, ok := looseString(looseObject(c)["path"]); ok && v.globCheck(idx, o.woid, field, p) {
				globOnly[field] = true
			}
		}
	}

	var w workorder.WorkOrder
	if kind := jsonKind(raw); kind != "object" {
		v.add(idx, "E005", o.woid, "", "a work order must be a JSON object, not %s", kind)
	} else if len(raw) > workorder.MaxWorkOrderBytes {
		// As workorder.ParseWorkOrder refuses it, `factory run` would.
		v.add(idx, "E005", o.woid, "", "the work order is %d bytes; the limit is %d (1 MiB); split it", len(raw), workorder.MaxWorkOrderBytes)
	} else if err := workorder.DecodeStrict(raw, &w); err != nil {
		v.decodeError(idx, o.woid, "", err, raw, reflect.TypeFor[workorder.WorkOrder](), "preconditions", "postconditions")
	} else if err := w.Normalize(); err != nil {
		// E001 covers the id, and an order whose only fault is its id
		// still takes part in the chain checks.
		idOnly := true
		for _, part := range splitErrors(err) {
			field, msg := splitField(part.Error())
			if field == "id" {
				continue
			}
			idOnly = false
			if !globOnly[field] {
				v.add(idx, "E005", o.woid, field, "%s", msg)
			}
		}
		if idOnly {
			o.wo = &w
		}
	} else {
		o.wo = &w
	}

	for k, c := range looseStrings(loose["acceptance_commands"]) {
		o.cmds = append(o.cmds, command{})
		if c != nil {
			o.cmds[k] = v.acceptance(idx, o.woid, fmt.Sprintf("acceptance_commands[%d]", k), *c)
		}
	}
	return o
}

// acceptance checks one acceptance command: E003, E007, E105, E006.
func (v *validator) acceptance(idx int, woid, field, line string) command {
	if strings.TrimSpace(line) == "" {
		return command{} // E005 says it must not be empty
	}
	argv, err := proc.ParseCommand(line)
	if err != nil {
		var ce *proc.CommandError
		if errors.As(err, &ce) && ce.Kind == proc.KindShellFeature {
			msg := ce.Reason
			if !strings.Contains(msg, "without a shell") {
				msg += " (commands run without a shell)"
			}
			v.add(idx, "E003", woid, field, "%s; write one plain command with literal arguments", msg)
		} else {
			v.add(idx, "E007", woid, field, "cannot be split into program arguments: %s", commandReason(err))
		}
		return command{}
	}
	cmd := command{argv: argv}
	if pythonMissingArg(argv) {
		v.add(idx, "E007", woid, field, "python's -c or -m option has no argument after it; python refuses to start")
		return cmd
	}
	if isVerifyCommand(argv) {
		v.add(idx, "E105", woid, field, "runs scripts/verify.sh, which the factory already runs after every work order; remove it and test this work order's own behaviour instead")
		cmd.banned = true
	}
	code, ok := pythonCode(argv)
	if !ok || v.env.Python == nil {
		return cmd
	}
	if len(code) > MaxPythonCodeBytes {
		v.add(idx, "E006", woid, field, "the python -c code is %d bytes, over the %d that can be checked; put it in a test file listed in allowed_files and run that", len(code), MaxPythonCodeBytes)
		return cmd
	}
	cmd.code, cmd.inspect = code, true
	return cmd
}

// inspectAll checks the python -c code of every order's commands in one
// Env.Python call (E006) and keeps the verdicts for W101. Codes beyond the
// first maxInspections distinct ones are E006 unchecked.
func (v *validator) inspectAll(orders []*order) {
	type pending struct {
		o *order
		k int
	}
	var todo []pending
	var codes []string
	seen := map[string]bool{}
	for _, o := range orders {
		for k, c := range o.cmds {
			if !c.inspect {
				continue
			}
			if !seen[c.code] && len(seen) >= maxInspections {
				v.add(o.idx, "E006", o.woid, fmt.Sprintf("acceptance_commands[%d]", k), "the python -c code was not checked: the plan has more than %d different python -c codes; move checks into test files", maxInspections)
				continue
			}
			if !seen[c.code] {
				seen[c.code] = true
				codes = append(codes, c.code)
			}
			todo = append(todo, pending{o, k})
		}
	}
	if len(codes) == 0 {
		return
	}
	verdicts := map[string]PythonInfo{}
	infos, err := v.env.Python.Inspect(v.ctx, codes)
	if err == nil && len(infos) != len(codes) {
		err = fmt.Errorf("the python inspector returned %d results for %d codes", len(infos), len(codes))
	}
	if err != nil {
		v.pythonErr = err
	} else {
		for i, code := range codes {
			verdicts[code] = infos[i]
		}
	}
	for _, p := range todo {
		cmd := &p.o.cmds[p.k]
		field := fmt.Sprintf("acceptance_commands[%d]", p.k)
		info := verdicts[cmd.code]
		switch {
		case err != nil:
			v.add(p.o.idx, "E006", p.o.woid, field, "the python -c code was not checked: %v", err)
		case info.SyntaxError != "":
			v.add(p.o.idx, "E006", p.o.woid, field, "the python -c code does not compile: %s%s", info.SyntaxError, offendingLine(cmd.code, info.SyntaxError))
		default:
			cmd.python = &info
		}
	}
}

// offendingLine quotes the line a "line N: …" syntax error points at.
func offendingLine(code, syntaxErr string) string {
	var n int
	if _, err := fmt.Sscanf(syntaxErr, "line %d:", &n); err != nil || n < 1 {
		return ""
	}
	lines := strings.Split(code, "\n")
	if n > len(lines) {
		return ""
	}
	return fmt.Sprintf(" (line %d is %s)", n, clip(strings.TrimSpace(lines[n-1]), 160))
}

// chain runs the cross-order checks. complete says every order and the
// contract parsed, which E106 needs.
func (v *validator) chain(orders []*order, contract *workorder.VerifyContract, complete bool) {
	state := newFileState(v.env.RepoFiles)
	broken := false // an earlier order could not be parsed: the state is unknown
	for _, o := range orders {
		w := o.wo
		if w == nil {
			broken = true
			continue
		}
		contradictory := v.contradictions(o)
		if !broken {
			for k, c := range w.Preconditions {
				if !contradictory[c.Path] {
					v.precondition(o, k, c, state)
				}
			}
		}
		allowed := map[string]bool{}
		for _, a := range w.AllowedFiles {
			allowed[a] = true
		}
		post := map[string]bool{}
		for k, c := range w.Postconditions {
			post[c.Path] = true
			if !allowed[c.Path] {
				v.add(o.idx, "E103", o.woid, fmt.Sprintf("postconditions[%d].path", k),
					"%q is not in allowed_files, so this work order cannot create it; add it to allowed_files or drop the postcondition", c.Path)
			}
		}
		v.unseenAllowed(o)
		if len(w.Postconditions) > 0 {
			for k, a := range w.AllowedFiles {
				if !post[a] {
					v.add(o.idx, "E104", o.woid, fmt.Sprintf("allowed_files[%d]", k),
						"%q has no file_exists postcondition; a work order that declares postconditions must declare one for every allowed file", a)
				}
			}
		}
		for _, c := range w.Postconditions {
			state.add(c.Path, w.ID)
		}
		if !broken && !v.env.RepoUnknown {
			v.dependencies(o, state)
		}
	}
	if !complete || broken || contract == nil {
		return
	}
	for k, c := range contract.Requires {
		if !state.holds(c) && !(v.env.RepoUnknown && c.Kind == workorder.FileExists) {
			v.planIssue("E106", fmt.Sprintf("verify_contract.requires[%d]", k),
				"%s %q does not hold after the last work order; %s", c.Kind, c.Path, unmetHint(c, state))
		}
	}
}

// unseenAllowed reports W102 for each allowed file that is not a context
// file: writes replace whole files and need the file's base hash, so the
// model should see every file it may rewrite. A warning only, since
// context_files holds at most workorder.MaxContextFiles.
func (v *validator) unseenAllowed(o *order) {
	full := len(o.wo.ContextFiles) >= workorder.MaxContextFiles
	for k, a := range o.wo.AllowedFiles {
		if slices.Contains(o.wo.ContextFiles, a) {
			continue
		}
		hint := "add it to context_files"
		if full {
			hint = fmt.Sprintf("context_files is full (%d files), so replace a read-only one with it", workorder.MaxContextFiles)
		}
		v.add(o.idx, "W102", o.woid, fmt.Sprintf("allowed_files[%d]", k),
			"%q is not in context_files, so the model may rewrite a file it has not seen (writes replace the whole file); %s", a, hint)
	}
}

// contradictions reports E102 for each file_absent precondition whose path
// is also file_exists, and returns those paths.
func (v *validator) contradictions(o *order) map[string]bool {
	exists := map[string]int{}
	for k, c := range o.wo.Preconditions {
		if _, ok := exists[c.Path]; c.Kind == workorder.FileExists && !ok {
			exists[c.Path] = k
		}
	}
	out := map[string]bool{}
	for k, c := range o.wo.Preconditions {
		if j, ok := exists[c.Path]; ok && c.Kind == workorder.FileAbsent {
			out[c.Path] = true
			v.add(o.idx, "E102", o.woid, fmt.Sprintf("preconditions[%d].path", k),
				"%q must also exist by preconditions[%d]; a file cannot be both present and absent, so keep the condition that is true before this work order", c.Path, j)
		}
	}
	return out
}

func (v *validator) precondition(o *order, k int, c workorder.Condition, state *fileState) {
	if state.holds(c) || v.env.RepoUnknown && c.Kind == workorder.FileExists {
		return
	}
	field := fmt.Sprintf("preconditions[%d].path", k)
	v.add(o.idx, "E101", o.woid, field, "%s %q does not hold before this work order; %s", c.Kind, c.Path, unmetHint(c, state))
}

// unmetHint explains why a condition does not hold and what would fix it.
func unmetHint(c workorder.Condition, state *fileState) string {
	if c.Kind == workorder.FileExists {
		return "it is not in the repository and no earlier work order declares it as a file_exists postcondition (files written without a postcondition are not tracked)"
	}
	origin, _ := state.lookup(c.Path)
	if origin == "" {
		return "the repository already has it; drop the condition"
	}
	return fmt.Sprintf("%s creates it (file_exists postcondition); drop the condition or reorder the work orders", origin)
}

// dependencies reports W101 for the files the order's acceptance commands
// need that are not in the state after its postconditions.
func (v *validator) dependencies(o *order, state *fileState) {
	const fix = "declare it as a file_exists postcondition of the work order that creates it"
	for k, cmd := range o.cmds {
		if cmd.argv == nil || cmd.banned {
			continue
		}
		field := fmt.Sprintf("acceptance_commands[%d]", k)
		if p, ok := scriptDependency(cmd.argv); ok && !state.hasFile(p) {
			v.add(o.idx, "W101", o.woid, field, "runs %s, which is not known to exist after this work order; %s", p, fix)
		}
		if cmd.python == nil {
			continue
		}
		for _, imp := range cmd.python.Imports {
			cands := importCandidates(imp)
			if imp.Stdlib || cands == nil {
				continue
			}
			if base, _ := modulePath(imp.Module); state.isDir(base) || slices.ContainsFunc(cands, state.hasFile) {
				continue
			}
			v.add(o.idx, "W101", o.woid, field, "imports %s, but none of %s is known to exist after this work order; %s (ignore this for a third-party package)",
				imp.Module, strings.Join(cands, ", "), fix)
		}
	}
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

// ComputeVerifyExempt returns copies of m's work orders with VerifyExempt
// set for each order after which the cumulative state (repoFiles plus the
// file_exists postconditions so far, as in Validate) does not satisfy every
// verify_contract requirement: global verification cannot work yet, so the
// factory only compiles. Without a contract every order gets false. m is
// not modified.
func ComputeVerifyExempt(m *workorder.Manifest, repoFiles []string) []workorder.WorkOrder {
	if m == nil {
		return nil
	}
	state := newFileState(repoFiles)
	out := make([]workorder.WorkOrder, len(m.WorkOrders))
	for i, w := range m.WorkOrders {
		for _, c := range w.Postconditions {
			if c.Kind == workorder.FileExists {
				state.add(c.Path, w.ID)
			}
		}
		w = cloneOrder(w)
		w.VerifyExempt = false
		if m.VerifyContract != nil {
			for _, c := range m.VerifyContract.Requires {
				if !state.holds(c) {
					w.VerifyExempt = true
					break
				}
			}
		}
		out[i] = w
	}
	return out
}

func cloneOrder(w workorder.WorkOrder) workorder.WorkOrder {
	w.Preconditions = slices.Clone(w.Preconditions)
	w.Postconditions = slices.Clone(w.Postconditions)
	w.AllowedFiles = slices.Clone(w.AllowedFiles)
	w.Forbidden = slices.Clone(w.Forbidden)
	w.AcceptanceCommands = slices.Clone(w.AcceptanceCommands)
	w.ContextFiles = slices.Clone(w.ContextFiles)
	if w.Notes != nil {
		n := *w.Notes
		w.Notes = &n
	}
	return w
}

// fileState is the cumulative set of files known to exist, each with where
// it came from: "" for the repository, else the id of the work order whose
// postcondition added it. Directories holding a file exist too.
type fileState struct {
	files map[string]string
	dirs  map[string]string
}

func newFileState(repoFiles []string) *fileState {
	s := &fileState{files: map[string]string{}, dirs: map[string]string{}}
	for _, f := range repoFiles {
		s.add(f, "")
	}
	return s
}

func (s *fileState) add(p, origin string) {
	if clean, err := workorder.NormalizePath(p); err == nil {
		p = clean // repository listings are clean already; keep odd names as they are
	}
	if _, ok := s.files[p]; !ok {
		s.files[p] = origin
	}
	for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, ok := s.dirs[d]; ok {
			break // its parents are recorded too
		}
		s.dirs[d] = origin
	}
}

// lookup reports whether p exists as a file or directory, and its origin.
func (s *fileState) lookup(p string) (string, bool) {
	if o, ok := s.files[p]; ok {
		return o, true
	}
	o, ok := s.dirs[p]
	return o, ok
}

func (s *fileState) hasFile(p string) bool { _, ok := s.files[p]; return ok }
func (s *fileState) isDir(p string) bool   { _, ok := s.dirs[p]; return ok }

func (s *fileState) holds(c workorder.Condition) bool {
	_, ok := s.lookup(c.Path)
	return ok == (c.Kind == workorder.FileExists)
}

// Lenient readers: they look at a work order the way a person would, so
// that E001, E003, E004, E006 and E007 can be reported for orders that the
// strict decoder rejects.

func looseObject(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func looseArray(raw json.RawMessage) []json.RawMessage {
	var a []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &a) != nil {
		return nil
	}
	return a
}

func looseString(raw json.RawMessage) (string, bool) {
	var s string
	if raw == nil || jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// looseStrings returns the entries of an array, nil for those that are not
// strings.
func looseStrings(raw json.RawMessage) []*string {
	items := looseArray(raw)
	out := make([]*string, len(items))
	for i, item := range items {
		if s, ok := looseString(item); ok {
			out[i] = &s
		}
	}
	return out
}

func isNull(raw json.RawMessage) bool { return jsonKind(raw) == "null" }

// jsonKind names the kind of a valid JSON value for messages.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// splitField separates the "field: message" form of workorder errors. A
// message without a field path keeps its whole text.
func splitField(msg string) (field, rest string) {
	f, r, ok := strings.Cut(msg, ": ")
	switch {
	case ok && f == "top-level value":
		return "", r
	case !ok || f == "" || strings.ContainsAny(f, " \t\n\"'"):
		return "", msg
	}
	return f, r
}

// splitErrors undoes errors.Join.
func splitErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func join(at, field string) string {
	switch {
	case field == "":
		return at
	case at == "":
		return field
	}
	return at + "." + field
}

// commandReason is a ParseCommand error without the command, which the
// field already names.
func commandReason(err error) string {
	var ce *proc.CommandError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}

// clip quotes s, shortened to about n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}
