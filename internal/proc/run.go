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
	"sync"
	"syscall"
	"time"

	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// waitDelay is a backstop: how long Wait waits after canceling before it kills the child itself, in case
// killing the group did not take.
const waitDelay = 5 * time.Second

// maxStderr is how much of a failed command's stderr a RunError keeps.
const maxStderr = 4 << 10

// DefaultMaxOutputBytes is a sensible Spec.MaxOutputBytes: far more log than anyone reads, far less
// disk than a runaway print loop fills.
const DefaultMaxOutputBytes = 50 << 20

// outputPoll is how often Run checks the sizes of the output files against Spec.MaxOutputBytes.
const outputPoll = 50 * time.Millisecond

// errTimedOut marks the context that Run's own timeout cancels, to tell it apart from the caller's.
var errTimedOut = errors.New("timed out")

// errOutputLimit marks the context that Run cancels when output passes Spec.MaxOutputBytes.
var errOutputLimit = errors.New("output limit exceeded")

// Spec describes one command for Run.
type Spec struct {
	// Argv is the program and its arguments. A program name without a slash is looked up in Env's
	// PATH when Env sets one (a relative entry is relative to Dir), else in this process's PATH;
	// one with a slash is relative to Dir.
	Argv    []string
	Dir     string        // working directory
	Timeout time.Duration // 0 means no timeout
	Stdout  string        // file path that receives stdout (created/truncated, 0644); "" = discard
	Stderr  string        // same for stderr; the same path as Stdout interleaves both in one file
	Env     []string      // environment; nil means EnvPolicy{}.Environ(os.Environ()): the core variables
	// StdinFile is a file whose content the command reads on stdin; "" means /dev/null. Run opens it
	// (relative to this process's directory, not Dir). A file rather than a pipe, so that no copying
	// goroutine can hold Run up after the command exits.
	StdinFile string
	// MaxOutputBytes caps the size of each output file; 0 (or less) means no cap. While the command
	// runs, the files are checked every 50ms, and once one passes the cap the process group is killed
	// and the file is truncated to the cap. DefaultMaxOutputBytes is a good value.
	MaxOutputBytes int64
	// OnStart, if not nil, is called once the command has started and before Run waits for it, with
	// its process group (its pid, as it leads its own group) and its start time in clock ticks since
	// boot (0 if it could not be read; always 0 off Linux). A caller can journal them, so that after
	// a crash KillGroupIfSame can kill the group without risk of hitting a reused pid. The command
	// runs meanwhile, and its timeout counts.
	OnStart func(pgid int, startTicks uint64)
	// TermGrace, if positive, makes a timeout or cancellation send SIGTERM to the process group first
	// and SIGKILL only after this long, so an agent can stop its own children cleanly.
	TermGrace time.Duration
	// Sandbox confines the command and everything it starts (see package sandbox); nil runs it with
	// this process's privileges. The process started leads the command's process group and ends as
	// the command does (with the namespaces mechanism it is the sandbox's init standing in for the
	// command, which runs under an init of its own PID namespace), so the timeout, exit status,
	// signals, output cap and OnStart work as without.
	Sandbox *sandbox.Policy
	// Port, if not nil, is a gateway port that Sandbox opened for this command (Policy.OpenPort, on
	// the same policy, nil included): the command dials it at Port.Addr() while the sandbox keeps the
	// rest of the network from it (Port.Network says how far), and the caller serves its
	// connections on Port.Listener(), from before Run until after it returns. Run wraps the command
	// with it and, once the command has started, lets the port learn of it, so that Accept fails
	// rather than waits when the sandbox fails before handing the port over. One command per port;
	// the caller closes it.
	Port *sandbox.Port
}

// Result is how a command ended.
type Result struct {
	Argv []string
	// ExitCode is the process exit code; -1 if it could not start, timed out, died by a signal, or
	// exceeded the output limit.
	ExitCode int
	TimedOut bool // killed because Spec.Timeout elapsed
	// OutputLimited reports that an output file passed Spec.MaxOutputBytes and was truncated to it. It
	// is set even if the command exited before the check that would have killed it, so that the result
	// does not depend on timing; ExitCode is then -1 all the same.
	OutputLimited bool
	// Err is "" on a normal exit (any code); otherwise why the command did not exit normally: a start
	// failure, "timed out after 2s", "output limit exceeded: stdout passed 50 MiB", "killed by signal:
	// killed" or "canceled".
	Err      string
	Duration time.Duration
}

