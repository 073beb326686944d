package planner

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// RepairTemplate is the prompt of a repair request (see Repair).
//
//go:embed templates/repair.md
var RepairTemplate string

// RepairRequest is what the planner is told when a work order of a build
// failed every attempt. Nothing in it names a commit or an absolute path,
// so the same failure renders the same prompt in a fresh repository, and a
// recorded transcript replays.
type RepairRequest struct {
	Spec string // "" for a build from a given plan
	// Plan is the plan as it stands, its committed orders first.
	Plan      *workorder.Manifest
	Committed []CommittedOrder // the first len(Committed) orders of Plan
	Failed    FailedOrder
	// Used is every id the build's plans have held (the first plan's and
	// every applied repair's).
	Used []string
	// RepoFiles and RepoMap describe the build branch's tip.
	RepoFiles []string
	RepoMap   string
}

// CommittedOrder names an order whose commit is on the build branch by the
// tree of that commit, which the same changes give in any repository.
type CommittedOrder struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Tree  string `json:"tree"`
}

// FailedOrder is the order that failed and the evidence of its attempts.
type FailedOrder struct {
	ID           string           `json:"id"`
	Title        string           `json:"title"`
	Stage        string           `json:"stage"`
	StoppedEarly string           `json:"stopped_early,omitempty"`
	Error        string           `json:"error,omitempty"` // why it could not start (preflight), when no attempt ran
	Attempts     []AttemptFailure `json:"attempts"`
}

// AttemptFailure is one failed attempt's failure brief, without the
// constraints reminder the coding model gets.
type AttemptFailure struct {
	Attempt  int     `json:"attempt"`
	Stage    string  `json:"stage"`
	Command  *string `json:"command"`
	ExitCode *int    `json:"exit_code"`
	Excerpt  string  `json:"excerpt"`
}

// RepairOptions configure one repair.
type RepairOptions struct {
	Request         RepairRequest
	Model           llm.Model
	ModelName       string
	ReasoningEffort string
	MaxOutputTokens int64
	MaxAttempts     int // planner calls per repair, revisions included
	// CacheKey is every request's provider cache key (the build's).
	CacheKey string
	// Env checks the repaired plan: RepoFiles are the files of the commit
	// the build started from, where the whole plan's condition chain
	// starts, as when the plan was first validated. Repair sets Repair.
	Env Env
	// Dir receives prompt_attempt_N.txt, llm_raw_response_attempt_N.txt
	// and validation_errors_attempt_N.json. An attempt whose prompt and
	// reply are already there, the prompt byte for byte the one Repair
	// would send, is read back instead of asked again: a repair cut off by
	// a crash resumes without paying twice for what it already has.
	Dir      string
	Progress io.Writer
	// OnRejected, when set, hears of each reply that failed validation.
	OnRejected func(attempt int, errs []Issue)
}

// RepairOutcome is a repair that ended with a plan or a give-up.
type RepairOutcome struct {
	// Manifest is the repaired plan: the committed orders exactly as they
	// were, verify_exempt computed for the others. Nil when the planner
	// gave up.
	Manifest *workorder.Manifest
	GiveUp   string
	Changes  Changes
	Attempts int // replies read, asked for or read back
	Calls    int // model calls made
	Usage    llm.Usage
	Warnings []Issue
}

// RenderRepair is the prompt of a repair request.
func RenderRepair(req RepairRequest) string {
	t := lang.DetectFiles(req.RepoFiles).PlannerText(slices.Contains(req.RepoFiles, "scripts/verify.sh"))
	spec := strings.TrimSpace(req.Spec)
	if spec == "" {
		spec = "The build runs from a given plan, without a specification: the plan's intents and notes say what is wanted."
	}
	var committed strings.Builder
	for _, c := range req.Committed {
		fmt.Fprintf(&committed, "- %s %q, committed (tree %s)\n", c.ID, c.Title, c.Tree)
	}
	if len(req.Committed) == 0 {
		committed.WriteString("None yet.\n")
	}
	used := slices.Sorted(slices.Values(req.Used))
	return strings.NewReplacer(
		PlaceholderSpec, spec,
		PlaceholderRepoFiles, strings.Replace(describeFiles(req.RepoFiles), "(they exist before WO-01)", "(at the tip of the build branch, after the committed work orders)", 1)+mapSection(req.RepoMap),
		PlaceholderVerificationStep, t.VerificationStep,
		PlaceholderCommandExample, t.CommandExample,
		PlaceholderScriptExample, t.ScriptExample,
		PlaceholderAcceptanceRules, t.AcceptanceRules,
		PlaceholderForbiddenExample, t.ForbiddenExample,
		"{{PLAN_JSON}}", fenced(PlanJSON(req.Plan)),
		"{{COMMITTED}}", strings.TrimRight(committed.String(), "\n"),
		"{{USED_IDS}}", strings.Join(slices.Compact(used), ", "),
		"{{FAILURE}}", describeFailure(req.Failed),
	).Replace(RepairTemplate)
}

