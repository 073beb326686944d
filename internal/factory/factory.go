// Package factory runs one work order through SE → TR → PO → finalize: the
// model proposes full-file writes, the harness checks and applies them, runs
// verification and acceptance commands, and rolls back on failure.
package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

// Options configure one run.
type Options struct {
	Repo      string
	WorkOrder *workorder.WorkOrder
	Out       string

	Model       llm.Model
	ModelName   string
	Temperature float64
	// JSONSchema asks the model server for strict structured output.
	JSONSchema bool

	MaxAttempts    int
	CommandTimeout time.Duration
	// VerifyCommands, when set, replace the global verification rules.
	VerifyCommands []string
	// Python is the interpreter used by the built-in verification commands.
	Python string

	// RecordPath is the transcript the model records to, if any: like Out it
	// must be outside the repo, or rollback would delete it.
	RecordPath string

	// Progress receives one human-readable line per step; nil discards.
	Progress io.Writer
}

// PreflightError is a problem found before anything was modified.
type PreflightError struct{ Msg string }

func (e *PreflightError) Error() string { return e.Msg }

func preflightf(format string, args ...any) error {
	return &PreflightError{Msg: fmt.Sprintf(format, args...)}
}

// Run is a preflighted run, ready to execute.
type Run struct {
	opts     Options
	repo     *gitws.Repo
	baseline gitws.Baseline
	runID    string
	verify   [][]string // override argvs, parsed at preflight
	accept   [][]string
	runDir   string
}

// Preflight checks everything that can be checked without touching the repo
// or the output directory: repository state, output location, work order
// commands. Any error is a *PreflightError and nothing has been modified.
func Preflight(ctx context.Context, opts Options) (*Run, error) {
	if opts.MaxAttempts < 1 {
		return nil, preflightf("--max-attempts must be at least 1, got %d", opts.MaxAttempts)
	}
	if opts.CommandTimeout <= 0 {
		return nil, preflightf("--timeout-seconds must be positive")
	}
	repo, err := gitws.Open(ctx, opts.Repo)
	if err != nil {
		return nil, preflightf("repository %s: %v", opts.Repo, err)
	}
	dirty, err := repo.Dirty(ctx)
	if err != nil {
		return nil, preflightf("repository %s: %v", repo.Root, err)
	}
	if len(dirty) > 0 {
		return nil, preflightf("repository %s has uncommitted changes (commit or stash them first; the factory rolls back with git and must not touch your work): %s",
			repo.Root, summarize(dirty, 5))
	}
	baseline, err := repo.Snapshot(ctx)
	if err != nil {
		if errors.Is(err, gitws.ErrNoCommits) {
			return nil, preflightf("repository %s has no commits; make an initial commit first", repo.Root)
		}
		return nil, preflightf("repository %s: %v", repo.Root, err)
	}
	if err := checkOutside("--out", opts.Out, repo.Root); err != nil {
		return nil, err
	}
	if info, err := os.Stat(opts.Out); err == nil && !info.IsDir() {
		return nil, preflightf("--out %s exists and is not a directory", opts.Out)
	}
	if opts.RecordPath != "" {
		if err := checkOutside("--record", opts.RecordPath, repo.Root); err != nil {
			return nil, err
		}
	}
	r := &Run{opts: opts, repo: repo, baseline: baseline}
	for i, c := range opts.WorkOrder.AcceptanceCommands {
		argv, err := proc.ParseCommand(c)
		if err != nil {
			return nil, preflightf("work order %s: acceptance_commands[%d]: %v", opts.WorkOrder.ID, i, err)
		}
		r.accept = append(r.accept, argv)
	}
	for _, c := range opts.VerifyCommands {
		argv, err := proc.ParseCommand(c)
		if err != nil {
			return nil, preflightf("--verify-command: %v", err)
		}
		r.verify = append(r.verify, argv)
	}
	if r.runID, err = workorder.RunID(opts.WorkOrder, baseline.Commit); err != nil {
		return nil, err
	}
	return r, nil
}

func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s, and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// checkOutside refuses an output path inside the repository: files there
// would dirty the tree and be deleted by rollback.
func checkOutside(flag, path, root string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return preflightf("%s %s: %v", flag, path, err)
	}
	// Resolve symlinks on the longest existing prefix: path may not exist yet.
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return preflightf("%s %s: %v", flag, path, err)
	}
	rel, err := filepath.Rel(root, filepath.Join(resolved, rest))
	if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return preflightf("%s %s is inside the repository %s; choose a path outside it", flag, path, root)
	}
	return nil
}

// RunID is the deterministic id of this run.
func (r *Run) RunID() string { return r.runID }

// Result is the outcome of Execute.
type Result struct {
	Verdict     string
	RunID       string
	RunDir      string
	SummaryPath string
}

func (r *Run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format+"\n", args...)
	}
}
