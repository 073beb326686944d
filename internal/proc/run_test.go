package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangLimit only detects hangs; it is far above any duration the tests expect.
const hangLimit = 10 * time.Second

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"success", []string{"true"}, 0},
		{"failure", []string{"sh", "-c", "exit 3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Run(context.Background(), Spec{Argv: tt.argv, Dir: t.TempDir()})
			if res.ExitCode != tt.want || res.Err != "" || res.TimedOut {
				t.Errorf("Run(%q) = %+v, want exit code %d and no error", tt.argv, res, tt.want)
			}
			if res.Duration <= 0 {
				t.Errorf("Run(%q).Duration = %v, want > 0", tt.argv, res.Duration)
			}
		})
	}
}

func TestRunOutputFiles(t *testing.T) {
	const script = "echo out; echo err >&2"
	tests := []struct {
		name       string
		stdout     string // file names in a temporary directory; "" discards
		stderr     string
		wantStdout string
		wantStderr string
	}{
		{"separate files", "out.txt", "err.txt", "out\n", "err\n"},
		{"one file for both", "all.txt", "all.txt", "out\nerr\n", "out\nerr\n"},
		{"stdout discarded", "", "err.txt", "", "err\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := func(name string) string {
				if name == "" {
					return ""
				}
				return filepath.Join(dir, name)
			}
			// Old content must be truncated.
			for _, name := range []string{tt.stdout, tt.stderr} {
				if name != "" {
					writeFile(t, path(name), strings.Repeat("stale\n", 100), 0o644)
				}
			}
			res := Run(context.Background(), Spec{
				Argv: []string{"sh", "-c", script}, Dir: dir, Stdout: path(tt.stdout), Stderr: path(tt.stderr),
			})
			if res.ExitCode != 0 || res.Err != "" {
				t.Fatalf("Run: %+v", res)
			}
			if tt.stdout != "" {
				if got := readFile(t, path(tt.stdout)); got != tt.wantStdout {
					t.Errorf("stdout file = %q, want %q", got, tt.wantStdout)
				}
			}
			if got := readFile(t, path(tt.stderr)); got != tt.wantStderr {
				t.Errorf("stderr file = %q, want %q", got, tt.wantStderr)
			}
		})
	}
}

func TestRunCannotStart(t *testing.T) {
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "script.sh")
	writeFile(t, notExecutable, "#!/bin/sh\necho hi\n", 0o644)
	tests := []struct {
		name    string
		spec    Spec
		wantErr string
	}{
		{"missing binary", Spec{Argv: []string{"factory-proc-no-such-program"}},
			`exec: "factory-proc-no-such-program": executable file not found in $PATH`},
		{"not executable", Spec{Argv: []string{notExecutable}}, "permission denied"},
		{"missing directory", Spec{Argv: []string{"true"}, Dir: filepath.Join(dir, "missing")}, "no such file or directory"},
		{"empty argv", Spec{}, "argv is empty"},
		{"stdout file in a missing directory", Spec{Argv: []string{"true"}, Stdout: filepath.Join(dir, "missing", "out")},
			"cannot create stdout file"},
		{"missing stdin file", Spec{Argv: []string{"true"}, StdinFile: filepath.Join(dir, "missing")}, "cannot open stdin file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Run(context.Background(), tt.spec)
			if res.ExitCode != -1 || !strings.Contains(res.Err, tt.wantErr) || res.TimedOut {
				t.Errorf("Run(%+v) = %+v, want exit code -1 and an error containing %q", tt.spec, res, tt.wantErr)
			}
		})
	}
}

