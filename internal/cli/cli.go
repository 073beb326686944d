// Package cli wires subcommands and flags to options structs and maps every
// outcome to an exit code in one place.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/proc"
)

// Exit codes of `factory run`, documented in the README.
const (
	ExitPass     = 0 // the work order passed; changes are left uncommitted
	ExitFail     = 1 // the work order failed; the repo was rolled back
	ExitUsage    = 2 // bad flags, invalid work order or failed preflight; nothing was modified
	ExitInternal = 3 // interrupted, internal error or replay mismatch; the repo was rolled back
)

// usageError is a mistake in how factory was invoked.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// internalError is a failure of the harness itself, not of the invocation.
type internalError struct{ err error }

func (e *internalError) Error() string { return e.err.Error() }
func (e *internalError) Unwrap() error { return e.err }

// failError reports a FAIL verdict after it has been printed.
type failError struct{}

func (failError) Error() string { return "work order failed" }

// Env is the process environment a command sees; tests substitute it.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// stopSignals end a run early, with a rollback: Ctrl-C, kill, a closed
// terminal or SSH session, and Ctrl-\ (which would otherwise dump goroutines
// and exit 2, the "nothing modified" code, with the repo dirty).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Main runs factory with the process's arguments and environment.
func Main() int {
	// Orphans of the commands we run are re-parented to us, so they can be
	// killed when their command ends, even after setsid. Linux only; where
	// it is unsupported, process-group kills are all there is.
	_ = proc.BecomeSubreaper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	go func() {
		if sig, ok := <-sigs; ok {
			cancel(fmt.Errorf("interrupted by %v", sig))
		}
	}()
	return Run(ctx, os.Args[1:], Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
}

// Run executes one command line and returns its exit code.
func Run(ctx context.Context, args []string, env Env) int {
	root := newRootCmd(env)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(cmd, err, env.Stderr)
}

// usageExitAnnotation lets a command give usage mistakes its own exit code:
// `factory plan` keeps the seeds' codes, where 2 means an invalid plan.
const usageExitAnnotation = "usage-exit-code"

// exitError carries a command-specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(cmd *cobra.Command, err error, stderr io.Writer) int {
	var internal *internalError
	var coded *exitError
	switch {
	case err == nil:
		return ExitPass
	case errors.As(err, &failError{}):
		return ExitFail
	case errors.As(err, &coded):
		fmt.Fprintf(stderr, "factory: %v\n", err)
		return coded.code
	case errors.As(err, &internal):
		fmt.Fprintf(stderr, "factory: %v\n", err)
		return ExitInternal
	default:
		// Usage mistakes, preflight refusals and cobra's own argument errors.
		fmt.Fprintf(stderr, "factory: %v\n", err)
		if code, ok := cmd.Annotations[usageExitAnnotation]; cmd != nil && ok {
			n, _ := strconv.Atoi(code)
			return n
		}
		return ExitUsage
	}
}

func newRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "factory",
		Short: "A deterministic, git-safe harness that lets an LLM propose code while the harness decides what counts",
		Long: `factory runs work orders against a git repository. A model proposes full-file writes;
the harness checks scope, hashes and paths, writes atomically, runs verification and
acceptance commands without a shell, and rolls back with git on failure.

Exit codes of 'factory run': 0 PASS, 1 FAIL, 2 usage or preflight error (nothing
modified), 3 interrupted, internal error or replay mismatch (repo rolled back).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(env), newPlanCmd(env), newValidateCmd(env))
	return root
}
