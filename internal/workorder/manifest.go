package workorder

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// VerifyContract is the planner's statement of what global verification
// needs: the command the factory runs after each work order and the files it
// depends on. A work order after which Requires does not hold yet is
// verify-exempt (see planner.ComputeVerifyExempt).
type VerifyContract struct {
	Command  string      `json:"command" jsonschema:"required"`  // e.g. "bash scripts/verify.sh"
	Requires []Condition `json:"requires" jsonschema:"required"` // conditions that must hold for Command to work
}

// Manifest is what the planner produces: the work orders in execution order
// and, optionally, the verify contract.
type Manifest struct {
	VerifyContract *VerifyContract `json:"verify_contract" jsonschema:"oneof_type=object;null"`
	WorkOrders     []WorkOrder     `json:"work_orders" jsonschema:"required,minItems=1"`
}

// Normalize validates c in place: a non-blank command and condition kinds and
// paths under the work order rules, with paths normalised. Whether the
// command parses as an argv is checked by the planner, which may run
// processes. It reports every problem, not just the first.
func (c *VerifyContract) Normalize() error {
	var errs []error
	if strings.TrimSpace(c.Command) == "" {
		errs = append(errs, errors.New("command: must not be empty"))
	}
	if c.Requires == nil {
		c.Requires = []Condition{}
	}
	for i, cond := range c.Requires {
		at := fmt.Sprintf("requires[%d]", i)
		if cond.Kind != FileExists && cond.Kind != FileAbsent {
			errs = append(errs, fmt.Errorf("%s.kind: must be %q or %q, not %q", at, FileExists, FileAbsent, cond.Kind))
		}
		clean, err := NormalizePath(cond.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.path: %v", at, err))
			continue
		}
		c.Requires[i].Path = clean
	}
	return joinSorted(errs)
}

// ParseManifest strictly decodes and validates a manifest, such as a
// WORK_ORDERS_MANIFEST.json written by the planner: every work order as
// ParseWorkOrder would, the verify contract as VerifyContract.Normalize
// would, and at least one work order. Errors name the field by its JSON
// path, e.g. `work_orders[2].allowed_files[0]`. It does not check the
// plan-level rules (id sequence, condition chain); planner.Validate does.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := DecodeStrict(data, &m); err != nil {
		return nil, err
	}
	var errs []error
	if len(m.WorkOrders) == 0 {
		errs = append(errs, errors.New("work_orders: must list at least one work order"))
	}
	if m.VerifyContract != nil {
		errs = append(errs, prefixed("verify_contract.", m.VerifyContract.Normalize())...)
	}
	for i := range m.WorkOrders {
		errs = append(errs, prefixed(fmt.Sprintf("work_orders[%d].", i), m.WorkOrders[i].Normalize())...)
	}
	if err := joinSorted(errs); err != nil {
		return nil, err
	}
	return &m, nil
}

// prefixed splits a joined error into its parts, each prefixed with at.
func prefixed(at string, err error) []error {
	if err == nil {
		return nil
	}
	parts := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	}
	out := make([]error, 0, len(parts))
	for _, e := range parts {
		out = append(out, fmt.Errorf("%s%w", at, e))
	}
	return out
}

func joinSorted(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}
