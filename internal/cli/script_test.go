package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the command-line behaviour scripts in testdata/script:
// help, usage errors, work order validation and preflight refusals. The
// `factory` program on PATH is this test binary (see TestMain).
//
// Commands available to scripts besides testscript's built-ins:
//
//	exitcode N program [args...]
//	    run program like exec and require exit status N (0 included); its
//	    stdout and stderr are then checked with the stdout and stderr commands.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams())
}

func scriptParams() testscript.Params {
	return testscript.Params{
		Dir:                 "testdata/script",
		Setup:               setupScript,
		Cmds:                scriptCmds(),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
	}
}

func scriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"exitcode": cmdExitcode,
	}
}

// setupScript pins git (identity, dates, no system or global config) so
// repositories are reproducible and the machine's configuration cannot
// interfere, and points the model client at a closed port: every script here
// must fail before a model call, or fail on the connection, never reach a
// server.
func setupScript(env *testscript.Env) error {
	home := filepath.Join(env.WorkDir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	// testscript starts from an empty environment; PATH must carry the
	// directory where TestMain installed `factory`, and git.
	env.Setenv("PATH", os.Getenv("PATH"))
	for _, kv := range [][2]string{
		{"HOME", home},
		{"GIT_CONFIG_NOSYSTEM", "1"},
		{"GIT_CONFIG_GLOBAL", os.DevNull},
		{"GIT_AUTHOR_NAME", "Factory Test"},
		{"GIT_AUTHOR_EMAIL", "test@factory.invalid"},
		{"GIT_COMMITTER_NAME", "Factory Test"},
		{"GIT_COMMITTER_EMAIL", "test@factory.invalid"},
		{"GIT_AUTHOR_DATE", "2001-01-01T00:00:00Z"},
		{"GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z"},
		{"OPENAI_API_KEY", "test-key"},
		// Port 9 (discard) is closed: a stray model call fails fast instead
		// of reaching a real server.
		{"OPENAI_BASE_URL", "http://127.0.0.1:9/v1"},
	} {
		env.Setenv(kv[0], kv[1])
	}
	return nil
}

// cmdExitcode implements `exitcode N program [args...]`. Exit codes of
// factory are documented API, and testscript's exec only tells success from
// failure.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode (state the expected code instead)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil || want < 0 {
		ts.Fatalf("exitcode: %q is not an exit status", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			ts.Fatalf("exitcode: %s did not run to completion: %v", args[1], err)
		}
		if got = exitErr.ExitCode(); got < 0 {
			ts.Fatalf("exitcode: %s was killed: %v", args[1], err)
		}
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// TestExitcodeCommand checks the checker: a script whose exitcode
// expectation is wrong must fail, naming both codes.
func TestExitcodeCommand(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		fail         bool
		log          string
	}{
		{"match", "exitcode 2 factory run\nstderr '--repo, --work-order, --out and --llm-model are required'\n", false, ""},
		{"match zero", "exitcode 0 factory --help\n", false, ""},
		{"mismatch", "exitcode 0 factory run\n", true, "factory exited with status 2, want 0"},
		{"mismatch nonzero", "exitcode 1 factory bogus-subcommand\n", true, "factory exited with status 2, want 1"},
		{"negated", "! exitcode 2 factory run\n", true, "unsupported: ! exitcode"},
		{"missing program", "exitcode 0 no-such-program-here\n", true, "did not run to completion"},
		{"bad code", "exitcode x factory\n", true, `"x" is not an exit status`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.txtar")
			if err := os.WriteFile(file, []byte(tc.script), 0o644); err != nil {
				t.Fatal(err)
			}
			p := scriptParams()
			p.Dir, p.Files = "", []string{file}
			rt := &recordingT{}
			testscript.RunT(rt, p)
			if rt.failed != tc.fail {
				t.Fatalf("script failed = %v, want %v; log:\n%s", rt.failed, tc.fail, rt.log.String())
			}
			if !strings.Contains(rt.log.String(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, rt.log.String())
			}
		})
	}
}

// recordingT is a testscript.T that records a failure instead of failing
// the enclosing test.
type recordingT struct {
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (t *recordingT) Skip(args ...any) { t.Log(args...); runtime.Goexit() }
func (t *recordingT) Fatal(args ...any) {
	t.Log(args...)
	t.FailNow()
}
func (t *recordingT) Parallel() {}
func (t *recordingT) Log(args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(&t.log, args...)
}
func (t *recordingT) FailNow() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	runtime.Goexit()
}
func (t *recordingT) Verbose() bool { return false }

// Run runs f on its own goroutine, so that FailNow can end it.
func (t *recordingT) Run(_ string, f func(testscript.T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(t)
	}()
	<-done
}
