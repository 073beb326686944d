package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// cmdExcerptBytes bounds stdout/stderr excerpts kept in result files.
const cmdExcerptBytes = 4000

// po runs global verification, the postcondition gate and the acceptance
// commands, stopping at the first failure.
func (r *Run) po(ctx context.Context, s *state) error {
	a := s.cur
	if err := r.depsStep(ctx, a); err != nil || a.brief != nil {
		return err
	}
	verify, err := r.verifyCommands()
	if err != nil {
		return err
	}
	for i, argv := range verify {
		res, err := r.runCommand(ctx, a, fmt.Sprintf("verify_%d", i+1), argv)
		if err != nil {
			return err
		}
		a.verify = append(a.verify, res)
		if a.brief != nil {
			return nil
		}
		if res.ExitCode != 0 {
			a.brief = commandBrief(StageVerifyFailed, res, r.denials(res))
			return nil
		}
	}
	if msg := r.checkConditions(r.opts.WorkOrder.Postconditions); msg != "" {
		a.brief = newBrief(StageAcceptanceFailed, nil, nil, "postcondition failed after the writes: "+msg)
		r.progress("attempt %d/%d: po: postcondition failed: %s", a.index, r.opts.MaxAttempts, msg)
		return nil
	}
	for i, argv := range r.accept {
		res, err := r.runCommand(ctx, a, fmt.Sprintf("acceptance_%d", i+1), argv)
		if err != nil {
			return err
		}
		a.accept = append(a.accept, res)
		if a.brief != nil {
			return nil
		}
		if res.ExitCode != 0 {
			a.brief = commandBrief(StageAcceptanceFailed, res, r.denials(res))
			return nil
		}
	}
	return nil
}

// depsStep runs the dependency step (package deps) before verification.
// A failure the attempt is blamed for becomes a deps_failed brief; only a
// failure of the harness itself, or an interruption, is an error.
func (r *Run) depsStep(ctx context.Context, a *attempt) error {
	if !r.opts.Deps.Enabled() {
		return nil
	}
	if r.depsBox == nil {
		// The run started with no manifest: prepare the step now that an
		// attempt wrote one, or skip it.
		// A manifest that does not parse is the step's to report.
		if uses, err := deps.Uses(r.repo.Root); !uses && err == nil {
			return nil
		}
		var err error
		if r.sandbox, r.depsBox, err = prepareDeps(r.opts, runRequest(r.opts, r.repo)); err != nil {
			return err
		}
	}
	var recordErr error
	rep, err := deps.Step(ctx, deps.Spec{
		Root: r.repo.Root, Opts: r.opts.Deps, Sandbox: r.depsBox, Env: r.env, Dir: a.dir,
		Timeout: r.opts.CommandTimeout,
		Progress: func(format string, args ...any) {
			r.progress("attempt %d/%d: po: %s", a.index, r.opts.MaxAttempts, fmt.Sprintf(format, args...))
		},
		OnStart: func(pgid int, startTicks uint64) {
			recordErr = r.repo.RecordCommand(gitws.RunningCommand{PGID: pgid, StartTicks: startTicks})
		},
	})
	if len(rep.Outcomes) > 0 || err != nil {
		a.deps = &rep
	}
	a.depsEnv, a.depsRan, a.lockfiles = rep.Env, rep.Ran, rep.Lockfiles
	if err := errors.Join(recordErr, r.repo.ClearCommand()); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := r.checkMeta(a, "the dependency step", []string{"factory", "deps"}); err != nil || a.brief != nil {
		return err
	}
	if se := (*deps.StepError)(nil); errors.As(err, &se) {
		cmd := se.Command
		a.brief = newBrief(StageDepsFailed, &cmd, nil, truncateChars(se.Error(), MaxExcerptChars-200)+
			"\nDependencies are installed by the harness from the manifest and lockfile; fix the manifest (names, versions), never install in a command.")
		return nil
	}
	return err
}

