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
	PlaceholderSpec = "{{PRODUCT_SPEC}}"
	// PlaceholderRepoFiles is the list of tracked files, then the
	// repository map (see internal/repomap) under a heading of its own when
	// there is one: a prompt without a map keeps its bytes, and a custom
	// template gets the map too.
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
// repoMap is the rendered repository map, "" for none.
func Render(tmpl, spec string, repoFiles []string, repoMap string) string {
	t := lang.DetectFiles(repoFiles).PlannerText(slices.Contains(repoFiles, "scripts/verify.sh"))
	return strings.NewReplacer(
		PlaceholderSpec, strings.TrimSpace(spec),
		PlaceholderRepoFiles, describeFiles(repoFiles)+mapSection(repoMap),
		PlaceholderVerificationStep, t.VerificationStep,
		PlaceholderCommandExample, t.CommandExample,
		PlaceholderScriptExample, t.ScriptExample,
		PlaceholderVerification, t.Verification,
		PlaceholderAcceptanceRules, t.AcceptanceRules,
		PlaceholderForbiddenExample, t.ForbiddenExample,
		PlaceholderPlanExample, t.PlanExample,
	).Replace(tmpl)
}

// fileListLimit is how many lines the file list takes at most: beyond, it
// counts files per directory instead (the repository map names the
// definitions that matter).
const fileListLimit = 300

func describeFiles(files []string) string {
	if len(files) == 0 {
		return "The repository is empty: WO-01 starts from nothing."
	}
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	var b strings.Builder
	fmt.Fprintf(&b, "The repository already tracks these %d files (they exist before WO-01):\n", len(sorted))
	lines := sorted
	if len(sorted) > fileListLimit {
		lines = summarizeFiles(sorted)
		fmt.Fprintf(&b, "(too many to list: the files at the top level, then how many files each directory holds, two levels deep)\n")
	}
	for i, f := range lines {
		if i == fileListLimit {
			fmt.Fprintf(&b, "- … and %d more\n", len(lines)-fileListLimit)
			break
		}
		fmt.Fprintf(&b, "- %s\n", f)
	}
	return b.String()
}

// summarizeFiles lists the top-level files of sorted paths, then each
// directory two levels deep with the number of files under it.
func summarizeFiles(sorted []string) []string {
	var top, dirs []string
	count := map[string]int{}
	for _, f := range sorted {
		parts := strings.SplitN(f, "/", 3)
		if len(parts) == 1 {
			top = append(top, f)
			continue
		}
		dir := parts[0] + "/"
		if len(parts) == 3 {
			dir += parts[1] + "/"
		}
		if count[dir] == 0 {
			dirs = append(dirs, dir)
		}
		count[dir]++
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		top = append(top, fmt.Sprintf("%s (%d files)", d, count[d]))
	}
	return top
}

// mapSection is the map as it follows the file list (and the
// specification in the reviewer's prompt, at {{REPO_MAP}}).
func mapSection(repoMap string) string {
	if repoMap == "" {
		return ""
	}
	return "\n\n# The code already in the repository\n\n" +
		"The definitions below were read from the repository's files. Keep their signatures when a work order " +
		"changes code that uses them, and list the files that hold the code a work order changes or calls " +
		"in its `context_files`.\n\n" + strings.TrimRight(repoMap, "\n")
}
