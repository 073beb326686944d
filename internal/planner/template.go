package planner

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
)

// DefaultTemplate is the planner prompt; a custom one may replace it.
//
//go:embed templates/planner.md
var DefaultTemplate string

//go:embed templates/reviewer.md
var reviewerTemplate string

// Placeholders a template may use. {{PRODUCT_SPEC}} is required.
const (
	PlaceholderSpec      = "{{PRODUCT_SPEC}}"
	PlaceholderRepoFiles = "{{REPO_FILES}}"
)

// CheckTemplate reports a template that cannot produce a planner prompt.
func CheckTemplate(tmpl string) error {
	if !strings.Contains(tmpl, PlaceholderSpec) {
		return fmt.Errorf("the template has no %s placeholder, so the model would never see the specification", PlaceholderSpec)
	}
	return nil
}

// Render fills a template. Substitution is literal and in one pass, so a
// specification that happens to contain "{{REPO_FILES}}" stays as written.
func Render(tmpl, spec string, repoFiles []string) string {
	return strings.NewReplacer(
		PlaceholderSpec, strings.TrimSpace(spec),
		PlaceholderRepoFiles, describeFiles(repoFiles),
	).Replace(tmpl)
}

func describeFiles(files []string) string {
	if len(files) == 0 {
		return "The repository is empty: WO-01 starts from nothing."
	}
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	const limit = 300
	var b strings.Builder
	fmt.Fprintf(&b, "The repository already tracks these %d files (they exist before WO-01):\n", len(sorted))
	for i, f := range sorted {
		if i == limit {
			fmt.Fprintf(&b, "- … and %d more\n", len(sorted)-limit)
			break
		}
		fmt.Fprintf(&b, "- %s\n", f)
	}
	return b.String()
}
