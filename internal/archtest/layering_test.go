// Package archtest keeps the package layering honest: side effects live at
// the edges, so the pure packages must not reach processes or the network.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

func TestPurePackagesHaveNoSideEffectImports(t *testing.T) {
	banned := []string{"os/exec", "net/http", "github.com/factory-harness/factory/internal/proc", "github.com/factory-harness/factory/internal/gitws", "github.com/factory-harness/factory/internal/llm"}
	for _, pkg := range []string{"graph", "workorder", "canon", "loop/tree", "repomap", "edit"} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "github.com/factory-harness/factory/internal/"+pkg).Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			deps := strings.Fields(string(out))
			for _, d := range deps {
				for _, b := range banned {
					if d == b {
						t.Errorf("internal/%s depends on %s", pkg, b)
					}
				}
			}
		})
	}
}

func TestOnlyProcStartsProcesses(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/factory-harness/factory/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			// proc/sandbox confines the commands proc starts (it rewrites their exec.Cmd).
			if imp == "os/exec" && fields[0] != "github.com/factory-harness/factory/internal/proc" && fields[0] != "github.com/factory-harness/factory/internal/proc/sandbox" {
				t.Errorf("%s imports os/exec; only internal/proc may start processes", fields[0])
			}
		}
	}
}

// Nothing imports cli: the MCP server reaches builds through builder and
// planner, and the CLI hands it what only the CLI knows (its flags'
// defaults) as a function.
func TestNothingImportsCLI(t *testing.T) {
	const cli = "github.com/factory-harness/factory/internal/cli"
	out, err := exec.Command("go", "list", "-deps", "github.com/factory-harness/factory/internal/mcp", "github.com/factory-harness/factory/internal/serve").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == cli {
			t.Errorf("internal/mcp or internal/serve depends on %s", cli)
		}
	}
}
