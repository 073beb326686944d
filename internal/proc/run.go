// Package proc runs external commands from an argv, never through a shell, with timeouts that kill the
// whole process group.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// waitDelay is a backstop: how long Wait waits after canceling before it kills the child itself, in case
// killing the group did not take.
const waitDelay = 5 * time.Second

// maxStderr is how much of a failed command's stderr a RunError keeps.
const maxStderr = 4 << 10

// errTimedOut marks the context that Run's own timeout cancels, to tell it apart from the caller's.
var errTimedOut = errors.New("timed out")

// Spec describes one command for Run.
type Spec struct {
	// Argv is the program and its arguments. A program name without a slash is looked up in this
	// process's PATH (not Env's); one with a slash is relative to Dir.
	Argv    []string
	Dir     string        // working directory
	Timeout time.Duration // 0 means no timeout
	Stdout  string        // file path that receives stdout (created/truncated, 0644); "" = discard
	Stderr  string        // same for stderr; the same path as Stdout interleaves both in one file
	Env     []string      // environment; nil means SafeEnv(os.Environ())
}

// Result is how a command ended.
type Result struct {
	Argv     []string
	ExitCode int  // process exit code; -1 if it could not start, timed out, or died by a signal
	TimedOut bool // killed because Spec.Timeout elapsed
	// Err is "" on a normal exit (any code); otherwise why the command did not exit normally: a start
	// failure, "timed out after 2s", "killed by signal: killed" or "canceled".
	Err      string
	Duration time.Duration
}

// Run starts Argv in Dir and waits. It never returns a Go error: start failures (missing binary,
// permission denied, bad dir) become ExitCode -1 with Err set.
//
// Stdout and stderr go straight to files rather than pipes, so a background grandchild that keeps them
// open cannot delay Run. When the command exits, times out or ctx is canceled, every process left in its
// process group is killed, so nothing it started keeps running.
func Run(ctx context.Context, s Spec) Result {
	start := time.Now()
	res := Result{Argv: s.Argv, ExitCode: -1}
	res.Err = run(ctx, s, &res)
	res.Duration = time.Since(start)
	return res
}

// run does the work of Run, filling in res.ExitCode and res.TimedOut, and returns Result.Err.
func run(ctx context.Context, s Spec, res *Result) string {
	if len(s.Argv) == 0 {
		return "no command: argv is empty"
	}
	runCtx := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, s.Timeout, errTimedOut)
		defer cancel()
	}
	env := s.Env
	if env == nil {
		env = SafeEnv(os.Environ())
	}
	cmd := command(runCtx, s.Dir, s.Argv, env)

	stdout, err := createOutput(s.Stdout, "stdout")
	if err != nil {
		return err.Error()
	}
	defer stdout.Close() // only the child writes to it, so Close has nothing to report
	// Sharing one file keeps the lines of both streams in order.
	stderr := stdout
	if s.Stderr != s.Stdout {
		if stderr, err = createOutput(s.Stderr, "stderr"); err != nil {
			return err.Error()
		}
		defer stderr.Close()
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err = wait(cmd)
	switch {
	case exitedNormally(cmd):
		res.ExitCode = cmd.ProcessState.ExitCode()
		return ""
	case context.Cause(runCtx) == errTimedOut:
		res.TimedOut = true
		return "timed out after " + s.Timeout.String()
	case ctx.Err() != nil:
		return "canceled"
	case cmd.ProcessState != nil: // it ran but did not exit, so a signal ended it
		return "killed by signal: " + cmd.ProcessState.Sys().(syscall.WaitStatus).Signal().String()
	}
	return err.Error()
}

// createOutput creates or truncates the file at path for a child's output; "" means /dev/null.
func createOutput(path, stream string) (*os.File, error) {
	if path == "" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s file: %w", stream, err)
	}
	return f, nil
}

// Output runs argv in dir and returns stdout; used for git. On failure the error is *RunError, and
// stdout is still returned when the command ran. A nil env means os.Environ().
//
// Like Run, it kills the process group when the command ends, and it captures output through files
// rather than pipes, so that a background process started by a git hook cannot hold Output up.
func Output(ctx context.Context, dir string, argv []string, env []string) ([]byte, error) {
	fail := func(err error) *RunError {
		return &RunError{Argv: argv, Dir: dir, ExitCode: -1, Err: err}
	}
	if len(argv) == 0 {
		return nil, fail(errors.New("no command: argv is empty"))
	}
	stdout, err := scratchFile()
	if err != nil {
		return nil, fail(err)
	}
	defer stdout.Close()
	stderr, err := scratchFile()
	if err != nil {
		return nil, fail(err)
	}
	defer stderr.Close()

	cmd := command(ctx, dir, argv, env)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	runErr := wait(cmd)
	out, err := readAll(stdout)
	if err != nil && runErr == nil {
		return nil, fail(fmt.Errorf("cannot read stdout: %w", err))
	}
	if runErr == nil {
		return out, nil
	}
	e := fail(runErr)
	if cmd.ProcessState != nil {
		e.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil && !exitedNormally(cmd) {
		e.Err = ctx.Err() // more to the point than "signal: killed"
	}
	if e.Stderr, err = tailOf(stderr, maxStderr); err != nil {
		e.Stderr = "(cannot read stderr: " + err.Error() + ")"
	}
	return out, e
}

// readAll reads f from its start: the child's writes have moved the offset it shares with us.
func readAll(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// scratchFile creates an anonymous temporary file: it is removed at once, so it vanishes with its last
// descriptor even if the process dies.
func scratchFile() (*os.File, error) {
	f, err := os.CreateTemp("", "factory-proc-*")
	if err != nil {
		return nil, fmt.Errorf("cannot create a file to capture output: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot unlink the file that captures output: %w", err)
	}
	return f, nil
}

// RunError is a command run by Output that failed to start or exited unsuccessfully.
type RunError struct {
	Argv     []string
	Dir      string
	ExitCode int    // -1 if it could not start or died by a signal
	Stderr   string // the last 4 KiB of stderr, as Tail renders it
	Err      error
}

// Error reads like `git reset --hard abc (in /repo): exit status 128: fatal: ...`.
func (e *RunError) Error() string {
	var sb strings.Builder
	sb.WriteString(strings.Join(e.Argv, " "))
	if e.Dir != "" {
		fmt.Fprintf(&sb, " (in %s)", e.Dir)
	}
	fmt.Fprintf(&sb, ": %v", e.Err)
	if msg := strings.TrimSpace(e.Stderr); msg != "" {
		sb.WriteString(": ")
		sb.WriteString(msg)
	}
	return sb.String()
}

func (e *RunError) Unwrap() error { return e.Err }

// command builds a Cmd that runs argv directly in its own process group, with stdin from /dev/null.
// Canceling ctx kills the whole group.
func command(ctx context.Context, dir string, argv, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// wait starts cmd and waits for it, then kills whatever is left of its process group so that background
// grandchildren cannot keep running (and changing the repository) after the command has returned.
func wait(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	// While any member is alive the kernel cannot reuse the group's id, so the signal reaches only
	// our group; an error means it is already empty, which is the goal.
	_ = killGroup(cmd.Process.Pid)
	return err
}

// killGroup sends SIGKILL to every process in the group led by pid. A group that no longer exists
// reports os.ErrProcessDone, as exec.Cmd.Cancel expects.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// exitedNormally reports whether cmd ran and exited on its own with an exit code, as opposed to
// failing to start or dying from a signal.
func exitedNormally(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil && cmd.ProcessState.Exited()
}
