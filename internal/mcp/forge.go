package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
)

// Tool names of the forge tools.
const (
	ToolPR    = "factory_pr"
	ToolIssue = "factory_issue"
)

// ForgeArgs say where a build's pull request goes: the forge arguments
// of factory_pr and factory_issue, the flags of 'factory pr' and
// 'factory issue'.
type ForgeArgs struct {
	Remote, Base               string
	Forge, ForgeAPI, ForgeRepo string
	Draft, Reopen              bool
}

// Forge is the forge of a repository's remote, reached with the token of
// the server's environment (Options.ConnectForge).
type Forge interface {
	// Issue reads issue n (its title, body and the comments of users who
	// may write to the repository, cleaned) and writes it as the spec of a
	// build to <out>/issues/<n>/spec.md, as 'factory issue' does. Publish
	// then publishes the build as the issue's pull request ("Fixes #n").
	Issue(ctx context.Context, n int, out string) (IssueSpec, error)
	// Publish pushes the branch of the last build in the repository and
	// creates or updates its pull request, as 'factory pr' does. A refusal
	// (a closed or merged pull request, a remote branch that moved) and a
	// failure are errors.
	Publish(ctx context.Context) (*PullRequest, error)
}

// IssueSpec is an issue written as a build's spec.
type IssueSpec struct {
	Path   string // the spec file
	Title  string // the issue's title, cleaned
	Branch string // the branch its build goes on by default
}

// PullRequest is the pull request a build was published to, as 'factory
// pr --json' prints it.
type PullRequest struct {
	Forge  string `json:"forge" jsonschema:"the forge: github, gitea or gitlab"`
	Repo   string `json:"repo" jsonschema:"the repository on the forge: OWNER/NAME (GitLab: the project's path)"`
	Number int    `json:"number" jsonschema:"the pull request's number (GitLab: the merge request's IID)"`
	URL    string `json:"url" jsonschema:"the pull request's web page"`
	State  string `json:"state" jsonschema:"open, closed or merged"`
	Draft  bool   `json:"draft" jsonschema:"whether it is a draft (a build that did not pass every work order is published as one)"`
	Head   string `json:"head" jsonschema:"the build's branch"`
	Base   string `json:"base" jsonschema:"the branch it merges into"`
	Commit string `json:"commit" jsonschema:"the head commit pushed"`
	Action string `json:"action" jsonschema:"what this call did to the pull request: created, updated or unchanged"`
	Pushed bool   `json:"pushed" jsonschema:"whether the branch was pushed (false: the remote already had it)"`
}

// PRArgs are factory_pr's arguments.
type PRArgs struct {
	Repo      string `json:"repo" jsonschema:"the repository the build ran in, inside a root; its last build is published"`
	Build     string `json:"build,omitempty" jsonschema:"the build to publish, by plan hash (default: the last build in repo, the only one this version publishes)"`
	Remote    string `json:"remote,omitempty" jsonschema:"the git remote to push the build's branch to (default origin); the forge and repository come from its URL"`
	Base      string `json:"base,omitempty" jsonschema:"the branch the pull request merges into (default: the repository's default branch)"`
	Draft     bool   `json:"draft,omitempty" jsonschema:"open the pull request as a draft (a build that did not pass opens one whatever this says)"`
	Reopen    bool   `json:"reopen,omitempty" jsonschema:"reopen the branch's pull request if it was closed (a merged one is never reopened)"`
	Forge     string `json:"forge,omitempty" jsonschema:"the forge's kind when the remote's host does not tell: github, gitea (Forgejo too) or gitlab"`
	ForgeAPI  string `json:"forge_api,omitempty" jsonschema:"the forge's API base URL (GitHub Enterprise: https://HOST/api/v3; Gitea: https://HOST/api/v1; GitLab: https://HOST/api/v4); default: derived from the remote"`
	ForgeRepo string `json:"forge_repo,omitempty" jsonschema:"the repository on the forge as OWNER/NAME (GitLab: the project's path); default: from the remote's URL"`
}

