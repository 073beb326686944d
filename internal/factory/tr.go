package factory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/workorder"
)

// tr validates the whole proposal before the first byte is written, then
// applies the writes atomically, file by file.
func (r *Run) tr(ctx context.Context, s *state) error {
	a := s.cur
	res := &WriteResult{TouchedFiles: []string{}, Errors: []string{}, Files: []WrittenFile{}}
	a.write = res
	fail := func(stage string, problems []string) error {
		res.Errors = problems
		a.brief = newBrief(stage, nil, nil, strings.Join(problems, "\n"))
		r.progress("attempt %d/%d: tr: refused (%s): %s", a.index, r.opts.MaxAttempts, stage, Summarize(problems, 3))
		return nil
	}

	paths, problems, ioProblems := r.checkScope(a.proposal)
	if len(problems) > 0 {
		return fail(StageWriteScopeViolation, problems)
	}
	if len(ioProblems) > 0 {
		return fail(StageWriteFailed, ioProblems)
	}
	// Touched means about to be written: refused paths are in Errors only.
	res.TouchedFiles = sortedCopy(paths)
	a.touched = res.TouchedFiles
	var stale []string
	current := make([]fileState, len(paths))
	for i, p := range paths {
		st, err := r.currentFile(p)
		if err != nil {
			// Nothing is written yet, but the path cannot be used: an I/O
			// problem, not something the model can fix by retrying.
			return fail(StageWriteFailed, []string{err.Error()})
		}
		current[i] = st
		if want := a.proposal.Writes[i].BaseSHA256; st.sha256 != want {
			stale = append(stale, fmt.Sprintf("%s: base_sha256 %s does not match the current content (sha256 %s)", p, want, st.sha256))
		}
	}
	if len(stale) > 0 {
		return fail(StageStaleContext, stale)
	}

	for i, p := range paths {
		if st := current[i]; st.exists {
			a.undo.Overwritten = append(a.undo.Overwritten, overwrite{Path: p, Mtime: st.mtime})
			if r.baseline.IsIgnored(p) {
				a.undo.Backups = append(a.undo.Backups, backup{Path: p, Data: st.data, Mode: st.mode})
			}
		}
	}
	// From here on the repo may change (commands run even when nothing is
	// written): the journal must say how to undo it before it does.
	if err := r.writeJournal(a); err != nil {
		return err
	}
	for i, p := range paths {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		st, content := current[i], []byte(a.proposal.Writes[i].Content)
		full := filepath.Join(r.repo.Root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fail(StageWriteFailed, []string{fmt.Sprintf("%s: create parent directories: %v", p, err)})
		}
		mode := fs.FileMode(0o644)
		if st.exists {
			mode = st.mode
		}
		if err := a.writes.WriteFile(full, content, mode); err != nil {
			return fail(StageWriteFailed, []string{fmt.Sprintf("%s: %v", p, err)})
		}
		res.Files = append(res.Files, WrittenFile{
			Path: p, Created: !st.exists, SHA256Before: st.sha256, SHA256After: canon.SHA256Hex(content), Bytes: len(content),
		})
	}
	res.WriteOK = true
	r.progress("attempt %d/%d: tr: wrote %d file(s): %s", a.index, r.opts.MaxAttempts, len(paths), Summarize(res.TouchedFiles, 5))
	return nil
}

// checkScope normalises every proposed path and reports each one that is
// duplicated, unsafe, outside allowed_files or forbidden, and separately the
// ones that could not be inspected.
func (r *Run) checkScope(p *workorder.WriteProposal) (paths, problems, ioProblems []string) {
	seen := map[string]bool{}
	for i, w := range p.Writes {
		clean, err := workorder.NormalizePath(w.Path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("writes[%d]: %v", i, err))
			paths = append(paths, w.Path)
			continue
		}
		paths = append(paths, clean)
		switch {
		case clean != w.Path:
			// Exactly as listed: "a/../b.py" may land on an allowed file,
			// but a model that writes it is not following the contract.
			problems = append(problems, fmt.Sprintf("writes[%d]: %q is not written as listed in allowed_files; use %q", i, w.Path, clean))
		case seen[clean]:
			problems = append(problems, fmt.Sprintf("writes[%d]: %s is written more than once", i, clean))
		case r.opts.WorkOrder.IsForbidden(clean):
			problems = append(problems, fmt.Sprintf("writes[%d]: %s is forbidden by the work order", i, clean))
		case !r.opts.WorkOrder.IsAllowed(clean):
			problems = append(problems, fmt.Sprintf("writes[%d]: %s is not in allowed_files", i, clean))
		default:
			var ioErr *ioError
			if err := checkNoSymlink(r.repo.Root, clean); errors.As(err, &ioErr) {
				ioProblems = append(ioProblems, fmt.Sprintf("writes[%d]: %v", i, err))
			} else if err != nil {
				problems = append(problems, fmt.Sprintf("writes[%d]: %v", i, err))
			}
		}
		seen[clean] = true
	}
	return paths, problems, ioProblems
}

// ioError is a path that could not be inspected, as opposed to one that
// breaks a rule: the model cannot fix it by retrying.
type ioError struct{ error }

func (e *ioError) Unwrap() error { return e.error }

// checkNoSymlink walks p from the repo root and refuses a symlink at any
// component and a parent that is not a directory: a write must land on the
// path it names, inside the repository.
func checkNoSymlink(root, p string) error {
	parts := strings.Split(p, "/")
	cur := root
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the rest will be created
		}
		if err != nil {
			return &ioError{fmt.Errorf("%s: %v", p, err)}
		}
		at := strings.Join(parts[:i+1], "/")
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %s is a symlink; the harness never writes or reads through symlinks", p, at)
		}
		if i < len(parts)-1 && !info.IsDir() {
			return fmt.Errorf("%s: %s is not a directory", p, at)
		}
		if i == len(parts)-1 && !info.Mode().IsRegular() {
			return fmt.Errorf("%s: exists and is not a regular file", p)
		}
	}
	return nil
}

// writeJournal records attempt a in the journal and marks it journaled.
func (r *Run) writeJournal(a *attempt) error {
	j := journal{
		Version: journalVersion, Tool: r.tool(), PID: os.Getpid(), RunDir: r.runDir,
		Attempt: a.index, Writes: a.touched, Baseline: r.baseline, Undo: a.undo,
	}
	if err := r.repo.WriteJournal(j); err != nil {
		return err
	}
	a.journaled = true
	return nil
}

type fileState struct {
	exists bool
	data   []byte
	mode   fs.FileMode
	mtime  time.Time
	sha256 string
}

func (r *Run) currentFile(p string) (fileState, error) {
	full := filepath.Join(r.repo.Root, filepath.FromSlash(p))
	info, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return fileState{sha256: workorder.EmptySHA256}, nil
	}
	if err != nil {
		return fileState{}, fmt.Errorf("%s: %v", p, err)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return fileState{}, fmt.Errorf("%s: %v", p, err)
	}
	return fileState{exists: true, data: data, mode: info.Mode().Perm(), mtime: info.ModTime(), sha256: canon.SHA256Hex(data)}, nil
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return nonNil(out)
}
