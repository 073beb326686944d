package factory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/edit"
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
		if want := a.proposal.BaseSHA256(i); st.sha256 != want {
			stale = append(stale, fmt.Sprintf("%s: base_sha256 %s does not match the current content (sha256 %s)", p, want, st.sha256))
		}
	}
	if len(stale) > 0 {
		return fail(StageStaleContext, stale)
	}
	contents, ranges, stage, problems := proposedContents(a.proposal, paths, current)
	if len(problems) > 0 {
		return fail(stage, problems)
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
		st, content := current[i], contents[i]
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
			Edits: ranges[i],
		})
	}
	res.WriteOK = true
	r.progress("attempt %d/%d: tr: wrote %d file(s): %s", a.index, r.opts.MaxAttempts, len(paths), Summarize(res.TouchedFiles, 5))
	return nil
}

// editFooter ends every edit.Error brief; the edit_mismatch brief says it
// once, after every file's problems.
const editFooter = "No change was written; send the whole proposal again.\n"

// proposedContents is the new content of each of paths (in the order of
// p.Paths()): a write's content, or a file's current content with its
// edits spliced in. Before anything is written it refuses, with the stage
// to fail with, edits that do not apply exactly (edit_mismatch: every
// refused edit of every file is reported) and whole writes that elide most
// of an existing file (elided_content).
func proposedContents(p *workorder.WriteProposal, paths []string, current []fileState) (contents [][]byte, ranges [][]EditRange, stage string, problems []string) {
	contents = make([][]byte, len(paths))
	ranges = make([][]EditRange, len(paths))
	var elided []string
	for i, w := range p.Writes {
		contents[i] = []byte(w.Content)
		if st := current[i]; st.exists {
			if line, text, ok := edit.Elided(paths[i], string(st.data), w.Content); ok {
				elided = append(elided, fmt.Sprintf("%s: %s replaces the existing file but line %d, %q, stands for code it leaves out, and most of the file's lines are gone. "+
					"Send the complete content, or change the file with edits.", p.At(i), paths[i], line, text))
			}
		}
	}
	// Each file's part of the edit_mismatch brief is cut to an equal share.
	share := (MaxExcerptChars-200)/max(len(p.Edits), 1) + len(editFooter)
	for j, e := range p.Edits {
		i := len(p.Writes) + j
		base := current[i].data
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s: %s: ", p.At(i), paths[i])+fmt.Sprintf(format, args...))
		}
		if len(base) > workorder.MaxEditedFileBytes {
			bad("the file is %d bytes; edits change files of up to %d bytes", len(base), workorder.MaxEditedFileBytes)
			continue
		}
		if !utf8.Valid(base) || bytes.IndexByte(base, 0) >= 0 {
			bad("the file is not UTF-8 text; edits change text files only")
			continue
		}
		reps := make([]edit.Replace, len(e.Replace))
		for k, rp := range e.Replace {
			reps[k] = edit.Replace{Old: rp.Old, New: rp.New}
		}
		out, spans, err := edit.Apply(string(base), reps)
		var ee *edit.Error
		switch {
		case errors.As(err, &ee):
			brief := strings.TrimSuffix(ee.BriefWithin(paths[i], share), editFooter)
			problems = append(problems, truncateChars(fmt.Sprintf("%s: ", p.At(i))+strings.TrimRight(brief, "\n"), share))
			continue
		case err != nil:
			bad("%v", err)
			continue
		case len(out) > workorder.MaxEditedFileBytes:
			bad("the edited file would be %d bytes; the limit is %d", len(out), workorder.MaxEditedFileBytes)
			continue
		}
		contents[i] = []byte(out)
		ranges[i] = make([]EditRange, len(spans))
		for k, sp := range spans {
			ranges[i][k] = EditRange{Index: sp.Index, Lines: [2]int{sp.StartLine, sp.EndLine}, NewLines: [2]int{sp.NewStartLine, sp.NewEndLine}}
		}
	}
	if len(problems) > 0 {
		return nil, nil, StageEditMismatch, append(problems, strings.TrimSpace(editFooter))
	}
	if len(elided) > 0 {
		return nil, nil, StageElidedContent, elided
	}
	return contents, ranges, "", nil
}

// checkScope normalises every proposed path and reports each one that is
// duplicated, unsafe, outside allowed_files or forbidden, and separately the
// ones that could not be inspected.
func (r *Run) checkScope(p *workorder.WriteProposal) (paths, problems, ioProblems []string) {
	seen := map[string]bool{}
	for i, path := range p.Paths() {
		at := p.At(i)
		clean, err := workorder.NormalizePath(path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", at, err))
			paths = append(paths, path)
			continue
		}
		paths = append(paths, clean)
		switch {
		case clean != path:
			// Exactly as listed: "a/../b.py" may land on an allowed file,
			// but a model that writes it is not following the contract.
			problems = append(problems, fmt.Sprintf("%s: %q is not written as listed in allowed_files; use %q", at, path, clean))
		case seen[clean]:
			problems = append(problems, fmt.Sprintf("%s: %s is written more than once", at, clean))
		case r.opts.WorkOrder.IsForbidden(clean):
			problems = append(problems, fmt.Sprintf("%s: %s is forbidden by the work order", at, clean))
		case !r.opts.WorkOrder.IsAllowed(clean):
			problems = append(problems, fmt.Sprintf("%s: %s is not in allowed_files", at, clean))
		default:
			var ioErr *ioError
			if err := checkNoSymlink(r.repo.Root, clean); errors.As(err, &ioErr) {
				ioProblems = append(ioProblems, fmt.Sprintf("%s: %v", at, err))
			} else if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", at, err))
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
