// Per-order checks that need only the order itself: E001, E003–E007, E105,
// E108.

package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

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
// E105, E108. seen maps ids to the index that used them first.
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
	if v.repaired {
		v.repairID(idx, o, id, isString, seen)
	} else if isString && id != want {
		switch first, dup := seen[id]; {
		case workorder.CheckID(id) != nil:
			v.add(idx, "E001", o.woid, "id", "%s is not of the form WO-NN (two digits); work order %d must be %q", clip(id, maxIDBytes), idx+1, want)
		case v.env.compiled && !v.env.LoneOrder && isRepairID(id):
			v.add(idx, "E001", o.woid, "id", "%q is the id of an order a repair adds; a plan's ids run WO-01, WO-02, … without gaps, so work order %d must be %q", id, idx+1, want)
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
		// still takes part in the chain checks, though not in the
		// Manifest (see order.parsed).
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
		o.wo, o.parsed = &w, true
	}

	for k, c := range looseStrings(loose["acceptance_commands"]) {
		o.cmds = append(o.cmds, command{})
		if c != nil {
			o.cmds[k] = v.acceptance(idx, o.woid, fmt.Sprintf("acceptance_commands[%d]", k), *c)
		}
	}
	return o
}

// acceptance checks one acceptance command: E003, E007, E105, E108, E006.
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
	if v.installCheck(idx, woid, field, "acceptance command", line, argv) {
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

// commandReason is a ParseCommand error without the command, which the
// field already names.
func commandReason(err error) string {
	var ce *proc.CommandError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}
