package cli

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain makes the test binary double as the real `factory` binary (on
// PATH for scripts and for the end-to-end tests), so tests drive the CLI as a
// user does: a separate process, real exit codes and real signals.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"factory": func() { os.Exit(Main()) },
	})
}
