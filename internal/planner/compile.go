// Package planner compiles a product specification into validated work
// orders: a model drafts the plan, deterministic validators check it, the
// model revises it against the exact errors, and a reviewer model looks for
// semantic inconsistencies no parser can see.
package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// ValidatorVersion names the rule set that accepted a plan; it changes
// whenever a validation rule does.
const ValidatorVersion = "3"

// Options configure one compile.
type Options struct {
	Spec            string
	Template        string
	Model           llm.Model
	ModelName       string
	ReasoningEffort string
	MaxOutputTokens int64
	MaxAttempts     int // planner calls per validation loop
	Review          bool
	ReviewModelName string
	MaxReviewCycles int
	Env             Env
	ArtifactsDir    string
	Progress        io.Writer
	// CacheKey is every request's llm.Request.CacheKey (the provider's
	// prompt cache key); "" means one derived from the compile hash and
	// the repository map.
	CacheKey string
	// RepoMap is the repository map the planner and the reviewer see
	// (repomap.View.Text, ranked for the spec); "" for none.
	RepoMap string
}

// CompileHash is sha256(spec + template + model + reasoning_effort)[:16]:
// the same inputs always name the same plan request.
func CompileHash(spec, template, model, effort string) string {
	return canon.SHA256Hex([]byte(spec + template + model + effort))[:16]
}

// PromptCacheKey is the default provider cache key of a compile's
// requests: the compile hash, and the map's hash when the prompts carry a
// map, since the same spec over another tree is another prompt.
func PromptCacheKey(compileHash, repoMap string) string {
	if repoMap == "" {
		return "factory-plan-" + compileHash
	}
	return "factory-plan-" + compileHash + "-" + canon.SHA256Hex([]byte(repoMap))[:8]
}

// ModelError is a failed model call (after transport retries). Err is an
// *llm.ProviderError when the provider failed rather than the model.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return "model call failed: " + e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// InvalidPlanError is a plan still invalid after every attempt; a reply
// that is not JSON at all is one (E000).
type InvalidPlanError struct {
	Issues []Issue
}

func (e *InvalidPlanError) Error() string {
	return fmt.Sprintf("the plan is still invalid after every attempt (%d errors)", len(e.Issues))
}

// AttemptLog is one planner call in compile_summary.json.
type AttemptLog struct {
	Attempt  int    `json:"attempt"`
	Purpose  string `json:"purpose"` // "plan", "revision" or "review_revision"
	Errors   int    `json:"errors"`
	Warnings int    `json:"warnings"`
}

// ReviewLog is one reviewer cycle in compile_summary.json.
type ReviewLog struct {
	Cycle    int    `json:"cycle"`
	Findings int    `json:"findings"`
	Outcome  string `json:"outcome"`
}

// Summary is compile_summary.json.
type Summary struct {
	Success          bool         `json:"success"`
	CompileHash      string       `json:"compile_hash"`
	Model            string       `json:"model"`
	ReasoningEffort  string       `json:"reasoning_effort"`
	ReviewModel      string       `json:"review_model,omitempty"`
	TemplateSHA256   string       `json:"template_sha256"`
	SpecSHA256       string       `json:"spec_sha256"`
	RepoMapSHA256    string       `json:"repo_map_sha256,omitempty"` // the map the prompts carried, if any
	ValidatorVersion string       `json:"validator_version"`
	Attempts         int          `json:"attempts"`
	AcceptedAttempt  int          `json:"accepted_attempt"` // the attempt whose plan was written; 0 on failure
	AttemptLog       []AttemptLog `json:"attempt_log"`
	Review           []ReviewLog  `json:"review"`
	WorkOrders       int          `json:"work_orders"`
	Errors           []Issue      `json:"errors"`
	Warnings         []Issue      `json:"warnings"`
	Usage            llm.Usage    `json:"usage"`
	DurationSeconds  float64      `json:"duration_seconds"`
	Error            string       `json:"error,omitempty"`
}

// Outcome is a successful compile.
type Outcome struct {
	Manifest *workorder.Manifest // verify_exempt computed
	Summary  Summary
}

type compiler struct {
	o       Options
	sum     Summary
	attempt int
}

