package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/factory-harness/factory/internal/workorder"
)

// Finding is one specific, checkable problem the reviewer reports.
type Finding struct {
	WOID     string `json:"wo_id" jsonschema:"required"`
	Field    string `json:"field" jsonschema:"required"`
	Problem  string `json:"problem" jsonschema:"required"`
	Evidence string `json:"evidence" jsonschema:"required"`
	Fix      string `json:"fix" jsonschema:"required"`
}

// reviewReply is the reviewer's whole answer.
type reviewReply struct {
	Findings []Finding `json:"findings" jsonschema:"required"`
}

// responseSchema is a strict structured-output format.
type responseSchema struct {
	name   string
	schema map[string]any
}

func reviewSchema() (*responseSchema, error) {
	s, err := workorder.ResponseSchema(&reviewReply{}, "review_findings")
	if err != nil {
		return nil, err
	}
	return &responseSchema{name: "review_findings", schema: s}, nil
}

// review runs one reviewer cycle over the plan in content. It returns the
// findings, or nil when there are none or the reply was unusable (recorded
// in the summary: a broken review must not block a plan that passed).
func (c *compiler) review(ctx context.Context, cycle int, content string) ([]Finding, error) {
	prompt := strings.NewReplacer(
		PlaceholderSpec, strings.TrimSpace(c.o.Spec),
		"{{REPO_MAP}}", mapSection(c.o.RepoMap),
		"{{PLAN_JSON}}", fenced(content),
	).Replace(reviewerTemplate)
	if err := c.writeText(fmt.Sprintf("reviewer_prompt_%d.txt", cycle), prompt); err != nil {
		return nil, err
	}
	schema, err := reviewSchema()
	if err != nil {
		return nil, err
	}
	c.progress("review %d: asking %s to review the plan", cycle, c.o.ReviewModelName)
	resp, err := c.ask(ctx, c.o.ReviewModelName, []string{prompt}, schema)
	if err != nil {
		return nil, err
	}
	if err := c.writeText(fmt.Sprintf("reviewer_response_%d.json", cycle), resp.Content); err != nil {
		return nil, err
	}
	var reply reviewReply
	if err := workorder.DecodeStrict([]byte(strings.TrimSpace(resp.Content)), &reply); err != nil {
		c.sum.Review = append(c.sum.Review, ReviewLog{Cycle: cycle, Outcome: "unusable reviewer reply, ignored: " + err.Error()})
		c.progress("review %d: the reviewer's reply is unusable (%v); keeping the plan", cycle, err)
		return nil, nil
	}
	findings := reply.Findings // required, so decoded as a list, never nil
	if err := c.write(fmt.Sprintf("reviewer_findings_%d.json", cycle), findings); err != nil {
		return nil, err
	}
	log := ReviewLog{Cycle: cycle, Findings: len(findings), Outcome: "no findings"}
	c.sum.Review = append(c.sum.Review, log)
	c.progress("review %d: %d findings", cycle, len(findings))
	if len(findings) == 0 {
		return nil, nil
	}
	return findings, nil
}

// reviewRevisionPrompt sends the reviewer's findings back to the planner,
// who decides claim by claim: the reviewer can be wrong.
func reviewRevisionPrompt(base, plan string, findings []Finding) string {
	list, _ := json.MarshalIndent(findings, "", "  ")
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("\n\n# Your plan\n\n")
	b.WriteString(fenced(plan))
	b.WriteString("\n\n# A reviewer reported these problems\n\n")
	b.WriteString(fenced(string(list)))
	b.WriteString("\n\nCheck each claim against your plan. Fix the ones that are right — in the acceptance commands, " +
		"the notes or the context files — and ignore the ones that are wrong. Change nothing else. " +
		"Reply with the complete JSON object only.\n")
	return b.String()
}
