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
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/version"
)

// Exit codes, one scheme for every command, documented in the README and
// in the root --help.
const (
	ExitPass     = 0 // success (run: PASS, changes left uncommitted)
	ExitFail     = 1 // the work failed: FAIL verdict, invalid plan, validate found errors
	ExitUsage    = 2 // refused before anything was modified: usage, bad input, dirty repo, lock held, journal present
	ExitInternal = 3 // error: provider unreachable or refusing, interrupted, internal, replay mismatch
	ExitStuck    = 4 // stuck: needs a human
	ExitBudget   = 5 // a budget or iteration limit was reached
)

// exitCodesHelp is the exit-code table shown by the root --help.
const exitCodesHelp = `Exit codes (every command):
  0  success (run: PASS; the changes are left uncommitted)
  1  the work failed: FAIL verdict, invalid plan after every attempt, a model
     reply that is not JSON, validate found errors
  2  refused before anything was modified: usage, bad input file, dirty repo,
     lock held by another factory, journal of an interrupted run present
  3  error: provider unreachable or refusing, interrupted, internal error,
     replay mismatch (a run rolls the repo back first)
  4  stuck: needs a human (loop: a leaf exhausted its attempts)
  5  a limit reached: --max-tokens / --max-cost-usd, loop's --max-iterations`

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
	// Terminal reports whether Stderr is a terminal, and its width; nil
	// means it is not.
	Terminal func() (width int, ok bool)
}

// stopSignals end a run early, with a rollback: Ctrl-C, kill, a closed
// terminal or SSH session, and Ctrl-\ (which would otherwise dump goroutines
// and exit 2, the "nothing modified" code, with the repo dirty).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Main runs factory with the process's arguments and environment.
func Main() int {
	// A reader that goes away (factory run ... | head -1) must not kill a
	// run mid-attempt: with SIGPIPE caught, writes to a closed stdout or
	// stderr fail with EPIPE instead, and outputWriter stops printing.
	// Caught, not ignored: an ignored signal would stay ignored in the
	// commands we exec.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	go func() {
		for range pipes {
		}
	}()
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
	return Run(ctx, os.Args[1:], Env{Stdout: &outputWriter{w: os.Stdout}, Stderr: &outputWriter{w: os.Stderr}, Getenv: os.Getenv,
		Terminal: stderrTerminalWidth})
}

// outputWriter passes writes on until one fails, then drops the rest: a
// closed terminal or pipe ends the printing, never the run, and the exit
// code stays the verdict's.
type outputWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.broken {
		if _, err := o.w.Write(p); err != nil {
			o.broken = true
		}
	}
	return len(p), nil
}

// Run executes one command line and returns its exit code.
func Run(ctx context.Context, args []string, env Env) int {
	root := newRootCmd(env)
	root.SetArgs(args)
	_, err := root.ExecuteContextC(ctx)
	return exitCode(err, env.Stderr)
}

// exitError carries a command-specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error, stderr io.Writer) int {
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
		return ExitUsage
	}
}

func newRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "factory",
		Short: "A deterministic, git-safe harness that lets an LLM propose code while the harness decides what counts",
		Long: `factory turns a product spec into working software with LLMs while the harness, never
the model, decides what counts. 'factory build' is the whole job: spec → validated work
orders → each one run against the repository → one commit per work order, resumable.

For each work order a model proposes full-file writes; the harness checks scope, hashes and
paths, writes atomically, runs verification and acceptance commands without a shell (confined
by default), and rolls back with git on failure.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	// Mistyped commands get cobra's "Did you mean this?"; mistyped flags
	// get ours (flagErrorf), which cobra does not offer.
	root.DisableSuggestions = false
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(flagErrorf)
	root.AddCommand(newBuildCmd(env), newStatusCmd(env), newPRCmd(env), newIssueCmd(env), newRunCmd(env), newPlanCmd(env), newValidateCmd(env), newRecoverCmd(env), newLoopCmd(env),
		newEvalCmd(env), newServeCmd(env), newReportCmd(env), newWorkerCmd(env), newCancelCmd(env), newVersionCmd(env), newMCPCmd(env), newMapCmd(env))
	// --version prints what 'factory version' prints.
	root.Version = version.Read().String()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// flagErrorf turns a flag parsing error into a usage error that points at
// the command's help and, for an unknown long flag, at the closest flag the
// command has: "unknown flag: --repoo (did you mean --repo?)".
func flagErrorf(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := suggestFlag(c.Flags(), name); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
	}
	return usagef("%s (see '%s --help')", msg, c.CommandPath())
}

// suggestFlag returns the visible flag of fs closest to name, within an
// edit distance of 2, or "" if there is none. Ties go to the first name in
// alphabetical order.
func suggestFlag(fs *pflag.FlagSet, name string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(f.Name)); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b with adjacent
// transpositions counted as one edit (optimal string alignment), so that
// "sepc" is closer to "spec" than to "repo".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// required is a required flag and its value; an empty value is missing.
type required struct{ name, value string }

// requireFlags refuses a command line that lacks required flags, naming all
// of them at once.
func requireFlags(command string, flags ...required) error {
	var missing []string
	for _, f := range flags {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usagef("%s is required (see 'factory %s --help')", missing[0], command)
	}
	list := strings.Join(missing[:len(missing)-1], ", ") + " and " + missing[len(missing)-1]
	return usagef("%s are required (see 'factory %s --help')", list, command)
}

// aliasFlag adds a hidden flag alias that stands for the flag name of fs,
// of the same type: aliasFlag(fs, "out", "outdir") makes --outdir DIR mean
// --out DIR. resolveAlias applies it after parsing.
func aliasFlag(fs *pflag.FlagSet, name, alias string) {
	f := fs.Lookup(name)
	var v pflag.Value
	switch f.Value.Type() {
	case "bool":
		v = new(boolValue)
	default:
		v = new(stringValue)
	}
	a := fs.VarPF(v, alias, "", "alias of --"+name)
	if f.Value.Type() == "bool" {
		a.NoOptDefVal = "true"
	}
	a.Hidden = true
}

// resolveAlias copies a given alias flag to its flag; giving both with
// different values is a usage error.
func resolveAlias(fs *pflag.FlagSet, name, alias string) error {
	a := fs.Lookup(alias)
	if !a.Changed {
		return nil
	}
	f := fs.Lookup(name)
	if f.Changed && f.Value.String() != a.Value.String() {
		return usagef("--%s and --%s are the same flag; they were given different values (%q and %q)", name, alias, f.Value.String(), a.Value.String())
	}
	if err := fs.Set(name, a.Value.String()); err != nil {
		return usagef("--%s: %v", alias, err)
	}
	return nil
}

// stringValue and boolValue hold the value of an alias flag.
type stringValue string

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (s *stringValue) Type() string       { return "string" }

type boolValue bool

func (b *boolValue) String() string { return strconv.FormatBool(bool(*b)) }
func (b *boolValue) Set(v string) error {
	x, err := strconv.ParseBool(v)
	*b = boolValue(x)
	return err
}
func (b *boolValue) Type() string     { return "bool" }
func (b *boolValue) IsBoolFlag() bool { return true }
