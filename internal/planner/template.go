package planner

import (
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/factory-harness/factory/internal/lang"
)

// DefaultTemplate is the planner prompt; a custom one may replace it.
//
//go:embed templates/planner.md
var DefaultTemplate string

//go:embed templates/reviewer.md
var reviewerTemplate string

// Placeholders a template may use. {{PRODUCT_SPEC}} is required. The
// language placeholders are filled from the languages detected in the
// repository's files (lang.DetectFiles; Python when it has none), so the
// prompt's verification, examples and acceptance commands are the
// repository's own.
const (
	PlaceholderSpec      = "{{PRODUCT_SPEC}}"
	PlaceholderRepoFiles = "{{REPO_FILES}}"

	PlaceholderVerificationStep = "{{VERIFICATION_STEP}}" // how global verification runs, as step 4 of a list
	PlaceholderCommandExample   = "{{COMMAND_EXAMPLE}}"   // one acceptance command, in backquotes
	PlaceholderScriptExample    = "{{SCRIPT_EXAMPLE}}"    // a script run through its interpreter, in backquotes
	PlaceholderVerification     = "{{VERIFICATION}}"      // a section (with heading): verification and tests
	PlaceholderAcceptanceRules  = "{{ACCEPTANCE_RULES}}"  // bullets: how acceptance commands look
	PlaceholderForbiddenExample = "{{FORBIDDEN_EXAMPLE}}" // what a work order typically must not touch
	PlaceholderPlanExample      = "{{PLAN_EXAMPLE}}"      // a plan with one work order, as JSON
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
	t := lang.DetectFiles(repoFiles).PlannerText(slices.Contains(repoFiles, "scripts/verify.sh"))
	return strings.NewReplacer(
		PlaceholderSpec, strings.TrimSpace(spec),
		PlaceholderRepoFiles, describeFiles(repoFiles),
		PlaceholderVerificationStep, t.VerificationStep,
		PlaceholderCommandExample, t.CommandExample,
		PlaceholderScriptExample, t.ScriptExample,
		PlaceholderVerification, t.Verification,
		PlaceholderAcceptanceRules, t.AcceptanceRules,
		PlaceholderForbiddenExample, t.ForbiddenExample,
		PlaceholderPlanExample, t.PlanExample,
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