// Compile runs the planner. Artifacts and compile_summary.json are written
// to o.ArtifactsDir whatever happens; on failure the error is a
// *ModelError, an *InvalidPlanError, or an I/O error. A failed model call
// ends the compile at once: no further attempt is made and nothing of the
// error reaches a prompt. The review phase is the exception (see run).
func Compile(ctx context.Context, o Options) (*Outcome, error) {
	start := time.Now()
	c := &compiler{o: o}
	c.sum = Summary{
		CompileHash:      CompileHash(o.Spec, o.Template, o.ModelName, o.ReasoningEffort),
		Model:            o.ModelName,
		ReasoningEffort:  o.ReasoningEffort,
		TemplateSHA256:   canon.SHA256Hex([]byte(o.Template)),
		SpecSHA256:       canon.SHA256Hex([]byte(o.Spec)),
		ValidatorVersion: ValidatorVersion,
		AttemptLog:       []AttemptLog{},
		Review:           []ReviewLog{},
		Errors:           []Issue{},
		Warnings:         []Issue{},
	}
	if o.Review {
		c.sum.ReviewModel = o.ReviewModelName
	}
	if o.RepoMap != "" {
		c.sum.RepoMapSHA256 = canon.SHA256Hex([]byte(o.RepoMap))
	}
	if err := clearArtifacts(o.ArtifactsDir); err != nil {
		return nil, err
	}
	m, err := c.run(ctx)
	c.sum.DurationSeconds = time.Since(start).Seconds()
	c.sum.Success = err == nil
	if err != nil {
		c.sum.Error = err.Error()
		c.sum.AcceptedAttempt = 0
	}
	var invalid *InvalidPlanError
	if errors.As(err, &invalid) {
		if werr := c.write("validation_errors.json", invalid.Issues); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if werr := c.write("compile_summary.json", c.sum); werr != nil {
		return nil, errors.Join(err, werr)
	}
	if err != nil {
		return nil, err
	}
	return &Outcome{Manifest: m, Summary: c.sum}, nil
}

func (c *compiler) run(ctx context.Context) (*workorder.Manifest, error) {
	base := Render(c.o.Template, c.o.Spec, c.o.Env.RepoFiles, c.o.RepoMap)
	content, res, err := c.validationLoop(ctx, base, "plan")
	if err != nil {
		return nil, err
	}
	accepted := c.attempt
	defer func() { c.sum.AcceptedAttempt = accepted }()
	for cycle := 1; c.o.Review && cycle <= c.o.MaxReviewCycles; cycle++ {
		findings, err := c.review(ctx, cycle, content)
		var modelErr *ModelError
		if errors.As(err, &modelErr) && !misconfigured(err) {
			// The review is a quality pass over a plan that already passed
			// validation: losing that plan to an API error helps nobody.
			c.sum.Review = append(c.sum.Review, ReviewLog{Cycle: cycle, Outcome: "reviewer call failed, plan kept unreviewed: " + modelErr.Error()})
			c.progress("review %d: the reviewer call failed (%v); keeping the validated plan unreviewed", cycle, modelErr)
			return c.accept(res)
		}
		if err != nil {
			return nil, err
		}
		if findings == nil {
			break // no findings, or an unusable review (logged)
		}
		revised, revisedRes, err := c.validationLoop(ctx, reviewRevisionPrompt(base, content, findings), "review_revision")
		var invalid *InvalidPlanError
		switch {
		case errors.As(err, &invalid), errors.As(err, &modelErr) && !misconfigured(err):
			// The reviewer may be wrong, and the API may fail; neither may
			// cost the user the plan that passed.
			c.sum.Review[len(c.sum.Review)-1].Outcome = "revision failed (" + err.Error() + "); kept the plan that passed before this review"
			c.progress("review %d: the revision failed; keeping the plan that passed", cycle)
			return c.accept(res)
		case err != nil:
			return nil, err
		}
		c.sum.Review[len(c.sum.Review)-1].Outcome = "plan revised and re-validated"
		content, res, accepted = revised, revisedRes, c.attempt
	}
	return c.accept(res)
}

// misconfigured reports a failure no later call can get past — a provider
// setup mistake (bad key, unknown model, wrong URL) or a budget reached: it
// ends the compile even in the review phase, where other model failures
// keep the plan that passed, because skipping a review the user asked for
// must not hide a misspelt --review-model, and a budget is a hard stop.
func misconfigured(err error) bool {
	var budget *llm.BudgetError
	if errors.As(err, &budget) {
		return true
	}
	pe, ok := llm.AsProviderError(err)
	return ok && pe.Misconfigured()
}

func (c *compiler) accept(res Result) (*workorder.Manifest, error) {
	m := *res.Manifest
	m.WorkOrders = ComputeVerifyExempt(res.Manifest, c.o.Env.RepoFiles)
	c.sum.WorkOrders = len(m.WorkOrders)
	c.sum.Errors = []Issue{}
	c.sum.Warnings = res.Warnings() // never nil
	return &m, nil
}

// validationLoop asks for a plan with prompt and revises it against the
// validation errors until it passes or the attempts run out.
func (c *compiler) validationLoop(ctx context.Context, base, purpose string) (string, Result, error) {
	prompt := base
	var content string
	var res Result
	for i := 0; i < c.o.MaxAttempts; i++ {
		c.attempt++
		n := c.attempt
		if err := c.writeText(fmt.Sprintf("prompt_attempt_%d.txt", n), prompt); err != nil {
			return "", Result{}, err
		}
		c.progress("attempt %d: asking %s for a %s", n, c.o.ModelName, strings.ReplaceAll(purpose, "_", " "))
		resp, err := c.ask(ctx, c.o.ModelName, cacheSegments(base, prompt), nil)
		if err != nil {
			return "", Result{}, err
		}
		content = resp.Content
		if err := c.writeText(fmt.Sprintf("llm_raw_response_attempt_%d.txt", n), content); err != nil {
			return "", Result{}, err
		}
		if json.Valid([]byte(content)) {
			if err := c.writeText(fmt.Sprintf("manifest_raw_attempt_%d.json", n), content); err != nil {
				return "", Result{}, err
			}
		}
		env := c.o.Env
		env.compiled = true
		res = Validate(ctx, []byte(content), env)
		if res.PythonErr != nil {
			// An environment problem, not the model's: a revision cannot fix it.
			return "", Result{}, fmt.Errorf("python3 is needed to check the python -c acceptance commands: %w", res.PythonErr)
		}
		if err := c.write(fmt.Sprintf("validation_errors_attempt_%d.json", n), res.Issues); err != nil {
			return "", Result{}, err
		}
		errs := res.Errors()
		c.sum.Attempts = n
		c.sum.AttemptLog = append(c.sum.AttemptLog, AttemptLog{Attempt: n, Purpose: purpose, Errors: len(errs), Warnings: len(res.Warnings())})
		c.progress("attempt %d: %d errors, %d warnings", n, len(errs), len(res.Warnings()))
		if len(errs) == 0 {
			return content, res, nil
		}
		c.sum.Errors = errs
		purpose = "revision"
		prompt = revisionPrompt(base, content, errs)
	}
	return content, res, &InvalidPlanError{Issues: res.Errors()}
}

// cacheSegments splits a prompt that starts with base into the stable
// base and the rest (a revision's previous reply and errors), the user
// message segments a provider can cache separately (see llm.Message).
func cacheSegments(base, prompt string) []string {
	if rest, ok := strings.CutPrefix(prompt, base); ok && rest != "" && base != "" {
		return []string{base, rest}
	}
	return []string{prompt}
}

func (c *compiler) ask(ctx context.Context, model string, segments []string, schema *responseSchema) (llm.Response, error) {
	req := llm.Request{
		Model:           model,
		ReasoningEffort: c.o.ReasoningEffort,
		MaxOutputTokens: c.o.MaxOutputTokens,
		CacheKey:        c.o.CacheKey,
	}
	if req.CacheKey == "" {
		req.CacheKey = PromptCacheKey(c.sum.CompileHash, c.o.RepoMap)
	}
	for _, s := range segments {
		req.Messages = append(req.Messages, llm.Message{Role: "user", Content: s})
	}
	if schema != nil {
		req.SchemaName, req.Schema = schema.name, schema.schema
	}
	resp, err := c.o.Model.Complete(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return llm.Response{}, context.Cause(ctx)
		}
		return llm.Response{}, &ModelError{Err: err}
	}
	c.sum.Usage = c.sum.Usage.Add(resp.Usage)
	return resp, nil
}