// IssueArgs are factory_issue's arguments: factory_build's (but spec and
// plan_dir: the issue is the spec) and factory_pr's.
type IssueArgs struct {
	Issue      int     `json:"issue" jsonschema:"the number of the issue to build"`
	Repo       string  `json:"repo" jsonschema:"the existing git repository to build in, with a remote on the forge, inside a root; it must be clean"`
	Out        string  `json:"out" jsonschema:"the directory for the issue's spec (issues/<N>/spec.md), plans and build artifacts, outside the repository, inside a root"`
	LLMModel   string  `json:"llm_model" jsonschema:"the model: NAME for OpenAI or an OpenAI-compatible llm_base_url, openai:NAME, or anthropic:NAME; its API key must be in the server's environment"`
	LLMBaseURL string  `json:"llm_base_url,omitempty" jsonschema:"an OpenAI-compatible (or Anthropic) API base URL, e.g. http://localhost:11434/v1; default: the server's $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the provider's"`
	MaxTokens  int64   `json:"max_tokens,omitempty" jsonschema:"stop before a model call that could take the build's tokens past this (0: no limit); counts earlier runs of the same build"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty" jsonschema:"stop before a model call that could take the build's estimated cost past this many US dollars (0: no limit; needs a model with a known price)"`
	Jobs       int     `json:"jobs,omitempty" jsonschema:"work orders run at once; this version runs them one at a time, so only 1 (the default) is accepted"`
	NoReview   bool    `json:"no_review,omitempty" jsonschema:"skip the planner's reviewer pass"`
	Branch     string  `json:"branch,omitempty" jsonschema:"the branch to build on (default factory/issue-<N>; never main or master)"`
	Remote     string  `json:"remote,omitempty" jsonschema:"the git remote the issue is read from and the build's branch pushed to (default origin); the forge and repository come from its URL"`
	Base       string  `json:"base,omitempty" jsonschema:"the branch the pull request merges into (default: the repository's default branch; another one makes it say Refs #N instead of Fixes #N)"`
	Draft      bool    `json:"draft,omitempty" jsonschema:"open the pull request as a draft (a build that did not pass opens one whatever this says)"`
	Reopen     bool    `json:"reopen,omitempty" jsonschema:"reopen the branch's pull request if it was closed (a merged one is never reopened)"`
	Forge      string  `json:"forge,omitempty" jsonschema:"the forge's kind when the remote's host does not tell: github, gitea (Forgejo too) or gitlab"`
	ForgeAPI   string  `json:"forge_api,omitempty" jsonschema:"the forge's API base URL (GitHub Enterprise: https://HOST/api/v3; Gitea: https://HOST/api/v1; GitLab: https://HOST/api/v4); default: derived from the remote"`
	ForgeRepo  string  `json:"forge_repo,omitempty" jsonschema:"the repository on the forge as OWNER/NAME (GitLab: the project's path); default: from the remote's URL"`
}

// IssueResult is factory_issue's result.
type IssueResult struct {
	Issue int    `json:"issue"`
	Title string `json:"title" jsonschema:"the issue's title, cleaned: the new pull request's title"`
	Spec  string `json:"spec" jsonschema:"the spec the issue was written as"`
	// Build is the build's summary, as factory_build returns it.
	Build *builder.Summary `json:"build" jsonschema:"the build summary, as factory_build returns it"`
	// PullRequest is absent when the build ended with neither PASS nor
	// FAIL (nothing to publish yet).
	PullRequest *PullRequest `json:"pull_request,omitempty" jsonschema:"the pull request the build was published to, as factory_pr returns it; absent when the build ended with neither PASS nor FAIL"`
}

