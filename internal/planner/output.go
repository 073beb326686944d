package planner

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/workorder"
)

// ManifestName is the plan file written last, after every WO-NN.json.
const ManifestName = "WORK_ORDERS_MANIFEST.json"

// CompileInfo says where a plan came from, so a run can cite it.
type CompileInfo struct {
	CompileHash      string `json:"compile_hash"`
	Model            string `json:"model"`
	ReasoningEffort  string `json:"reasoning_effort"`
	TemplateSHA256   string `json:"template_sha256"`
	ValidatorVersion string `json:"validator_version"`
	// SpecSHA256 is the spec's hash, so a later release that plans the
	// same spec differently can tell it is the same spec (empty in plans
	// of releases before it was recorded).
	SpecSHA256 string `json:"spec_sha256,omitempty"`
}

// ReadCompileInfo returns the provenance in the manifest of plan dir;
// nil when the plan was not compiled (or has no manifest).
func ReadCompileInfo(dir string) (*CompileInfo, error) {
	data, err := workorder.ReadLimited(filepath.Join(dir, ManifestName), maxPlanFileBytes, "plan")
	if err != nil {
		return nil, err
	}
	var top struct {
		Compile *CompileInfo `json:"compile"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return top.Compile, nil
}

// PlanFile is WORK_ORDERS_MANIFEST.json: the plan plus its provenance.
type PlanFile struct {
	Compile        *CompileInfo              `json:"compile,omitempty"`
	VerifyContract *workorder.VerifyContract `json:"verify_contract"`
	WorkOrders     []workorder.WorkOrder     `json:"work_orders"`
}

// woFile is the name of a work order file: WO-NN.json, or WO-NNrK.json for
// an order a build's repair added (and wrong numbers, which validation
// reports).
var woFile = regexp.MustCompile(`^WO-\d+(r\d+)?\.json$`)

// existingPlan lists the work order files, in id order (WO-03, WO-03r1,
// WO-03r2, …, WO-03r10, WO-04: workorder.CompareIDs), then the manifest,
// already in dir.
func existingPlan(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if woFile.MatchString(e.Name()) || e.Name() == ManifestName {
			out = append(out, e.Name())
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if a == ManifestName || b == ManifestName {
			return cmp.Compare(boolInt(a == ManifestName), boolInt(b == ManifestName))
		}
		return workorder.CompareIDs(strings.TrimSuffix(a, ".json"), strings.TrimSuffix(b, ".json"))
	})
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CheckOutdir refuses to plan into a directory that already holds a plan,
// unless overwrite is set. It runs before any model call, so a mistake costs
// nothing.
func CheckOutdir(dir string, overwrite bool) error {
	existing, err := existingPlan(dir)
	if err != nil {
		return fmt.Errorf("read output directory %s: %w", dir, err)
	}
	if len(existing) > 0 && !overwrite {
		return fmt.Errorf("%s already holds a plan (%s); pass --overwrite to replace it", dir, existing[0])
	}
	return nil
}

// WritePlan writes WO-NN.json files, then the manifest last, each atomically.
// Work order files of an earlier plan that the new one does not have are
// removed (CheckOutdir has made sure overwriting was asked for).
func WritePlan(dir string, m *workorder.Manifest, info CompileInfo) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	old, err := existingPlan(dir)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, wo := range m.WorkOrders {
		name := wo.ID + ".json"
		if err := artifact.WriteJSON(filepath.Join(dir, name), wo); err != nil {
			return written, err
		}
		written = append(written, name)
	}
	for _, name := range old {
		if name != ManifestName && !slices.Contains(written, name) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return written, fmt.Errorf("remove stale %s: %w", name, err)
			}
		}
	}
	// A plan now stands here: errors of an earlier failed compile do not.
	if err := os.Remove(filepath.Join(dir, "validation_errors.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return written, err
	}
	plan := PlanFile{Compile: &info, VerifyContract: m.VerifyContract, WorkOrders: m.WorkOrders}
	if err := artifact.WriteJSON(filepath.Join(dir, ManifestName), plan); err != nil {
		return written, err
	}
	return append(written, ManifestName), nil
}

// maxPlanFileBytes bounds a manifest file read by LoadPlan: a plan of
// MaxPlanBytes plus room for the compile block, so that a plan just over the
// limit is still read and reported as E000.
const maxPlanFileBytes = MaxPlanBytes + 64*1024

// LoadPlan reads a plan for `factory validate`: a manifest file (with or
// without our "compile" provenance), a single work order file, or a
// directory of WO-NN.json files (plus its manifest's verify_contract). The
// orders of a directory come in its manifest's order when the manifest
// lists exactly the directory's orders (a repaired plan may put WO-05
// before WO-04), else in id order (existingPlan). It
// returns the bytes of a plain manifest for Validate, and whether they hold
// a single work order file (see Env.LoneOrder). No file is read beyond its
// limit: workorder.MaxWorkOrderBytes for a work order file, a little over
// MaxPlanBytes for a manifest.
func LoadPlan(path string) (raw []byte, lone bool, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, false, err
	}
	if !info.IsDir() {
		data, err := workorder.ReadLimited(path, maxPlanFileBytes, "plan")
		if err != nil {
			return nil, false, err
		}
		return planBytes(data)
	}
	names, err := existingPlan(path)
	if err != nil {
		return nil, false, err
	}
	var contract json.RawMessage
	var orders []json.RawMessage
	var ids, listed []string     // the files' ids; the manifest's
	for _, name := range names { // in id order: WO-01, WO-01r1, … WO-99
		file := filepath.Join(path, name)
		if name == ManifestName {
			data, err := workorder.ReadLimited(file, maxPlanFileBytes, "plan")
			if err != nil {
				return nil, false, err
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(data, &top); err != nil {
				return nil, false, fmt.Errorf("%s: not a JSON object: %w", name, err)
			}
			if dup, ok := canon.RepeatedKey(data); ok {
				return nil, false, fmt.Errorf("%s: key %q appears twice", name, dup)
			}
			contract = top["verify_contract"]
			var heads []struct{ ID string }
			if json.Unmarshal(top["work_orders"], &heads) == nil {
				for _, h := range heads {
					listed = append(listed, h.ID)
				}
			}
			continue
		}
		data, err := workorder.ReadFile(file)
		if err != nil {
			return nil, false, err
		}
		// The file name is how users and `factory run` find an order.
		var head struct{ ID any }
		if json.Unmarshal(data, &head) == nil && head.ID != nil && head.ID != strings.TrimSuffix(name, ".json") {
			return nil, false, fmt.Errorf("%s holds work order %v; name the file after its id", name, head.ID)
		}
		orders = append(orders, data)
		ids = append(ids, strings.TrimSuffix(name, ".json"))
	}
	if len(listed) == len(ids) && !slices.Equal(listed, ids) &&
		slices.Equal(slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(ids))) {
		at := map[string]json.RawMessage{}
		for i, id := range ids {
			at[id] = orders[i]
		}
		for i, id := range listed {
			orders[i] = at[id]
		}
	}
	if len(orders) == 0 {
		if slices.Contains(names, ManifestName) {
			return LoadPlan(filepath.Join(path, ManifestName))
		}
		return nil, false, fmt.Errorf("%s holds no WO-NN.json files and no %s", path, ManifestName)
	}
	raw, err = json.Marshal(map[string]any{"verify_contract": contract, "work_orders": orders})
	return raw, false, err
}

// planBytes turns one file into a manifest: our manifest minus its
// provenance, a plain manifest as is, or a lone work order wrapped.
func planBytes(data []byte) ([]byte, bool, error) {
	var top map[string]json.RawMessage
	if _, repeated := canon.RepeatedKey(data); repeated || json.Unmarshal(data, &top) != nil {
		// Validate reports it as E000; re-encoding top would keep the
		// last of two equal keys and hide the duplicate.
		return data, false, nil
	}
	if _, ok := top["work_orders"]; ok {
		if _, ok := top["compile"]; !ok {
			return data, false, nil
		}
		delete(top, "compile")
		raw, err := json.Marshal(top)
		return raw, false, err
	}
	if _, ok := top["id"]; ok {
		raw, err := json.Marshal(map[string]any{"work_orders": []json.RawMessage{bytes.TrimSpace(data)}})
		return raw, true, err
	}
	return data, false, nil
}

// WriteValidationErrors leaves validation_errors.json in dir after a failed
// compile, next to where the plan would have been.
func WriteValidationErrors(dir string, issues []Issue) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return artifact.WriteJSON(filepath.Join(dir, "validation_errors.json"), nonNil(issues))
}
