package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunTermGrace: a timeout sends SIGTERM first; a command that traps it
// and exits 0 still counts as timed out, and one that ignores it is killed
// after the grace period.
func TestRunTermGrace(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	res := Run(context.Background(), Spec{
		Argv: []string{"sh", "-c", `trap 'echo term; exit 0' TERM; while :; do sleep 0.05; done`},
		Dir:  dir, Stdout: log, Timeout: 200 * time.Millisecond, TermGrace: 5 * time.Second,
	})
	if data, _ := os.ReadFile(log); !res.TimedOut || !strings.Contains(string(data), "term") {
		t.Fatalf("trapping command: %+v, output %q", res, data)
	}
	start := time.Now()
	res = Run(context.Background(), Spec{
		Argv: []string{"sh", "-c", `trap '' TERM; while :; do sleep 0.05; done`},
		Dir:  dir, Timeout: 100 * time.Millisecond, TermGrace: 300 * time.Millisecond,
	})
	if !res.TimedOut || time.Since(start) > hangLimit {
		t.Fatalf("ignoring command: %+v after %v", res, time.Since(start))
	}
}