// commandEnv is the environment of a's verification and acceptance
// commands: the run's, with what the dependency step set (GOPROXY=off, the
// virtual environment first on PATH, …).
func (r *Run) commandEnv(a *attempt) []string {
	if len(a.depsEnv) == 0 {
		return r.env
	}
	return proc.SetEnv(r.env, a.depsEnv...)
}

// verifyCommands applies the global verification rules (ARCHITECTURE "PO
// Node"), evaluated after the writes: an override wins; a verify-exempt work
// order only builds; else scripts/verify.sh if present; else the default
// verification of the languages the repository holds (internal/lang). A
// Python repository, or one with no project file at all, gets exactly the
// seeds' commands: `python -m compileall -q .` when exempt, else compileall,
// `pip --version` and `pytest -q`.
func (r *Run) verifyCommands() ([][]string, error) {
	if len(r.verify) > 0 {
		return r.verify, nil
	}
	langs, err := r.languages()
	if err != nil {
		return nil, err
	}
	if r.opts.WorkOrder.VerifyExempt {
		return langs.CompileOnly(r.opts.Python), nil
	}
	if r.hasVerifyScript() {
		return [][]string{{"bash", "scripts/verify.sh"}}, nil
	}
	return langs.Verify(r.opts.Python), nil
}

func (r *Run) hasVerifyScript() bool {
	info, err := os.Lstat(filepath.Join(r.repo.Root, "scripts", "verify.sh"))
	return err == nil && info.Mode().IsRegular()
}

// languages detects the repository's languages as the work tree is now.
func (r *Run) languages() (lang.Detection, error) {
	d, err := lang.Detect(os.DirFS(r.repo.Root))
	if err != nil {
		return lang.Detection{}, fmt.Errorf("detect the repository's languages: %w", err)
	}
	return d, nil
}

// runCommand runs argv in the repo with logs in the attempt's logs/
// directory. It returns an error only when the run itself was interrupted
// or the git metadata could not be restored. When the command changed git
// metadata, that is restored at once (before any git runs again) and
// a.brief says so, whatever the command's exit code.
func (r *Run) runCommand(ctx context.Context, a *attempt, name string, argv []string) (CmdResult, error) {
	stdout := filepath.Join(a.dir, "logs", name+".stdout.txt")
	stderr := filepath.Join(a.dir, "logs", name+".stderr.txt")
	r.progress("attempt %d/%d: po: %s: running %s", a.index, r.opts.MaxAttempts, name, truncateChars(lang.Quote(argv), 300))
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(Event{Attempt: a.index, Node: nodePO, Command: &CommandStart{Name: name, Argv: argv}})
	}
	stop := r.waiting(name + " is running")
	var recordErr error
	res := proc.Run(ctx, proc.Spec{
		Argv: argv, Dir: r.repo.Root, Timeout: r.opts.CommandTimeout, Stdout: stdout, Stderr: stderr,
		Env: r.commandEnv(a), MaxOutputBytes: proc.DefaultMaxOutputBytes, Sandbox: r.sandbox,
		// The journal names the running group, so that `factory recover`
		// can kill it if this process is killed first.
		OnStart: func(pgid int, startTicks uint64) {
			recordErr = r.repo.RecordCommand(gitws.RunningCommand{PGID: pgid, StartTicks: startTicks})
		},
	})
	stop()
	if err := errors.Join(recordErr, r.repo.ClearCommand()); err != nil {
		return CmdResult{}, err
	}
	if ctx.Err() != nil {
		return CmdResult{}, context.Cause(ctx)
	}
	if err := r.checkMeta(a, name, argv); err != nil {
		return CmdResult{}, err
	}
	out := CmdResult{
		Command:         argv,
		ExitCode:        res.ExitCode,
		TimedOut:        res.TimedOut,
		OutputLimited:   res.OutputLimited,
		Error:           res.Err,
		StdoutPath:      r.rel(stdout),
		StderrPath:      r.rel(stderr),
		DurationSeconds: res.Duration.Seconds(),
	}
	var err error
	if out.StdoutTrunc, err = proc.Tail(stdout, cmdExcerptBytes); err != nil {
		return CmdResult{}, fmt.Errorf("read log %s: %w", stdout, err)
	}
	if out.StderrTrunc, err = proc.Tail(stderr, cmdExcerptBytes); err != nil {
		return CmdResult{}, fmt.Errorf("read log %s: %w", stderr, err)
	}
	out.StdoutTrunc, out.StderrTrunc = r.relativize(out.StdoutTrunc), r.relativize(out.StderrTrunc)
	status := fmt.Sprintf("exit %d", res.ExitCode)
	if res.Err != "" {
		status += " (" + res.Err + ")"
	}
	r.progress("attempt %d/%d: po: %s: %s → %s", a.index, r.opts.MaxAttempts, name, lang.Quote(argv), status)
	return out, nil
}