// Run starts Argv in Dir and waits. It never returns a Go error: start failures (missing binary,
// permission denied, bad dir) become ExitCode -1 with Err set.
//
// Stdout and stderr go straight to files rather than pipes, so a background grandchild that keeps them
// open cannot delay Run. When the command exits, times out or ctx is canceled, every process left in its
// process group is killed, so nothing it started keeps running; in a process that called
// BecomeSubreaper, so are the orphans it left, such as daemons that escaped the group with setsid.
func Run(ctx context.Context, s Spec) Result {
	start := time.Now()
	res := Result{Argv: s.Argv, ExitCode: -1}
	res.Err = run(ctx, s, &res)
	res.Duration = time.Since(start)
	return res
}

// run does the work of Run, filling in res.ExitCode, res.TimedOut and res.OutputLimited, and returns
// Result.Err.
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
	// The output watcher cancels this to kill the process group, as a timeout does. An output past the
	// limit is reported before any other reason, as the first thing to fix.
	runCtx, limitCancel := context.WithCancelCause(runCtx)
	defer limitCancel(nil)
	env := s.Env
	if env == nil {
		env, _ = EnvPolicy{}.Environ(os.Environ())
	}
	cmd := command(runCtx, s.Dir, s.Argv, env)
	cleanup, err := s.Sandbox.WrapPort(cmd, s.Port)
	if err != nil {
		return err.Error()
	}
	// Deferred first, so it runs last: after the process group and orphans are dead.
	defer cleanup()
	if s.TermGrace > 0 {
		cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
		cmd.WaitDelay = s.TermGrace
	}
	if s.StdinFile != "" {
		stdin, err := os.Open(s.StdinFile)
		if err != nil {
			return fmt.Sprintf("cannot open stdin file: %v", err)
		}
		defer stdin.Close() // read-only, so Close has nothing to report
		cmd.Stdin = stdin
	}

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

	var outputs []output
	if s.MaxOutputBytes > 0 {
		outputs = capped(s, stdout, stderr)
	}
	var over *output // the first output found past the cap, by the watcher or after the command
	watch := func(stop <-chan struct{}) {
		tick := time.NewTicker(outputPoll)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if over = overLimit(outputs, s.MaxOutputBytes); over != nil {
					limitCancel(errOutputLimit) // kills the process group
					return
				}
			}
		}
	}
	if len(outputs) == 0 {
		watch = nil
	}

	onStart := s.OnStart
	if s.Port != nil {
		onStart = func(pgid int, startTicks uint64) {
			s.Port.Started()
			if s.OnStart != nil {
				s.OnStart(pgid, startTicks)
			}
		}
	}
	err = wait(cmd, onStart, watch)
	if over == nil {
		over = overLimit(outputs, s.MaxOutputBytes)
	}
	if over != nil {
		// The command may have written more since the check; the watcher is done, and the process
		// group and orphans are dead, so nothing writes anymore.
		msg := fmt.Sprintf("output limit exceeded: %s passed %s", over.name, formatBytes(s.MaxOutputBytes))
		for _, o := range outputs {
			if err := truncateTo(o.file, s.MaxOutputBytes); err != nil {
				msg += fmt.Sprintf(" (cannot truncate %s: %v)", o.name, err)
			}
		}
		res.OutputLimited = true
		return msg
	}
	switch {
	// A command given TermGrace may exit normally on its SIGTERM; it still timed out or was canceled.
	case s.TermGrace > 0 && context.Cause(runCtx) == errTimedOut:
		res.TimedOut = true
		return "timed out after " + s.Timeout.String()
	case s.TermGrace > 0 && ctx.Err() != nil:
		return "canceled"
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

// output is an output file that Run keeps under Spec.MaxOutputBytes.
type output struct {
	name string // for Result.Err: "stdout", "stderr" or "stdout and stderr"
	file *os.File
}

// capped lists the output files to watch: those not discarded, each once.
func capped(s Spec, stdout, stderr *os.File) []output {
	var outs []output
	switch {
	case s.Stdout != "" && s.Stdout == s.Stderr:
		return []output{{"stdout and stderr", stdout}}
	case s.Stdout != "":
		outs = append(outs, output{"stdout", stdout})
	}
	if s.Stderr != "" {
		outs = append(outs, output{"stderr", stderr})
	}
	return outs
}

// overLimit returns the first output whose file is larger than limit, or nil. A file it cannot stat
// counts as within the limit.
func overLimit(outs []output, limit int64) *output {
	for i := range outs {
		if info, err := outs[i].file.Stat(); err == nil && info.Size() > limit {
			return &outs[i]
		}
	}
	return nil
}

// truncateTo shortens f to size bytes if it is longer. Regular files only: the output path might be a
// device or a FIFO, which cannot be truncated and holds nothing on disk.
func truncateTo(f *os.File, size int64) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Size() <= size {
		return nil
	}
	return f.Truncate(size)
}

