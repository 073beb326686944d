package factory

import (
	"os"
	"testing"

	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// TestMain lets the test binary serve as the sandbox's init, so that the
// commands of these runs are confined as factory's are.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}