// checkMeta compares the git metadata with the baseline after a command;
// on a change it restores it and sets a.brief.
func (r *Run) checkMeta(a *attempt, name string, argv []string) error {
	changed, err := r.repo.MetaChanges(r.baseline)
	if err != nil {
		return fmt.Errorf("check git metadata after %s: %w", name, err)
	}
	if len(changed) == 0 {
		return nil
	}
	rep, err := r.repo.RestoreMeta(r.baseline)
	if err != nil {
		return fmt.Errorf("restore git metadata changed by %s: %w", name, err)
	}
	a.metaRestored.Removed = append(a.metaRestored.Removed, rep.Removed...)
	a.metaRestored.Restored = append(a.metaRestored.Restored, rep.Restored...)
	cmd := lang.Quote(argv)
	a.brief = newBrief(StageGitMetadataChanged, &cmd, nil, fmt.Sprintf(
		"%s changed git metadata, which commands must never touch: %s. It was restored; the attempt fails and is not retried.",
		truncateChars(cmd, 300), Summarize(changed, 10)))
	r.progress("attempt %d/%d: po: %s changed git metadata (%s); restored", a.index, r.opts.MaxAttempts, name, Summarize(changed, 5))
	return nil
}

// relativize shows the repository root as "." in output excerpts (full
// logs keep the original), so prompts and artifacts do not depend on where
// the repo is checked out and a transcript replays anywhere.
func (r *Run) relativize(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, r.repo.Root+"/", ""), r.repo.Root, ".")
}

// denials names the operations a confined command was denied, as its output
// shows them, for the failure brief; "" when unconfined.
func (r *Run) denials(res CmdResult) string {
	if !r.sandbox.Confined() {
		return ""
	}
	return sandbox.Explain(res.StderrTrunc + "\n" + res.StdoutTrunc)
}

// commandBrief summarises a failed command: why it stopped, then note (if
// any), then the tail of stderr, topped up with the tail of stdout, all
// within MaxExcerptChars so the tails (where errors are) survive.
func commandBrief(stage string, res CmdResult, note string) *FailureBrief {
	cmd := lang.Quote(res.Command)
	code := res.ExitCode
	head := fmt.Sprintf("%s exited with code %d", truncateChars(cmd, 300), code)
	if res.Error != "" {
		head += " (" + res.Error + ")"
	}
	head += "\n"
	if note != "" {
		head += note + "\n"
	}
	const errLabel, outLabel = "--- stderr ---\n", "\n--- stdout ---\n"
	room := MaxExcerptChars - utf8.RuneCountInString(head+errLabel+outLabel)
	stderr := lastChars(res.StderrTrunc, room)
	stdout := lastChars(res.StdoutTrunc, room-utf8.RuneCountInString(stderr))
	excerpt := head
	if stderr != "" {
		excerpt += errLabel + stderr
	}
	if stdout != "" {
		excerpt += outLabel + stdout
	}
	return newBrief(stage, &cmd, &code, excerpt)
}

// lastChars keeps the last n characters of s.
func lastChars(s string, n int) string {
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}
