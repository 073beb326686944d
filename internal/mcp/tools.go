package mcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/repomap/gitsrc"
)

// Tool names.
const (
	ToolValidate = "factory_validate"
	ToolPlan     = "factory_plan"
	ToolBuild    = "factory_build"
	ToolStatus   = "factory_status"
)

// The arguments of each tool carry the names of the CLI's flags, with
// underscores.

// ValidateArgs are factory_validate's arguments.
type ValidateArgs struct {
	PlanDir string `json:"plan_dir" jsonschema:"the plan to check: a directory of WO-NN.json files (with WORK_ORDERS_MANIFEST.json, as factory_plan writes), or one manifest or work order file; inside a root"`
	Repo    string `json:"repo,omitempty" jsonschema:"the target git repository, inside a root: its tracked files are the starting state the preconditions are checked against; without it those checks are skipped"`
}

// ValidateResult is factory_validate's result.
type ValidateResult struct {
	PlanDir  string          `json:"plan_dir"`
	Valid    bool            `json:"valid" jsonschema:"true when the plan has no errors (warnings allowed)"`
	Errors   []planner.Issue `json:"errors" jsonschema:"what blocks the plan: code (E0xx/E1xx), wo_id, field, message"`
	Warnings []planner.Issue `json:"warnings" jsonschema:"what does not block it (W1xx)"`
	Notes    []string        `json:"notes" jsonschema:"checks skipped and verify_exempt mismatches"`
}

// PlanArgs are factory_plan's arguments.
type PlanArgs struct {
	Spec       string `json:"spec" jsonschema:"the product specification file (markdown or text), inside a root"`
	Out        string `json:"out" jsonschema:"the directory to write WO-NN.json and WORK_ORDERS_MANIFEST.json to (created; must not hold a plan unless overwrite), inside a root"`
	Repo       string `json:"repo,omitempty" jsonschema:"the target git repository, inside a root: its tracked files are the state the plan starts from (recommended when it exists)"`
	LLMModel   string `json:"llm_model" jsonschema:"the planner model: NAME for OpenAI or an OpenAI-compatible llm_base_url, openai:NAME, or anthropic:NAME; its API key must be in the server's environment"`
	LLMBaseURL string `json:"llm_base_url,omitempty" jsonschema:"an OpenAI-compatible (or Anthropic) API base URL, e.g. http://localhost:11434/v1; default: the server's $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the provider's"`
	NoReview   bool   `json:"no_review,omitempty" jsonschema:"skip the reviewer model's pass over the plan (faster, cheaper)"`
	Overwrite  bool   `json:"overwrite,omitempty" jsonschema:"replace a plan already in out"`
}

// PlanResult is factory_plan's result.
type PlanResult struct {
	PlanDir     string          `json:"plan_dir" jsonschema:"where the plan was written: pass it to factory_validate or to factory_build as plan_dir"`
	CompileHash string          `json:"compile_hash"`
	WorkOrders  []PlanWorkOrder `json:"work_orders"`
	Warnings    []planner.Issue `json:"warnings"`
	Tokens      int64           `json:"tokens"`
}

// PlanWorkOrder is one work order of a written plan.
type PlanWorkOrder struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	File  string `json:"file"`
}

// BuildArgs are factory_build's arguments.
type BuildArgs struct {
	Repo       string  `json:"repo" jsonschema:"the git repository to build in, inside a root: created when it does not exist, else it must be clean (no uncommitted changes); the build works on a branch factory/<plan hash>, never main or master"`
	Out        string  `json:"out" jsonschema:"the directory for plans and build artifacts, outside the repository, inside a root"`
	LLMModel   string  `json:"llm_model" jsonschema:"the model: NAME for OpenAI or an OpenAI-compatible llm_base_url, openai:NAME, or anthropic:NAME; its API key must be in the server's environment"`
	Spec       string  `json:"spec,omitempty" jsonschema:"the product specification file to plan and build (give this or plan_dir), inside a root"`
	PlanDir    string  `json:"plan_dir,omitempty" jsonschema:"an existing plan directory to build (give this or spec), inside a root"`
	LLMBaseURL string  `json:"llm_base_url,omitempty" jsonschema:"an OpenAI-compatible (or Anthropic) API base URL, e.g. http://localhost:11434/v1; default: the server's $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the provider's"`
	MaxTokens  int64   `json:"max_tokens,omitempty" jsonschema:"stop before a model call that could take the build's tokens past this (0: no limit); counts earlier runs of the same build"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty" jsonschema:"stop before a model call that could take the build's estimated cost past this many US dollars (0: no limit; needs a model with a known price)"`
	Jobs       int     `json:"jobs,omitempty" jsonschema:"work orders run at once; this version runs them one at a time, so only 1 (the default) is accepted"`
	NoReview   bool    `json:"no_review,omitempty" jsonschema:"with spec: skip the planner's reviewer pass"`
	Branch     string  `json:"branch,omitempty" jsonschema:"the branch to build on (default factory/<plan hash>; never main or master)"`
	Repair     string  `json:"repair,omitempty" jsonschema:"when a work order fails every attempt: auto (the default) asks the planner to repair the rest of the plan (the failed order and those not run yet; committed orders stay) and goes on, off stops the build there"`
	MaxRepairs *int    `json:"max_repairs,omitempty" jsonschema:"repairs of the plan per build, counted across resumes, with repair auto (default 2; 0: none)"`
}

