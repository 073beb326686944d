package planner

import (
	"fmt"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name, tmpl, spec string
		repo             []string
		want             string
	}{
		{"spec only", "Spec:\n{{PRODUCT_SPEC}}\nEnd", "  build calc \n", nil, "Spec:\nbuild calc\nEnd"},
		{"empty repository", "{{REPO_FILES}}|{{PRODUCT_SPEC}}", "s", nil, "The repository is empty: WO-01 starts from nothing.|s"},
		{"empty list is empty repository", "{{REPO_FILES}}", "s", []string{}, "The repository is empty: WO-01 starts from nothing."},
		{"files sorted", "{{REPO_FILES}}", "s", []string{"b.py", "a/c.py", "README.md"},
			"The repository already tracks these 3 files (they exist before WO-01):\n- README.md\n- a/c.py\n- b.py\n"},
		{"every occurrence", "{{REPO_FILES}}{{REPO_FILES}}{{PRODUCT_SPEC}}", "s", []string{"a.py"},
			strings.Repeat("The repository already tracks these 1 files (they exist before WO-01):\n- a.py\n", 2) + "s"},
		// One pass: placeholders inside the substituted text stay literal.
		{"spec mentions a placeholder", "{{PRODUCT_SPEC}} / {{REPO_FILES}}", "list {{REPO_FILES}} and {{PRODUCT_SPEC}}", nil,
			"list {{REPO_FILES}} and {{PRODUCT_SPEC}} / The repository is empty: WO-01 starts from nothing."},
		{"file named like a placeholder", "{{REPO_FILES}}{{PRODUCT_SPEC}}", "s", []string{"{{PRODUCT_SPEC}}"},
			"The repository already tracks these 1 files (they exist before WO-01):\n- {{PRODUCT_SPEC}}\ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Render(tc.tmpl, tc.spec, tc.repo, ""); got != tc.want {
				t.Fatalf("Render:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRenderCapsTheFileList(t *testing.T) {
	var files []string
	for i := range 305 {
		files = append(files, fmt.Sprintf("f%03d.py", i))
	}
	got := Render("{{REPO_FILES}}", "s", files, "")
	if !strings.HasPrefix(got, "The repository already tracks these 305 files") || !strings.HasSuffix(got, "- f299.py\n- … and 5 more\n") {
		t.Fatalf("Render = …%q", got[len(got)-60:])
	}
}

// Beyond the limit the list counts files per directory, two levels deep,
// after the top-level files.
func TestRenderSummarizesHugeTrees(t *testing.T) {
	files := []string{"go.mod", "README.md"}
	for i := range 400 {
		files = append(files, fmt.Sprintf("pkg/p%d/f%03d.go", i%3, i), fmt.Sprintf("cmd/m%03d.go", i))
	}
	got := Render("{{REPO_FILES}}", "s", files, "")
	want := "The repository already tracks these 802 files (they exist before WO-01):\n" +
		"(too many to list: the files at the top level, then how many files each directory holds, two levels deep)\n" +
		"- README.md\n- go.mod\n- cmd/ (400 files)\n- pkg/p0/ (134 files)\n- pkg/p1/ (133 files)\n- pkg/p2/ (133 files)\n"
	if got != want {
		t.Fatalf("Render:\n got %q\nwant %q", got, want)
	}
}

// The map follows the file list, under a heading; no map leaves no trace,
// so a prompt without one keeps its bytes.
func TestRenderRepoMap(t *testing.T) {
	for _, tc := range []struct{ name, repoMap, want string }{
		{"none", "", "The repository is empty: WO-01 starts from nothing.\nB"},
		{"a map", "Repository map: 1 of 1\n\nx.go\n    1: func F()\n",
			"The repository is empty: WO-01 starts from nothing.\n\n# The code already in the repository\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render("{{REPO_FILES}}\nB", "s", nil, tc.repoMap)
			if !strings.HasPrefix(got, tc.want) || tc.repoMap != "" && !strings.HasSuffix(got, "    1: func F()\nB") {
				t.Fatalf("Render = %q", got)
			}
		})
	}
	if !strings.Contains(reviewerTemplate, "{{PRODUCT_SPEC}}{{REPO_MAP}}") {
		t.Error("the reviewer template does not place the map")
	}
}

func TestRenderDoesNotChangeTheCaller(t *testing.T) {
	files := []string{"b.py", "a.py"}
	Render("{{REPO_FILES}}{{PRODUCT_SPEC}}", "s", files, "")
	if files[0] != "b.py" {
		t.Fatalf("Render sorted the caller's slice: %q", files)
	}
}

// TestCompileHashKnownValues pins CompileHash to
// sha256(spec + template + model + reasoning_effort)[:16]. The expected
// values were computed with the shell:
//
//	printf '%s' 'a specmy template {{PRODUCT_SPEC}}gpt-5.2-codexmedium' | sha256sum
//	printf '%s' 'spec
//	with éT {{PRODUCT_SPEC}}m' | sha256sum
func TestCompileHashKnownValues(t *testing.T) {
	for _, tc := range []struct{ spec, tmpl, model, effort, want string }{
		{"a spec", "my template {{PRODUCT_SPEC}}", "gpt-5.2-codex", "medium", "ac5f489804c27d55"},
		{"spec\nwith é", "T {{PRODUCT_SPEC}}", "m", "", "8b733763f3075fc5"},
	} {
		if got := CompileHash(tc.spec, tc.tmpl, tc.model, tc.effort); got != tc.want {
			t.Errorf("CompileHash(%q, %q, %q, %q) = %s, want %s", tc.spec, tc.tmpl, tc.model, tc.effort, got, tc.want)
		}
	}
}