// revisionPrompt asks for a corrected plan: the original instructions, the
// previous reply and the exact errors, each with its code.
func revisionPrompt(base, previous string, errs []Issue) string {
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("\n\n# Your previous reply\n\n")
	b.WriteString(fenced(previous))
	b.WriteString("\n\n# It failed validation\n\nFix every error below. Keep work orders that have no errors unchanged. ")
	b.WriteString("Reply with the complete corrected JSON object only.\n\n")
	for _, e := range errs {
		b.WriteString("- " + e.String() + "\n")
	}
	return b.String()
}

func (i Issue) String() string {
	where := strings.Trim(strings.Join([]string{i.WOID, i.Field}, " "), " ")
	if where == "" {
		return fmt.Sprintf("[%s] %s", i.Code, i.Message)
	}
	return fmt.Sprintf("[%s] %s: %s", i.Code, where, i.Message)
}

func fenced(s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + "\n" + strings.TrimRight(s, "\n") + "\n" + f
}

func (c *compiler) progress(format string, args ...any) {
	if c.o.Progress != nil {
		fmt.Fprintf(c.o.Progress, format+"\n", args...)
	}
}

func (c *compiler) write(name string, v any) error {
	return artifact.WriteJSON(filepath.Join(c.o.ArtifactsDir, name), v)
}

func (c *compiler) writeText(name, text string) error {
	return artifact.WriteFileAtomic(filepath.Join(c.o.ArtifactsDir, name), []byte(text), 0o644)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// staleArtifact matches the files a compile writes to its artifacts
// directory, so a new compile starts from none: files of an earlier, longer
// compile must not sit next to this one's.
var staleArtifact = regexp.MustCompile(`^((prompt|llm_raw_response|manifest_raw|validation_errors)_attempt_\d+\.(txt|json)|reviewer_(prompt|response|findings)_\d+\.(txt|json)|validation_errors\.json|compile_summary\.json)$`)

func clearArtifacts(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read artifacts directory: %w", err)
	}
	for _, e := range entries {
		if staleArtifact.MatchString(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove stale artifact: %w", err)
			}
		}
	}
	return nil
}
