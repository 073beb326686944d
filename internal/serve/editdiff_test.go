package serve

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/workorder"
)

// An edit proposal is shown as the diff it makes to the baseline's file;
// edits that do not apply, or a baseline that cannot be read, show the
// old texts against the new ones, with a note saying why.
func TestEditDiff(t *testing.T) {
	dir := t.TempDir()
	base := "package a\n\nfunc A() int { return 1 }\n\nfunc B() int { return 2 }\n"
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ctx := context.Background()
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := workorder.FileEdit{Path: "a.go", BaseSHA256: strings.Repeat("a", 64), Replace: []workorder.Replacement{{Old: "return 2", New: "return 3"}}}
	bad := workorder.FileEdit{Path: "a.go", BaseSHA256: good.BaseSHA256, Replace: []workorder.Replacement{{Old: "return", New: "give"}}}
	for _, tc := range []struct {
		name     string
		git      *gitws.Repo
		e        workorder.FileEdit
		note     string
		has, not []string
	}{
		{"applies", repo, good, "changed by 1 edit(s)", []string{"return 3", "return 2", "return 1"}, nil},
		{"does not apply", repo, bad, "they do not apply to the baseline", []string{"give"}, []string{"package a"}},
		{"no repository", nil, good, "base content not available", []string{"return 3"}, []string{"return 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := editDiff(ctx, tc.git, head, tc.e)
			if !strings.Contains(d.Note, tc.note) {
				t.Errorf("note %q, want it to contain %q", d.Note, tc.note)
			}
			text := diffText(d)
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("diff lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(text, s) {
					t.Errorf("diff has %q:\n%s", s, text)
				}
			}
		})
	}
}

// diffText is d's lines as text, one per line.
func diffText(d DiffFile) string {
	var b strings.Builder
	for _, l := range d.Lines {
		b.WriteString(l.Kind + l.Text + "\n")
	}
	return b.String()
}