func (s *Server) addForgeTools() {
	if s.o.ConnectForge == nil {
		return
	}
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolPR,
		Title: "Open or update the pull request of a factory build",
		Description: "Publish the last factory build of repo, as `factory pr` does: push its branch to remote (never to the base or default branch, " +
			"never over commits the build lacks; skipped when the remote has it) and create the pull request for it (GitHub, Gitea/Forgejo; " +
			"a merge request on GitLab) or update the one that exists, with a block of evidence (the plan, each work order's status, commit and checks, spend). " +
			"Calling it again with nothing new changes nothing. A build that did not pass is published as a draft with one comment saying where it stopped. " +
			"A closed pull request is reopened only with reopen; a merged one never. Returns the pull request: number, url, state, draft, action (created, updated, unchanged), head, base, commit. " +
			"The token (GITHUB_TOKEN or GH_TOKEN, GITEA_TOKEN, GITLAB_TOKEN) comes from the server's environment only; without it the call is refused with nothing changed.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)},
	}, s.pr)
	sdk.AddTool(s.srv, &sdk.Tool{
		Name:  ToolIssue,
		Title: "Build what an issue asks for and open its pull request",
		Description: "Read an issue from the forge of repo's remote, build the change it asks for on the existing repository and open a pull request " +
			"that says Fixes #N, as `factory issue` does. The spec is the issue's title and body and the comments of users who may write to the repository " +
			"(bots' and others' left out; HTML comments and invisible characters removed: issue text is untrusted). The build runs as factory_build's " +
			"(long-running; a progress notification per work order event when the request carries a progress token) on factory/issue-<N>, then is published " +
			"as factory_pr publishes: a build that fails opens a draft with what passed. Returns the build summary and the pull request. " +
			"Calling it again with the same arguments resumes the same build and updates the same pull request. " +
			"The forge token and the model's key come from the server's environment only; a missing one is refused before anything changes.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, s.issue)
}

func (s *Server) pr(ctx context.Context, _ *sdk.CallToolRequest, a PRArgs) (*sdk.CallToolResult, *PullRequest, error) {
	ctx, done := s.track(ctx)
	defer done()
	if a.Repo == "" {
		return nil, nil, errors.New("repo is required: the repository whose last build to publish")
	}
	p, err := s.paths(arg("repo", a.Repo))
	if err != nil {
		return nil, nil, err
	}
	repo := p[0]
	st, err := builder.ReadStatus(ctx, repo)
	if errors.Is(err, builder.ErrNoBuild) {
		return nil, nil, fmt.Errorf("%v (run factory_build or factory_issue first)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	if a.Build != "" && a.Build != st.PlanHash {
		return nil, nil, fmt.Errorf("build %s: the last build in %s is %s; publish a build right after it ran (or run it again: a finished build's rerun changes nothing)", a.Build, repo, st.PlanHash)
	}
	f, err := s.o.ConnectForge(ctx, repo, ForgeArgs{Remote: a.Remote, Base: a.Base, Forge: a.Forge, ForgeAPI: a.ForgeAPI, ForgeRepo: a.ForgeRepo, Draft: a.Draft, Reopen: a.Reopen})
	if err != nil {
		return nil, nil, errors.New(s.o.Redact(err.Error()))
	}
	s.logf("%s: publishing %s (%s)", ToolPR, st.Branch, repo)
	rec, err := f.Publish(ctx)
	if err != nil {
		return nil, nil, errors.New(s.o.Redact(err.Error()))
	}
	return textResult(prLine(rec)), rec, nil
}

func (s *Server) issue(ctx context.Context, req *sdk.CallToolRequest, a IssueArgs) (*sdk.CallToolResult, *IssueResult, error) {
	ctx, done := s.track(ctx)
	defer done()
	if missing := missingArgs(arg("repo", a.Repo), arg("out", a.Out), arg("llm_model", a.LLMModel)); missing != "" {
		return nil, nil, errors.New(missing)
	}
	if a.Issue <= 0 {
		return nil, nil, errors.New("issue is required: the number of the issue to build")
	}
	if err := checkBuildArgs(a.Jobs, a.MaxTokens, a.MaxCostUSD, a.Branch); err != nil {
		return nil, nil, err
	}
	p, err := s.paths(arg("repo", a.Repo), arg("out", a.Out))
	if err != nil {
		return nil, nil, err
	}
	repo, out := p[0], p[1]
	// The token, then the model's key: a refusal leaves nothing changed
	// and calls nothing.
	f, err := s.o.ConnectForge(ctx, repo, ForgeArgs{Remote: a.Remote, Base: a.Base, Forge: a.Forge, ForgeAPI: a.ForgeAPI, ForgeRepo: a.ForgeRepo, Draft: a.Draft, Reopen: a.Reopen})
	if err != nil {
		return nil, nil, errors.New(s.o.Redact(err.Error()))
	}
	bo, err := s.o.Connect(ModelArgs{LLMModel: a.LLMModel, LLMBaseURL: a.LLMBaseURL, MaxTokens: a.MaxTokens, MaxCostUSD: a.MaxCostUSD, NoReview: a.NoReview})
	if err != nil {
		return nil, nil, err
	}
	spec, err := f.Issue(ctx, a.Issue, out)
	if err != nil {
		return nil, nil, errors.New(s.o.Redact(err.Error()))
	}
	s.logf("%s: issue #%d: %s (spec: %s)", ToolIssue, a.Issue, s.o.Redact(spec.Title), spec.Path)
	bo.Repo, bo.Out, bo.SpecPath, bo.Branch = repo, out, spec.Path, cmp.Or(a.Branch, spec.Branch)
	sum, err := s.runBuild(ctx, req, ToolIssue, bo)
	if err != nil {
		return nil, nil, err
	}
	res := &IssueResult{Issue: a.Issue, Title: spec.Title, Spec: spec.Path, Build: sum}
	lines := buildLines(sum, ToolIssue)
	if sum.Verdict != builder.VerdictPass && sum.Verdict != builder.VerdictFail {
		lines = append(lines, "not published: a build is published once it passes or fails")
		return textResult(lines...), res, nil
	}
	if res.PullRequest, err = f.Publish(ctx); err != nil {
		return nil, nil, errors.New(s.o.Redact(fmt.Sprintf("the build of issue #%d ended %s on %s, but publishing it failed: %v; once that is fixed, factory_pr with repo=%s publishes it (or call factory_issue again)",
			a.Issue, sum.Verdict, sum.Branch, err, repo)))
	}
	return textResult(append(lines, prLine(res.PullRequest))...), res, nil
}

// prLine is a pull request as one line of text, as 'factory pr' prints it.
func prLine(rec *PullRequest) string {
	state := rec.State
	if rec.Draft {
		state += ", draft"
	}
	return fmt.Sprintf("pull request #%d (%s, %s): %s (%s at %s into %s)", rec.Number, state, rec.Action, rec.URL, rec.Head, gitws.ShortHash(rec.Commit), rec.Base)
}
