package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A program name is looked up in the command's own PATH when its
// environment sets one (a virtual environment's bin first), relative
// entries against the command's directory; else in this process's PATH.
func TestRunLooksUpArgv0InTheCommandsPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, ".venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "greet-factory-test"), []byte("#!/bin/sh\necho venv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
	}{
		{"absolute entry", bin + ":" + os.Getenv("PATH")},
		{"relative entry", ".venv/bin:" + os.Getenv("PATH")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res := Run(context.Background(), Spec{Argv: []string{"greet-factory-test"}, Dir: dir, Stdout: out,
				Env: []string{"PATH=" + tc.path}})
			got, _ := os.ReadFile(out)
			if res.ExitCode != 0 || strings.TrimSpace(string(got)) != "venv" {
				t.Fatalf("exit %d (%s), output %q; want the program found in the command's PATH", res.ExitCode, res.Err, got)
			}
		})
	}
	res := Run(context.Background(), Spec{Argv: []string{"greet-factory-test"}, Dir: dir, Env: []string{"PATH=/nonexistent"}})
	if res.ExitCode == 0 {
		t.Errorf("found a program on no PATH")
	}
}
