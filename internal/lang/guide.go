package lang

import (
	"embed"
	"fmt"
	"regexp"
	"strings"
)

// Guide is how work orders and acceptance commands look in one language:
// text for the planner's prompt (see Detection.PlannerText).
type Guide struct {
	CommandExample   string // one acceptance command, in backquotes
	ScriptExample    string // a helper script run through its interpreter, in backquotes
	Tests            string // markdown bullets: where tests live and what runs them
	Acceptance       string // markdown bullets: how acceptance commands look
	ForbiddenExample string // what a work order typically must not touch
	PlanExample      string // a plan with one work order, as JSON

	// Python only: the seeds' prompt text, used verbatim for Python repositories.
	verificationStep, verification string
}

//go:embed guides/*.txt
var guideFiles embed.FS

var sectionLine = regexp.MustCompile(`(?m)^=== ([a-z_]+) ===\n`)

// guides are parsed once; a malformed file is a build mistake the tests catch.
var guides = func() map[ID]Guide {
	out := map[ID]Guide{}
	for _, id := range order {
		data, err := guideFiles.ReadFile("guides/" + string(id) + ".txt")
		if err != nil {
			panic(err)
		}
		text := string(data)
		secs := map[string]string{}
		locs := sectionLine.FindAllStringSubmatchIndex(text, -1)
		for i, l := range locs {
			end := len(text)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			secs[text[l[2]:l[3]]] = strings.TrimRight(text[l[1]:end], "\n")
		}
		out[id] = Guide{
			CommandExample: secs["command_example"], ScriptExample: secs["script_example"],
			Tests: secs["tests"], Acceptance: secs["acceptance"],
			ForbiddenExample: secs["forbidden_example"], PlanExample: secs["plan_example"],
			verificationStep: secs["verification_step"], verification: secs["verification"],
		}
	}
	return out
}()

// Guide returns the profile's planner guidance.
func (p Profile) Guide() Guide { return guides[p.ID] }

// PlannerText is the language-dependent text of the planner's prompt, one
// field per placeholder of the default template.
type PlannerText struct {
	VerificationStep string // step 4 of "how work orders are executed"
	CommandExample   string
	ScriptExample    string
	Verification     string // a whole section, with its heading
	AcceptanceRules  string
	ForbiddenExample string
	PlanExample      string
}

// plannerPython is the interpreter the planner's examples name.
const plannerPython = "python3"

// PlannerText tells the planner how this repository is verified and how
// work orders look in its languages. A Python repository (or one with no
// marker) gets the seeds' prompt unchanged. verifyScript says the
// repository already has scripts/verify.sh.
func (d Detection) PlannerText(verifyScript bool) PlannerText {
	g := d.Primary().Guide()
	if d.PythonOnly() {
		return PlannerText{
			VerificationStep: g.verificationStep, CommandExample: g.CommandExample, ScriptExample: g.ScriptExample,
			Verification: g.verification, AcceptanceRules: g.Acceptance, ForbiddenExample: g.ForbiddenExample,
			PlanExample: g.PlanExample,
		}
	}
	t := PlannerText{
		VerificationStep: "4. runs global verification: `bash scripts/verify.sh` when that file exists, otherwise the\n" +
			"   default verification of this repository (see \"Verification in this repository\");",
		CommandExample: g.CommandExample, ScriptExample: g.ScriptExample,
		ForbiddenExample: g.ForbiddenExample, PlanExample: g.PlanExample,
	}
	var b strings.Builder
	b.WriteString("# Verification in this repository\n\n")
	fmt.Fprintf(&b, "The repository holds %s.\n", d.Describe())
	if verifyScript {
		b.WriteString("It has `scripts/verify.sh`: the harness runs `bash scripts/verify.sh` after every work order,\n" +
			"so keep it working. Without it, the default verification would be:\n")
	} else {
		b.WriteString("It has no `scripts/verify.sh`, so after every work order the harness runs, in this order:\n")
	}
	for _, argv := range d.Verify(plannerPython) {
		fmt.Fprintf(&b, "- `%s`\n", Quote(argv))
	}
	b.WriteString("\nEach command must exit 0 after EVERY work order, for the whole repository, not only the files\n" +
		"the work order touches.")
	if !verifyScript {
		b.WriteString(" Do not create `scripts/verify.sh` and leave `verify_contract` out of the plan\n" +
			"unless the specification asks for other verification.")
		if c := d.CompileOnly(plannerPython); len(c) > 0 {
			quoted := make([]string, len(c))
			for i, argv := range c {
				quoted[i] = "`" + Quote(argv) + "`"
			}
			fmt.Fprintf(&b, " (With a `verify_contract`, the work orders before it holds\nare verify-exempt and only build: %s.)", strings.Join(quoted, ", "))
		}
	}
	b.WriteString("\n")
	for _, p := range d.Profiles {
		b.WriteString("\n" + p.Guide().Tests + "\n")
	}
	t.Verification = strings.TrimRight(b.String(), "\n")

	rules := g.Acceptance
	for _, p := range d.Profiles[1:] {
		rules += fmt.Sprintf("\n- Acceptance commands for the %s part look like %s.", p.Name(), p.Guide().CommandExample)
	}
	t.AcceptanceRules = rules
	return t
}

// Quote renders argv as a POSIX shell word list that splits back into the
// same words.
func Quote(argv []string) string {
	parts := make([]string, len(argv))
	for i, w := range argv {
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`|&;<>()*?[]#~=%{}") {
			parts[i] = w
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}