// StatusArgs are factory_status's arguments.
type StatusArgs struct {
	Repo string `json:"repo" jsonschema:"the repository a build ran in, inside a root"`
}

func (s *Server) addTools() {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolValidate,
		Title: "Validate a factory plan",
		Description: "Check a plan (work orders) offline with factory's deterministic validators, as `factory validate` does; no model is called. " +
			"Returns valid, the errors and the warnings (code, wo_id, field, message). A plan with errors is a normal result with valid=false: " +
			"fix each error where its wo_id and field point, then validate again. Give repo so the checks against the repository's files run.",
		Annotations: readOnly,
	}, s.validate)
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolPlan,
		Title: "Compile a spec into a factory plan",
		Description: "Compile a product specification into validated work orders with a planner model, as `factory plan` does: " +
			"writes WO-NN.json and WORK_ORDERS_MANIFEST.json to out and returns the plan directory and its work orders. " +
			"Takes minutes with a real model. Then build it with factory_build plan_dir=<plan_dir> (or give factory_build the spec directly).",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, s.plan)
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolBuild,
		Title: "Build a repository with factory",
		Description: "Run a whole factory build, as `factory build` does: the spec is planned (or plan_dir is used), then each work order runs " +
			"against repo (a model proposes writes, the harness verifies them, rolls failures back and retries) and each one that passes becomes a commit " +
			"on the build branch. Long-running: sends a progress notification per work order event when the request carries a progress token. " +
			"Returns the build summary: verdict (PASS, FAIL, PLAN_INVALID, BUDGET, ERROR), each work order's outcome and commit, tokens and cost. " +
			"Resumable: after FAIL, an error or an interruption, call it again with the same arguments to continue at the first work order without a commit. " +
			"The repository must be clean; main and master are never touched.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, s.build)
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolStatus,
		Title: "Read a factory build's status",
		Description: "Show the last factory build in repo, as `factory status --json` does: where its plan came from, each work order's outcome " +
			"(passed with its commit, failed with the stage, or pending), whether it is complete and what it spent. Safe while a build runs.",
		Annotations: readOnly,
	}, s.status)
	s.addForgeTools()
}

func ptr[T any](v T) *T { return &v }

// errorResult is a tool error: the message the agent reads.
func errorResult(format string, args ...any) (*sdk.CallToolResult, error) {
	return nil, fmt.Errorf(format, args...)
}

// textResult is a result whose text is lines.
func textResult(lines ...string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(lines, "\n")}}}
}

