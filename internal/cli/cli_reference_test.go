package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

var updateCLIReference = flag.Bool("update-cli-reference", false,
	"regenerate the CLI reference in docs/cli/ from the commands")

const cliReferenceDir = "../../docs/cli"

// writeCLIReference writes one markdown page per command of the real
// command tree into dir, as cobra/doc renders it, without the dated
// "auto generated" line, so the pages depend on the commands only.
func writeCLIReference(t *testing.T, dir string) {
	t.Helper()
	root := newRootCmd(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
	// The completion command is added when a command line runs; a user
	// has it, so the reference has it too.
	root.InitDefaultCompletionCmd()
	var disable func(c *cobra.Command)
	disable = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			disable(sub)
		}
	}
	disable(root)
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatalf("generating the CLI reference into %s: %v", dir, err)
	}
}

// markdownFiles returns the *.md files of dir by name, with their content.
func markdownFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestCLIReference: docs/cli/ is exactly what the commands generate, so a
// flag added, renamed or re-described without regenerating fails here.
// Regenerate with
//
//	go test ./internal/cli -run TestCLIReference -update-cli-reference
func TestCLIReference(t *testing.T) {
	gen := t.TempDir()
	writeCLIReference(t, gen)
	want := markdownFiles(t, gen)
	if len(want) == 0 {
		t.Fatal("cobra/doc generated no pages")
	}
	if *updateCLIReference {
		if err := os.MkdirAll(cliReferenceDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range markdownFiles(t, cliReferenceDir) {
			if _, ok := want[name]; !ok {
				if err := os.Remove(filepath.Join(cliReferenceDir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(cliReferenceDir, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got := markdownFiles(t, cliReferenceDir)
	var stale []string
	for name, content := range want {
		switch old, ok := got[name]; {
		case !ok:
			stale = append(stale, name+" (missing)")
		case !bytes.Equal(old, content):
			stale = append(stale, name+" (differs)")
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			stale = append(stale, name+" (no such command)")
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		t.Errorf("docs/cli/ is stale: %s\nregenerate with: go test ./internal/cli -run TestCLIReference -update-cli-reference",
			strings.Join(stale, ", "))
	}
}