func TestRunStdin(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeFile(t, in, "line 1\nline 2\n", 0o644)
	tests := []struct {
		name      string
		stdinFile string
		want      string
	}{
		{"from a file", in, "line 1\nline 2\n"},
		// cat would wait forever on an inherited terminal or pipe.
		{"default is /dev/null", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res := Run(context.Background(), Spec{Argv: []string{"cat"}, StdinFile: tt.stdinFile, Stdout: out, Timeout: hangLimit})
			if res.ExitCode != 0 || res.Err != "" {
				t.Fatalf("Run(cat) = %+v", res)
			}
			if got := readFile(t, out); got != tt.want {
				t.Errorf("cat read %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunRelativeProgramInDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tool.sh"), "#!/bin/sh\nexit 7\n", 0o755)
	res := Run(context.Background(), Spec{Argv: []string{"./tool.sh"}, Dir: dir})
	if res.ExitCode != 7 || res.Err != "" {
		t.Errorf("Run(./tool.sh) = %+v, want exit code 7", res)
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u:secret@db/x")
	t.Setenv("FACTORY_PROC_TEST_PLAIN", "visible")
	t.Setenv("LANG", "C.UTF-8")
	core, _ := EnvPolicy{}.Environ(os.Environ())
	tests := []struct {
		name string
		env  []string
		want []string // the child's whole environment, in any order
	}{
		{"nil is the core policy", nil, core},
		{"explicit", []string{"FACTORY_PROC_TEST_API_KEY=given"}, []string{"FACTORY_PROC_TEST_API_KEY=given"}},
		{"empty", []string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res := Run(context.Background(), Spec{Argv: []string{"env"}, Env: tt.env, Stdout: out})
			if res.ExitCode != 0 {
				t.Fatalf("Run(env): %+v", res)
			}
			got := strings.Split(strings.TrimSuffix(readFile(t, out), "\n"), "\n") // no value here has a newline
			if got[0] == "" {
				got = nil
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("child environment = %q, want %q", got, want)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	tests := []struct {
		name   string
		script string // writes the pid of a background grandchild to the file "pid", if it starts one
	}{
		{"child sleeps", "exec sleep 30"},
		{"grandchild holds stdout", "sleep 30 & echo $! > pid; sleep 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			res := Run(context.Background(), Spec{
				Argv: []string{"bash", "-c", tt.script}, Dir: dir, Timeout: 300 * time.Millisecond,
				Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"),
			})
			if elapsed := time.Since(start); elapsed > hangLimit {
				t.Fatalf("Run took %v despite a 300ms timeout", elapsed)
			}
			if res.ExitCode != -1 || !res.TimedOut || res.Err != "timed out after 300ms" {
				t.Errorf("Run = %+v, want exit code -1, TimedOut and Err \"timed out after 300ms\"", res)
			}
			checkGrandchildKilled(t, dir)
		})
	}
}

func TestRunKillsBackgroundGrandchild(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	start := time.Now()
	res := Run(context.Background(), Spec{
		Argv: []string{"bash", "-c", "sleep 30 & echo $! > pid; echo hi"}, Dir: dir, Stdout: out,
	})
	if elapsed := time.Since(start); elapsed > hangLimit {
		t.Fatalf("Run took %v: the grandchild holding stdout delayed it", elapsed)
	}
	if res.ExitCode != 0 || res.Err != "" {
		t.Fatalf("Run = %+v, want a normal exit with code 0", res)
	}
	if got := readFile(t, out); got != "hi\n" {
		t.Errorf("stdout = %q, want %q", got, "hi\n")
	}
	checkGrandchildKilled(t, dir)
}

func TestRunCanceled(t *testing.T) {
	tests := []struct {
		name        string
		cancelAfter time.Duration // negative: canceled before Run starts
	}{
		{"while running", 200 * time.Millisecond},
		{"before start", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelAfter < 0 {
				cancel()
			} else {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			res := Run(ctx, Spec{Argv: []string{"sleep", "30"}, Timeout: time.Minute})
			if res.ExitCode != -1 || res.Err != "canceled" || res.TimedOut {
				t.Errorf("Run = %+v, want exit code -1 and Err \"canceled\"", res)
			}
			if res.Duration > hangLimit {
				t.Errorf("Run took %v after cancellation", res.Duration)
			}
		})
	}
}

func TestRunKilledBySignal(t *testing.T) {
	res := Run(context.Background(), Spec{Argv: []string{"sh", "-c", "kill -KILL $$"}})
	if res.ExitCode != -1 || res.Err != "killed by signal: killed" || res.TimedOut {
		t.Errorf("Run = %+v, want exit code -1 and Err \"killed by signal: killed\"", res)
	}
}

func TestOutput(t *testing.T) {
	dir := t.TempDir()
	got, err := Output(context.Background(), dir, []string{"sh", "-c", "pwd; echo noise >&2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != realDir+"\n" {
		t.Errorf("Output = %q, want %q", got, realDir+"\n")
	}
}

func TestOutputInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"input", []byte("a\nb\n"), "2\n"},
		{"nil is /dev/null", nil, "0\n"},
		{"empty", []byte{}, "0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OutputInput(context.Background(), t.TempDir(), []string{"sh", "-c", "wc -l | tr -d ' '"}, nil, tc.input)
			if err != nil || string(got) != tc.want {
				t.Errorf("OutputInput = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestOutputFailures(t *testing.T) {
	dir := t.TempDir()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		argv       []string
		wantOut    string
		wantCode   int
		wantStderr string
		wantIs     error  // an error wrapped by the RunError
		wantMsg    string // the whole message; "" skips the check
	}{
		{
			name: "exit status", ctx: context.Background(),
			argv:    []string{"sh", "-c", "echo partial; echo 'fatal: bad' >&2; exit 128"},
			wantOut: "partial\n", wantCode: 128, wantStderr: "fatal: bad\n",
			wantMsg: "sh -c echo partial; echo 'fatal: bad' >&2; exit 128 (in " + dir + "): exit status 128: fatal: bad",
		},
		{
			name: "missing binary", ctx: context.Background(),
			argv: []string{"factory-proc-no-such-program"}, wantCode: -1, wantIs: exec.ErrNotFound,
		},
		{
			name: "canceled", ctx: canceled,
			argv: []string{"sleep", "30"}, wantCode: -1, wantIs: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Output(tt.ctx, dir, tt.argv, nil)
			var runErr *RunError
			if !errors.As(err, &runErr) {
				t.Fatalf("Output(%q) error = %v, want a *RunError", tt.argv, err)
			}
			if string(out) != tt.wantOut || runErr.ExitCode != tt.wantCode || runErr.Stderr != tt.wantStderr {
				t.Errorf("Output(%q) = %q, %+v; want stdout %q, exit code %d, stderr %q",
					tt.argv, out, runErr, tt.wantOut, tt.wantCode, tt.wantStderr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Output(%q) error = %v, want it to wrap %v", tt.argv, err, tt.wantIs)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("Output(%q) error = %q, want %q", tt.argv, err, tt.wantMsg)
			}
		})
	}
}

func TestOutputKeepsStderrTail(t *testing.T) {
	_, err := Output(context.Background(), "", []string{"sh", "-c", "head -c 10000 /dev/zero | tr '\\0' x >&2; echo END >&2; exit 1"}, nil)
	var runErr *RunError
	if !errors.As(err, &runErr) {
		t.Fatalf("Output error = %v, want a *RunError", err)
	}
	want := "[... 5908 bytes truncated ...]\n" + strings.Repeat("x", maxStderr-4) + "END\n"
	if runErr.Stderr != want {
		t.Errorf("RunError.Stderr = %q..., want %q...", runErr.Stderr[:40], want[:40])
	}
}

func TestOutputKillsBackgroundGrandchild(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	got, err := Output(context.Background(), dir, []string{"bash", "-c", "sleep 30 & echo $! > pid; echo hi"}, nil)
	if elapsed := time.Since(start); elapsed > hangLimit {
		t.Fatalf("Output took %v: the grandchild holding stdout delayed it", elapsed)
	}
	if err != nil || string(got) != "hi\n" {
		t.Fatalf("Output = %q, %v; want \"hi\\n\"", got, err)
	}
	checkGrandchildKilled(t, dir)
}

// checkGrandchildKilled fails unless the process whose pid a test script wrote to dir/pid is gone.
// A killed process may linger as a zombie until init reaps it; that counts as gone.
func checkGrandchildKilled(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if errors.Is(err, os.ErrNotExist) {
		return // this script started no grandchild
	}
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	for deadline := time.Now().Add(hangLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// The state follows the parenthesized command name.
		if err == nil && strings.HasPrefix(string(stat[strings.LastIndexByte(string(stat), ')')+1:]), " Z") {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("grandchild %d still runs after the command returned", pid)
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
