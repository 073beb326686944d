// Cross-order checks (E101–E107, W101, W102), the cumulative file state
// they share, and ComputeVerifyExempt which walks the same chain.

package planner

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/workorder"
)

// chain runs the cross-order checks. complete says every order and the
// contract parsed, which E106 needs.
func (v *validator) chain(orders []*order, contract *workorder.VerifyContract, complete bool) {
	state := newFileState(v.env.RepoFiles)
	// possible adds every file an order so far may write (E107).
	possible := newFileState(v.env.RepoFiles)
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
			possible.add(c.Path, w.ID)
		}
		for _, a := range w.AllowedFiles {
			possible.add(a, w.ID)
		}
		if !broken && !v.env.RepoUnknown {
			v.dependencies(o, state)
			v.toolChecks(o, possible)
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