// paths resolves the named path arguments ("" ones are skipped), all
// before anything is done: one outside the roots refuses the call.
func (s *Server) paths(args ...*[2]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		if a[1] == "" {
			continue
		}
		p, err := s.roots.resolve(a[0], a[1])
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

func arg(name, value string) *[2]string { return &[2]string{name, value} }

func (s *Server) validate(ctx context.Context, _ *sdk.CallToolRequest, a ValidateArgs) (*sdk.CallToolResult, *ValidateResult, error) {
	ctx, done := s.track(ctx)
	defer done()
	if a.PlanDir == "" {
		return nil, nil, errors.New("plan_dir is required: the plan directory (or manifest or work order file) to check")
	}
	p, err := s.paths(arg("plan_dir", a.PlanDir), arg("repo", a.Repo))
	if err != nil {
		return nil, nil, err
	}
	planPath, repo := p[0], p[1]
	raw, lone, err := planner.LoadPlan(planPath)
	if err != nil {
		return nil, nil, fmt.Errorf("read plan: %v", err)
	}
	var repoFiles []string
	res := &ValidateResult{PlanDir: planPath, Notes: []string{}}
	if repo != "" {
		if repoFiles, err = trackedFiles(ctx, repo); err != nil {
			return nil, nil, err
		}
	} else {
		res.Notes = append(res.Notes, "no repo given: repository-dependent checks (E101 and E106 for files that must already exist, W101, verify_exempt) skipped")
	}
	v := planner.Validate(ctx, raw, planner.Env{RepoFiles: repoFiles, RepoUnknown: repo == "", LoneOrder: lone, Python: planner.NewPython3Inspector()})
	if v.PythonErr != nil {
		return nil, nil, fmt.Errorf("%s: cannot check the python -c acceptance commands: %v", planPath, v.PythonErr)
	}
	res.Errors, res.Warnings = nonNil(v.Errors()), nonNil(v.Warnings())
	res.Valid = len(res.Errors) == 0
	if v.Manifest != nil && repo != "" {
		for i, wo := range planner.ComputeVerifyExempt(v.Manifest, repoFiles) {
			if got := v.Manifest.WorkOrders[i].VerifyExempt; got != wo.VerifyExempt {
				res.Notes = append(res.Notes, fmt.Sprintf("%s verify_exempt is %v, but the verify_contract says %v", wo.ID, got, wo.VerifyExempt))
			}
		}
	}
	lines := []string{fmt.Sprintf("%s: valid (%s)", planPath, plural(len(res.Warnings), "warning"))}
	if !res.Valid {
		lines[0] = fmt.Sprintf("%s: INVALID, %s and %s; fix them and validate again", planPath, plural(len(res.Errors), "error"), plural(len(res.Warnings), "warning"))
	}
	for _, i := range v.Issues {
		lines = append(lines, i.String())
	}
	lines = append(lines, res.Notes...)
	return textResult(lines...), res, nil
}

func (s *Server) plan(ctx context.Context, _ *sdk.CallToolRequest, a PlanArgs) (*sdk.CallToolResult, *PlanResult, error) {
	ctx, done := s.track(ctx)
	defer done()
	if missing := missingArgs(arg("spec", a.Spec), arg("out", a.Out), arg("llm_model", a.LLMModel)); missing != "" {
		return nil, nil, errors.New(missing)
	}
	p, err := s.paths(arg("spec", a.Spec), arg("out", a.Out), arg("repo", a.Repo))
	if err != nil {
		return nil, nil, err
	}
	specPath, out, repo := p[0], p[1], p[2]
	spec, err := os.ReadFile(specPath)
	if err != nil {
		return nil, nil, fmt.Errorf("read spec: %v", err)
	}
	if strings.TrimSpace(string(spec)) == "" {
		return nil, nil, fmt.Errorf("spec %s is empty", specPath)
	}
	if err := planner.CheckOutdir(out, a.Overwrite); err != nil {
		return nil, nil, err
	}
	repoFiles, err := trackedFiles(ctx, repo)
	if err != nil {
		return nil, nil, err
	}
	// Models last, before anything is created: a refusal leaves nothing.
	bo, err := s.o.Connect(ModelArgs{LLMModel: a.LLMModel, LLMBaseURL: a.LLMBaseURL, NoReview: a.NoReview})
	if err != nil {
		return nil, nil, err
	}
	repoMap, err := plannerMap(ctx, repo, string(spec), bo.MapTokens)
	if err != nil {
		return nil, nil, err
	}
	artifacts := filepath.Join(out, "compile_artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create artifacts directory: %v", err)
	}
	s.logf("%s: planning %s into %s", ToolPlan, specPath, out)
	outcome, err := planner.Compile(ctx, planner.Options{
		Spec: string(spec), Template: bo.Template,
		Model: bo.PlannerModel, ModelName: bo.Run.ModelName, ReasoningEffort: bo.ReasoningEffort, MaxOutputTokens: bo.MaxOutputTokens,
		MaxAttempts: bo.PlanMaxAttempts, Review: bo.Review, ReviewModelName: bo.ReviewModelName, MaxReviewCycles: 2,
		Env:          planner.Env{RepoFiles: repoFiles, Python: bo.Python},
		ArtifactsDir: artifacts, Progress: s.o.Log, RepoMap: repoMap,
	})
	var invalid *planner.InvalidPlanError
	switch {
	case errors.As(err, &invalid):
		lines := []string{fmt.Sprintf("%v; the errors are in %s and the attempts in %s:", err, filepath.Join(out, "validation_errors.json"), artifacts)}
		for _, i := range invalid.Issues {
			lines = append(lines, i.String())
		}
		if werr := planner.WriteValidationErrors(out, invalid.Issues); werr != nil {
			lines = append(lines, werr.Error())
		}
		return nil, nil, errors.New(s.o.Redact(strings.Join(lines, "\n")))
	case err != nil:
		return nil, nil, errors.New(s.o.Redact(fmt.Sprintf("plan: %v (artifacts in %s)", err, artifacts)))
	}
	written, err := planner.WritePlan(out, outcome.Manifest, planner.CompileInfo{
		CompileHash: outcome.Summary.CompileHash, Model: bo.Run.ModelName, ReasoningEffort: bo.ReasoningEffort,
		TemplateSHA256: outcome.Summary.TemplateSHA256, ValidatorVersion: planner.ValidatorVersion,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("write plan: %v", err)
	}
	res := &PlanResult{PlanDir: out, CompileHash: outcome.Summary.CompileHash, WorkOrders: []PlanWorkOrder{},
		Warnings: nonNil(outcome.Summary.Warnings), Tokens: outcome.Summary.Usage.TotalTokens}
	lines := []string{fmt.Sprintf("plan: %d work orders in %s (compile %s)", len(outcome.Manifest.WorkOrders), out, res.CompileHash)}
	for i, wo := range outcome.Manifest.WorkOrders {
		file := ""
		if i < len(written) {
			file = filepath.Join(out, written[i])
		}
		res.WorkOrders = append(res.WorkOrders, PlanWorkOrder{ID: wo.ID, Title: wo.Title, File: file})
		lines = append(lines, fmt.Sprintf("  %s %s", wo.ID, wo.Title))
	}
	lines = append(lines, fmt.Sprintf("next: factory_build with plan_dir=%s", out))
	return textResult(lines...), res, nil
}

func (s *Server) build(ctx context.Context, req *sdk.CallToolRequest, a BuildArgs) (*sdk.CallToolResult, *builder.Summary, error) {
	ctx, done := s.track(ctx)
	defer done()
	if missing := missingArgs(arg("repo", a.Repo), arg("out", a.Out), arg("llm_model", a.LLMModel)); missing != "" {
		return nil, nil, errors.New(missing)
	}
	switch {
	case a.Spec == "" && a.PlanDir == "":
		return nil, nil, errors.New("give spec (a specification to plan and build) or plan_dir (an existing plan)")
	case a.Spec != "" && a.PlanDir != "":
		return nil, nil, errors.New("spec and plan_dir cannot be used together: plan_dir builds an existing plan")
	}
	if err := checkBuildArgs(a.Jobs, a.MaxTokens, a.MaxCostUSD, a.Branch); err != nil {
		return nil, nil, err
	}
	repair, maxRepairs, err := repairArgs(a.Repair, a.MaxRepairs)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.paths(arg("repo", a.Repo), arg("out", a.Out), arg("spec", a.Spec), arg("plan_dir", a.PlanDir))
	if err != nil {
		return nil, nil, err
	}
	bo, err := s.o.Connect(ModelArgs{LLMModel: a.LLMModel, LLMBaseURL: a.LLMBaseURL, MaxTokens: a.MaxTokens, MaxCostUSD: a.MaxCostUSD, NoReview: a.NoReview})
	if err != nil {
		return nil, nil, err
	}
	bo.Repo, bo.Out, bo.SpecPath, bo.PlanDir, bo.Branch = p[0], p[1], p[2], p[3], a.Branch
	bo.Repair, bo.MaxRepairs = repair, maxRepairs
	sum, err := s.runBuild(ctx, req, ToolBuild, bo)
	if err != nil {
		return nil, nil, err
	}
	return textResult(buildLines(sum, ToolBuild)...), sum, nil
}

// checkBuildArgs checks the build arguments factory_build and
// factory_issue share.
func checkBuildArgs(jobs int, maxTokens int64, maxCostUSD float64, branch string) error {
	switch {
	case jobs < 0 || jobs > 1:
		return fmt.Errorf("jobs %d: this version runs work orders one at a time; leave jobs out or give 1", jobs)
	case maxTokens < 0 || maxCostUSD < 0:
		return errors.New("max_tokens and max_cost_usd cannot be negative")
	case builder.IsProtectedBranch(branch):
		return fmt.Errorf("branch %s: factory build never works on main or master; give another branch or leave it out", branch)
	}
	return nil
}

// DefaultMaxRepairs is max_repairs when it is left out, as `factory build
// --max-repairs`.
const DefaultMaxRepairs = 2

// repairArgs reads factory_build's repair ("auto", the default, or "off")
// and max_repairs (default DefaultMaxRepairs) as builder.Options.Repair
// and MaxRepairs, as `factory build --repair --max-repairs` does.
func repairArgs(repair string, maxRepairs *int) (bool, int, error) {
	n := DefaultMaxRepairs
	if maxRepairs != nil {
		n = *maxRepairs
	}
	switch {
	case repair != "" && repair != "auto" && repair != "off":
		return false, 0, fmt.Errorf("repair must be auto or off, got %q", repair)
	case n < 0:
		return false, 0, fmt.Errorf("max_repairs must not be negative, got %d", n)
	}
	return repair != "off", n, nil
}

// runBuild runs the build bo for the tool call req, with a progress
// notification per update when the request carries a progress token. A
// refusal, or a build that could not start, is an error; any verdict is a
// summary.
func (s *Server) runBuild(ctx context.Context, req *sdk.CallToolRequest, tool string, bo builder.Options) (*builder.Summary, error) {
	bo.Progress, bo.Run.Progress = s.o.Log, s.o.Log
	if token := req.Params.GetProgressToken(); token != nil {
		bo.OnUpdate = s.progress(ctx, req, token)
	}
	s.logf("%s: building %s", tool, bo.Repo)
	sum, err := builder.Run(ctx, bo)
	var refused *builder.RefusedError
	if errors.As(err, &refused) {
		return nil, errors.New(s.o.Redact(refused.Msg))
	}
	if sum == nil {
		return nil, errors.New(s.o.Redact(fmt.Sprint(err)))
	}
	if sum.WorkOrders == nil {
		sum.WorkOrders = []builder.WorkOrder{}
	}
	sum.Error = s.o.Redact(sum.Error)
	if err != nil && sum.Error == "" {
		sum.Error = s.o.Redact(err.Error())
	}
	s.logf("%s: %s: verdict %s %s", tool, bo.Repo, sum.Verdict, sum.Error)
	return sum, nil
}

// progress sends one MCP progress notification per build update.
func (s *Server) progress(ctx context.Context, req *sdk.CallToolRequest, token any) func(builder.Update) {
	var mu sync.Mutex
	n := 0
	return func(u builder.Update) {
		mu.Lock()
		defer mu.Unlock()
		n++
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(n), Message: s.o.Redact(updateMessage(u)),
		})
	}
}