// formatBytes renders n for a message: "50 MiB", "64 KiB", "1 GiB", or "1500 bytes" when n is not a
// whole number of a binary unit.
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
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
	return OutputInput(ctx, dir, argv, env, nil)
}

// OutputInput is Output with input on the command's stdin (nil means
// /dev/null), given through a file as stdout is, so that no copying
// goroutine outlives the command.
func OutputInput(ctx context.Context, dir string, argv []string, env []string, input []byte) ([]byte, error) {
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
	if input != nil {
		stdin, err := scratchFile()
		if err != nil {
			return nil, fail(err)
		}
		defer stdin.Close()
		if _, err := stdin.Write(input); err != nil {
			return nil, fail(fmt.Errorf("cannot write stdin: %w", err))
		}
		if _, err := stdin.Seek(0, io.SeekStart); err != nil {
			return nil, fail(fmt.Errorf("cannot rewind stdin: %w", err))
		}
		cmd.Stdin = stdin
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	runErr := wait(cmd, nil, nil)
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
// Canceling ctx kills the whole group; on Linux the command is killed when factory dies.
func command(ctx context.Context, dir string, argv, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if path, ok := envPath(env); ok && !strings.Contains(argv[0], "/") {
		// The command's own PATH (a virtual environment's bin first): exec.Command looked in ours.
		if found, err := lookPathIn(argv[0], path, dir); err == nil {
			cmd.Path, cmd.Err = found, nil
		}
	}
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeath(cmd.SysProcAttr)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// wait starts cmd and waits for it, then kills whatever is left of its process group so that background
// grandchildren cannot keep running (and changing the repository) after the command has returned, and
// then, in a subreaper, the orphans that escaped the group. If onStart is not nil, it is called once
// the command has started. If watch is not nil, it runs while the command does, until stop is closed.
func wait(cmd *exec.Cmd, onStart func(pgid int, startTicks uint64), watch func(stop <-chan struct{})) error {
	start, err := startTracked(cmd)
	if err != nil {
		return err
	}
	var watcher sync.WaitGroup
	stop := make(chan struct{})
	if watch != nil {
		watcher.Go(func() { watch(stop) })
	}
	if onStart != nil {
		onStart(cmd.Process.Pid, start)
	}
	err = cmd.Wait()
	close(stop)
	watcher.Wait()
	// While any member is alive the kernel cannot reuse the group's id, so the signal reaches only
	// our group; an error means it is already empty, which is the goal.
	_ = killGroup(cmd.Process.Pid)
	untrack(cmd.Process.Pid)
	reapOrphans()
	return err
}

// killGroup sends SIGKILL to every process in the group led by pid. A group that no longer exists
// reports os.ErrProcessDone, as exec.Cmd.Cancel expects.
func killGroup(pid int) error { return signalGroup(pid, syscall.SIGKILL) }

// signalGroup sends sig to every process in the group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
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
