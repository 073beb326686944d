package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flood writes 64 KiB chunks to file descriptor fd forever.
func flood(fd int) []string {
	return []string{"python3", "-c", "import os\nwhile True: os.write(" + strconv.Itoa(fd) + ", b'x'*65536)"}
}

func TestRunOutputLimit(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	const limit = 1 << 20
	tests := []struct {
		name       string
		argv       []string
		stdout     string // file names in a temporary directory
		stderr     string
		wantErr    string
		wantCapped []string // files truncated to the limit
		wantEmpty  []string // files the command did not write to
	}{
		{"stdout flood", flood(1), "out", "err", "output limit exceeded: stdout passed 1 MiB", []string{"out"}, []string{"err"}},
		{"stderr flood", flood(2), "out", "err", "output limit exceeded: stderr passed 1 MiB", []string{"err"}, []string{"out"}},
		{"flood into one file for both", flood(2), "all", "all", "output limit exceeded: stdout and stderr passed 1 MiB", []string{"all"}, nil},
		// Too quick for the watcher: still limited, so that the result does not depend on timing.
		{"exits before the check", []string{"sh", "-c", "head -c 3000000 /dev/zero"}, "out", "err",
			"output limit exceeded: stdout passed 1 MiB", []string{"out"}, []string{"err"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			res := Run(context.Background(), Spec{
				Argv: tt.argv, Dir: dir, Timeout: 2 * hangLimit, MaxOutputBytes: limit,
				Stdout: filepath.Join(dir, tt.stdout), Stderr: filepath.Join(dir, tt.stderr),
			})
			if elapsed := time.Since(start); elapsed > hangLimit {
				t.Errorf("Run took %v to stop a flood of output", elapsed)
			}
			if res.ExitCode != -1 || !res.OutputLimited || res.TimedOut || res.Err != tt.wantErr {
				t.Errorf("Run = %+v, want exit code -1, OutputLimited and Err %q", res, tt.wantErr)
			}
			for _, name := range tt.wantCapped {
				if size := fileSize(t, filepath.Join(dir, name)); size != limit {
					t.Errorf("%s has %d bytes, want exactly the limit, %d", name, size, limit)
				}
			}
			for _, name := range tt.wantEmpty {
				if size := fileSize(t, filepath.Join(dir, name)); size != 0 {
					t.Errorf("%s has %d bytes, want 0", name, size)
				}
			}
			tail, err := Tail(filepath.Join(dir, tt.wantCapped[0]), 10)
			if err != nil || !strings.HasPrefix(tail, "[... 1048566 bytes truncated ...]\n") {
				t.Errorf("Tail = %q, %v; want the last bytes before the cap", tail, err)
			}
		})
	}
}

func TestRunWithinOutputLimit(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name   string
		script string
		limit  int64
		stdout string // "" discards
	}{
		{"exactly the limit", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2", limit, "out"},
		{"no limit", "head -c 3000000 /dev/zero", 0, "out"},
		{"negative means no limit", "head -c 3000000 /dev/zero", -1, "out"},
		{"discarded output is not limited", "head -c 3000000 /dev/zero", limit, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			stdout := ""
			if tt.stdout != "" {
				stdout = filepath.Join(dir, tt.stdout)
			}
			res := Run(context.Background(), Spec{
				Argv: []string{"sh", "-c", tt.script}, Dir: dir, MaxOutputBytes: tt.limit,
				Stdout: stdout, Stderr: filepath.Join(dir, "err"),
			})
			if res.ExitCode != 0 || res.Err != "" || res.OutputLimited {
				t.Errorf("Run = %+v, want a normal exit with code 0", res)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{DefaultMaxOutputBytes, "50 MiB"},
		{1 << 20, "1 MiB"},
		{3 << 30, "3 GiB"},
		{64 << 10, "64 KiB"},
		{1536 << 10, "1536 KiB"},
		{1500, "1500 bytes"},
		{1, "1 byte"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}