// updateMessage is one line about a build update.
func updateMessage(u builder.Update) string {
	if u.Planning {
		return "planning: the planner is compiling the spec into work orders"
	}
	wo := u.WO
	if u.Total > 0 {
		wo = fmt.Sprintf("%s (%d/%d) %s", u.WO, u.Index, u.Total, u.Title)
	}
	switch {
	case u.Done && u.Commit != "":
		return fmt.Sprintf("%s: %s, committed %s", wo, u.Verdict, gitws.ShortHash(u.Commit))
	case u.Done:
		msg := fmt.Sprintf("%s: %s", wo, u.Verdict)
		if u.Stage != "" {
			msg += " (" + u.Stage + ")"
		}
		return msg
	case len(u.Command) > 0:
		return fmt.Sprintf("%s attempt %d: running %s", wo, u.Attempt, strings.Join(u.Command, " "))
	case u.Verdict != "":
		return fmt.Sprintf("%s attempt %d: %s %s, next %s", wo, u.Attempt, u.Verdict, u.Stage, orStart(u.Node))
	}
	return fmt.Sprintf("%s attempt %d: %s", wo, u.Attempt, orStart(u.Node))
}

func orStart(node string) string {
	if node == "" {
		return "between attempts"
	}
	return node
}

// buildLines is the build summary of a call of tool as text.
func buildLines(sum *builder.Summary, tool string) []string {
	lines := []string{fmt.Sprintf("verdict: %s", sum.Verdict), fmt.Sprintf("branch: %s", sum.Branch), fmt.Sprintf("plan: %s (%s)", sum.PlanDir, sum.PlanSource)}
	for _, w := range sum.WorkOrders {
		line := fmt.Sprintf("  %s %s", w.ID, w.Outcome)
		switch {
		case w.Commit != "":
			line += " " + gitws.ShortHash(w.Commit)
		case w.Stage != "":
			line += " " + w.Stage
		}
		line += "  " + w.Title
		if w.BriefPath != "" {
			line += " (failure brief: " + w.BriefPath + ")"
		}
		lines = append(lines, line)
	}
	cost := "cost unknown"
	if sum.CostUSD != nil {
		cost = fmt.Sprintf("$%.4f", *sum.CostUSD)
	}
	lines = append(lines, fmt.Sprintf("spent: %d tokens, %s", sum.Tokens, cost))
	if sum.Error != "" {
		lines = append(lines, "error: "+sum.Error)
	}
	if sum.Verdict != builder.VerdictPass && sum.Verdict != builder.VerdictPlanInvalid {
		lines = append(lines, "the repository is at the last commit; call "+tool+" again with the same arguments to resume")
	}
	if sum.BuildDir != "" {
		lines = append(lines, "build summary: "+filepath.Join(sum.BuildDir, "build_summary.json"))
	}
	return lines
}

