// Package archtest keeps the package layering honest: side effects live at
// the edges, so the pure packages must not reach processes or the network.
package archtest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, fields := range moduleImports(t) {
		// Test support (llmtest, forgetest, …: imported by tests only,
		// which TestTestSupportOnlyInTests holds) may run the servers
		// tests talk to, such as a real Gitea.
		if strings.HasSuffix(fields[0], "test") {
			continue
		}
		for _, imp := range fields[1:] {
			// proc/sandbox confines the commands proc starts (it rewrites their exec.Cmd).
			if imp == "os/exec" && fields[0] != "github.com/factory-harness/factory/internal/proc" && fields[0] != "github.com/factory-harness/factory/internal/proc/sandbox" {
				t.Errorf("%s imports os/exec; only internal/proc may start processes", fields[0])
			}
		}
	}
}

// Test support packages (a name ending in "test") are imported by tests
// only: what they may do (start servers, reach the network) never reaches
// the binary.
func TestTestSupportOnlyInTests(t *testing.T) {
	for _, fields := range moduleImports(t) {
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/factory-harness/factory/") && strings.HasSuffix(imp, "test") && !strings.HasSuffix(fields[0], "test") {
				t.Errorf("%s imports the test support package %s outside its tests", fields[0], imp)
			}
		}
	}
}

// moduleImports lists each package of the module with the packages its
// non-test files import: the package first.
func moduleImports(t *testing.T) [][]string {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/factory-harness/factory/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgs = append(pkgs, strings.Fields(line))
	}
	// go test caches a result by the files the test itself opened or
	// stat'ed, not those go list read: stat every Go file, so that a
	// changed import runs the test again instead of reusing its result.
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
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