// PlanJSON is a plan as the planner writes one: verify_contract and
// work_orders, without the verify_exempt the harness computes.
func PlanJSON(m *workorder.Manifest) string {
	type order map[string]any
	orders := make([]order, len(m.WorkOrders))
	for i, w := range m.WorkOrders {
		data, _ := json.Marshal(w)
		var o order
		_ = json.Unmarshal(data, &o)
		delete(o, "verify_exempt")
		orders[i] = o
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"verify_contract": m.VerifyContract, "work_orders": orders})
	return strings.TrimRight(b.String(), "\n")
}

func describeFailure(f FailedOrder) string {
	var b strings.Builder
	n := len(f.Attempts)
	fmt.Fprintf(&b, "%s %q failed at stage %s", f.ID, f.Title, f.Stage)
	switch {
	case n == 0:
		b.WriteString(" before any attempt ran")
	case n == 1:
		b.WriteString(" after 1 attempt")
	default:
		fmt.Fprintf(&b, " after %d attempts", n)
	}
	if f.StoppedEarly != "" {
		fmt.Fprintf(&b, " (the attempts stopped early: %s)", f.StoppedEarly)
	}
	b.WriteString(".\n")
	if f.Error != "" {
		b.WriteString("\n" + fenced(f.Error) + "\n")
	}
	for _, a := range f.Attempts {
		fmt.Fprintf(&b, "\n## Attempt %d: %s\n\n", a.Attempt, a.Stage)
		if a.Command != nil {
			fmt.Fprintf(&b, "Command: `%s`\n", *a.Command)
		}
		if a.ExitCode != nil {
			fmt.Fprintf(&b, "Exit code: %d\n", *a.ExitCode)
		}
		if a.Excerpt != "" {
			b.WriteString("Output (excerpt):\n\n" + fenced(a.Excerpt) + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// Repair asks the planner to repair a plan after a work order failed,
// validates each reply as a compile does (Validate, with the repair rules
// of RepairContext), and sends an invalid one back with its errors, up to
// MaxAttempts calls. It returns the repaired plan or the planner's
// give-up; an *InvalidPlanError when every reply was invalid; a
// *ModelError when a call failed (a budget reached included); or an I/O
// error.
func Repair(ctx context.Context, o RepairOptions) (*RepairOutcome, error) {
	req := o.Request
	if req.Plan == nil || len(req.Committed) > len(req.Plan.WorkOrders) {
		return nil, errors.New("repair: the request holds no plan, or more committed orders than the plan")
	}
	env := o.Env
	env.Repair = &RepairContext{Before: req.Plan, Committed: len(req.Committed), Failed: req.Failed.ID, Used: req.Used, TipFiles: req.RepoFiles}
	c := &compiler{o: Options{
		Model: o.Model, ModelName: o.ModelName, ReasoningEffort: o.ReasoningEffort, MaxOutputTokens: o.MaxOutputTokens,
		ArtifactsDir: o.Dir, Progress: o.Progress, CacheKey: o.CacheKey,
	}}
	if c.o.CacheKey == "" {
		c.o.CacheKey = "factory-repair-" + canon.SHA256Hex([]byte(PlanJSON(req.Plan)))[:16]
	}
	base := RenderRepair(req)
	prompt := base
	out := &RepairOutcome{}
	var last []Issue
	for n := 1; n <= o.MaxAttempts; n++ {
		content, asked, err := c.repairReply(ctx, n, base, prompt)
		if err != nil {
			return nil, err
		}
		out.Attempts = n
		if asked {
			out.Calls++
		}
		reason, giveUp, issues := decodeGiveUp(content)
		var res Result
		if !giveUp && issues == nil {
			res = Validate(ctx, []byte(content), env)
			if res.PythonErr != nil {
				return nil, fmt.Errorf("python3 is needed to check the python -c acceptance commands: %w", res.PythonErr)
			}
			issues = res.Issues
		}
		if err := c.write(fmt.Sprintf("validation_errors_attempt_%d.json", n), nonNil(issues)); err != nil {
			return nil, err
		}
		out.Usage = c.sum.Usage
		if giveUp {
			c.progress("repair attempt %d: the planner gives up: %s", n, reason)
			out.GiveUp = reason
			return out, nil
		}
		errs := filterIssues(issues, func(i Issue) bool { return !i.Warning() })
		c.progress("repair attempt %d: %d errors, %d warnings", n, len(errs), len(issues)-len(errs))
		if len(errs) == 0 {
			out.Manifest = repaired(req, res.Manifest, env.RepoFiles)
			out.Changes = PlanChanges(req.Plan, out.Manifest)
			out.Warnings = res.Warnings()
			return out, nil
		}
		last = errs
		if o.OnRejected != nil {
			o.OnRejected(n, errs)
		}
		prompt = repairRevisionPrompt(base, content, errs)
	}
	return nil, &InvalidPlanError{Issues: last}
}

// repairReply is attempt n's reply: read back from Dir when an earlier
// process got it for the same prompt, else asked for (asked).
func (c *compiler) repairReply(ctx context.Context, n int, base, prompt string) (content string, asked bool, err error) {
	promptFile := filepath.Join(c.o.ArtifactsDir, fmt.Sprintf("prompt_attempt_%d.txt", n))
	replyFile := filepath.Join(c.o.ArtifactsDir, fmt.Sprintf("llm_raw_response_attempt_%d.txt", n))
	if had, err := os.ReadFile(promptFile); err == nil && string(had) == prompt {
		if reply, err := os.ReadFile(replyFile); err == nil {
			c.progress("repair attempt %d: reading back the reply an earlier process got", n)
			return string(reply), false, nil
		}
	}
	if err := c.writeText(filepath.Base(promptFile), prompt); err != nil {
		return "", false, err
	}
	c.progress("repair attempt %d: asking %s for a repaired plan", n, c.o.ModelName)
	resp, err := c.ask(ctx, c.o.ModelName, cacheSegments(base, prompt), nil)
	if err != nil {
		return "", false, err
	}
	if err := c.writeText(filepath.Base(replyFile), resp.Content); err != nil {
		return "", false, err
	}
	return resp.Content, true, nil
}

// decodeGiveUp reads a give-up reply: {"give_up": "<reason>"} and nothing
// else. A reply with a give_up key that is not exactly that is an E000.
func decodeGiveUp(content string) (reason string, giveUp bool, issues []Issue) {
	top := looseObject(json.RawMessage(strings.TrimSpace(content)))
	raw, ok := top["give_up"]
	if !ok {
		return "", false, nil
	}
	s, isString := looseString(raw)
	if len(top) != 1 || !isString || strings.TrimSpace(s) == "" {
		return "", false, []Issue{{Code: "E000", Field: "give_up",
			Message: `a give-up is a reply of its own: {"give_up": "<reason>"} with a non-empty reason and no other key; or reply with the whole repaired plan instead`}}
	}
	return strings.TrimSpace(s), true, nil
}

// repaired is the accepted plan: the committed orders copied from the plan
// before (byte for byte, verify_exempt included), verify_exempt computed
// for the rest.
func repaired(req RepairRequest, m *workorder.Manifest, repoFiles []string) *workorder.Manifest {
	out := &workorder.Manifest{VerifyContract: req.Plan.VerifyContract, WorkOrders: ComputeVerifyExempt(m, repoFiles)}
	copy(out.WorkOrders, req.Plan.WorkOrders[:len(req.Committed)])
	return out
}

// repairRevisionPrompt sends an invalid repair back with its errors.
func repairRevisionPrompt(base, previous string, errs []Issue) string {
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("\n\n# Your previous reply\n\n")
	b.WriteString(fenced(previous))
	b.WriteString("\n\n# It failed validation\n\nFix every error below and keep the rest of your repair. " +
		"Reply with the complete repaired plan as one JSON object only, or give up.\n\n")
	for _, e := range errs {
		b.WriteString("- " + e.String() + "\n")
	}
	return b.String()
}
