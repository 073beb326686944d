package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/proc"
)

// The init runs in package initproc's initializer, before the initializers of the packages it does not
// need: a confined command must not pay for the rest of the binary. This test binary links "testing",
// whose initializer (it has one: inittrace lists it) the init has no use for, and regexp/syntax, which
// has one too; neither may run in the init. The runtime reports each initializer it runs under
// GODEBUG=inittrace=1, on the init's stderr, before the command takes the process over.
func TestInitRunsBeforeOtherInitializers(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	log := filepath.Join(t.TempDir(), "err.txt")
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"true"}, Dir: f.repo, Stderr: log,
		Env: []string{"PATH=" + os.Getenv("PATH"), "GODEBUG=inittrace=1"}, Timeout: time.Minute, Sandbox: p})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d (%s)", res.ExitCode, res.Err)
	}
	out, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var inits []string
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "init" {
			inits = append(inits, fields[1])
		}
	}
	if len(inits) == 0 {
		t.Fatalf("no initializer reported; stderr:\n%s", out)
	}
	t.Logf("initializers run by the init: %v", inits)
	for _, pkg := range []string{"testing", "regexp/syntax"} {
		if slices.Contains(inits, pkg) {
			t.Errorf("the init ran the initializer of %s: %v", pkg, inits)
		}
	}
}