func (s *Server) status(ctx context.Context, _ *sdk.CallToolRequest, a StatusArgs) (*sdk.CallToolResult, *builder.Status, error) {
	ctx, done := s.track(ctx)
	defer done()
	if a.Repo == "" {
		return nil, nil, errors.New("repo is required: the repository a build ran in")
	}
	p, err := s.paths(arg("repo", a.Repo))
	if err != nil {
		return nil, nil, err
	}
	st, err := builder.ReadStatus(ctx, p[0])
	if errors.Is(err, builder.ErrNoBuild) {
		return nil, nil, fmt.Errorf("%v (run factory_build first)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	if st.WorkOrders == nil {
		st.WorkOrders = []builder.WorkOrder{}
	}
	passed := 0
	lines := []string{fmt.Sprintf("repository: %s", st.Repo), fmt.Sprintf("branch: %s", st.Branch), fmt.Sprintf("plan: %s %s (%s)", st.PlanHash, st.PlanDir, st.PlanSource)}
	for _, w := range st.WorkOrders {
		if w.Outcome == builder.OutcomePassed {
			passed++
		}
		lines = append(lines, fmt.Sprintf("  %s %s %s  %s", w.ID, w.Outcome, gitws.ShortHash(w.Commit)+w.Stage, w.Title))
	}
	state := "in progress"
	if st.Complete {
		state = "complete"
	}
	lines = append(lines, fmt.Sprintf("%d/%d work orders passed (%s)", passed, len(st.WorkOrders), state))
	return textResult(lines...), st, nil
}

// trackedFiles are the tracked files of the repository dir ("" → none).
func trackedFiles(ctx context.Context, dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("repo: %v", err)
	}
	files, err := repo.Files(ctx)
	if err != nil {
		return nil, fmt.Errorf("repo: %v", err)
	}
	return files, nil
}

// plannerMap is the repository map of HEAD of dir ranked for spec, as
// 'factory plan' shows it; "" without a repository or budget.
func plannerMap(ctx context.Context, dir, spec string, tokens int) (string, error) {
	if dir == "" || tokens <= 0 {
		return "", nil
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("repo: %v", err)
	}
	v, _, err := gitsrc.ForSpec(ctx, repo, spec, tokens)
	return v.Text, err
}

// missingArgs names the required arguments that are empty, or "".
func missingArgs(args ...*[2]string) string {
	var missing []string
	for _, a := range args {
		if strings.TrimSpace(a[1]) == "" {
			missing = append(missing, a[0])
		}
	}
	switch len(missing) {
	case 0:
		return ""
	case 1:
		return missing[0] + " is required"
	}
	return strings.Join(missing[:len(missing)-1], ", ") + " and " + missing[len(missing)-1] + " are required"
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
