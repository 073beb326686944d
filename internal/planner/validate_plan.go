// Plan-level checks (E000): size, encoding, JSON syntax, top-level keys,
// the work_orders list, verify_contract, and strict-decoding errors.

package planner

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

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
	contractOK := true // absent, null or read
	if rawC, ok := top.keys["verify_contract"]; ok && !isNull(rawC) {
		if contract, ok = v.contract(rawC); !ok {
			fatal, contractOK = true, false
		}
	}
	rawOrders, ok := v.workOrderList(top.keys)
	if !ok {
		fatal = true
	}
	v.repaired = v.env.repairIDs() || !v.env.compiled && slices.ContainsFunc(rawOrders, func(r json.RawMessage) bool {
		id, _ := looseString(looseObject(r)["id"])
		_, k, ok := workorder.ParseID(id)
		return ok && k > 0
	})
	orders := make([]*order, len(rawOrders))
	seen := map[string]int{}
	badID := false
	for i, r := range rawOrders {
		orders[i] = v.order(i, r, seen)
		if orders[i].wo == nil {
			fatal = true
		}
		badID = badID || orders[i].wo != nil && !orders[i].parsed
	}
	v.inspectAll(orders)
	v.chain(orders, contract, !fatal)
	if v.env.Repair != nil {
		v.repair(orders, contract, contractOK)
	}
	if fatal || badID || len(orders) == 0 {
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
	if len(v.issues) > before {
		return nil, false
	}
	// A command that cannot run is the same error as in an acceptance
	// command (E003, E007, E108), not a malformed plan: like ParseManifest, the
	// manifest still holds the contract.
	// It runs without network too (E108).
	argv, err := proc.ParseCommand(c.Command)
	if err != nil {
		var ce *proc.CommandError
		if errors.As(err, &ce) && ce.Kind == proc.KindShellFeature {
			v.planIssue("E003", "verify_contract.command", "%s; write one plain command with literal arguments", ce.Reason)
		} else {
			v.planIssue("E007", "verify_contract.command", "cannot be split into program arguments: %s", commandReason(err))
		}
	} else {
		v.installCheck(-1, "", "verify_contract.command", "verify command", c.Command, argv)
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
