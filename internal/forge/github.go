package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// githubClient speaks GitHub's REST API v3 (github.com or Enterprise at
// https://HOST/api/v3) and, to change a pull request's draft state, its
// GraphQL API.
type githubClient struct {
	a           *api
	owner, name string
	repoPath    string // /repos/OWNER/NAME, escaped
	graphql     string // the GraphQL endpoint's URL
}

func newGitHub(a *api) (*githubClient, error) {
	if err := checkRepo(GitHub, a.target.Repo); err != nil {
		return nil, fmt.Errorf("--forge-repo: %v", err)
	}
	owner, name, _ := strings.Cut(a.target.Repo, "/")
	return &githubClient{
		a: a, owner: owner, name: name,
		repoPath: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name),
		graphql:  githubGraphQL(a.base.String()),
	}, nil
}

// githubGraphQL is the GraphQL endpoint next to a REST API URL:
// https://api.github.com/graphql, https://HOST/api/graphql for Enterprise
// (REST at /api/v3), API/graphql otherwise.
func githubGraphQL(api string) string {
	if rest, ok := strings.CutSuffix(api, "/api/v3"); ok {
		return rest + "/api/graphql"
	}
	return api + "/graphql"
}

func (c *githubClient) Target() Target { return c.a.target }

// The parts of GitHub's answers factory reads.
type (
	githubUser struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	}
	githubRef struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	}
	githubPull struct {
		Number    int       `json:"number"`
		NodeID    string    `json:"node_id"`
		HTMLURL   string    `json:"html_url"`
		State     string    `json:"state"`
		Draft     bool      `json:"draft"`
		Title     string    `json:"title"`
		Body      string    `json:"body"`
		MergedAt  *string   `json:"merged_at"`
		Head      githubRef `json:"head"`
		Base      githubRef `json:"base"`
		CreatedAt time.Time `json:"created_at"`
	}
	githubComment struct {
		ID           int64      `json:"id"`
		User         githubUser `json:"user"`
		Body         string     `json:"body"`
		Path         string     `json:"path"`
		Line         *int       `json:"line"`
		OriginalLine *int       `json:"original_line"`
		CreatedAt    time.Time  `json:"created_at"`
	}
)

func (u githubUser) user() User {
	return User{Login: u.Login, Bot: u.Type == "Bot" || strings.HasSuffix(u.Login, "[bot]")}
}

func (p *githubPull) pr() (*PR, error) {
	if err := positive("pull request", p.Number); err != nil {
		return nil, err
	}
	out := &PR{Number: p.Number, URL: p.HTMLURL, Draft: p.Draft, Title: p.Title, Body: p.Body,
		Head: p.Head.Ref, Base: p.Base.Ref, HeadSHA: p.Head.SHA, NodeID: p.NodeID}
	switch {
	case p.MergedAt != nil && *p.MergedAt != "":
		out.State = Merged
	case p.State == "open":
		out.State = Open
	case p.State == "closed":
		out.State = Closed
	default:
		return nil, fmt.Errorf("pull request #%d has the unknown state %q", p.Number, bound(oneLine(p.State), 40))
	}
	return out, nil
}

func (c *githubComment) comment(review bool) (Comment, error) {
	if c.ID <= 0 {
		return Comment{}, fmt.Errorf("a comment with the id %d", c.ID)
	}
	out := Comment{ID: c.ID, Author: c.User.user(), Body: c.Body, Created: c.CreatedAt}
	if review {
		out.Review, out.Path = true, c.Path
		if c.Line != nil {
			out.Line = *c.Line
		} else if c.OriginalLine != nil {
			out.Line = *c.OriginalLine
		}
	}
	return out, nil
}

// openClosed maps an issue's state: "open" (or alt, GitLab's "opened")
// and "closed".
func openClosed(s, alt string) (State, error) {
	switch s {
	case "open", alt:
		return Open, nil
	case "closed":
		return Closed, nil
	}
	return "", fmt.Errorf("the unknown state %q", bound(oneLine(s), 40))
}

func (c *githubClient) DefaultBranch(ctx context.Context) (string, error) {
	return restDefaultBranch(ctx, c.a, c.repoPath)
}

func (c *githubClient) FindPR(ctx context.Context, head string) (*PR, error) {
	if head == "" {
		return nil, fmt.Errorf("FindPR: no branch")
	}
	q := url.Values{"state": {"all"}, "head": {c.owner + ":" + head}, "sort": {"created"}, "direction": {"desc"}, "per_page": {"100"}}
	// The newest is on the first page: read only that one.
	var pulls []githubPull
	if err := c.a.get(ctx, c.repoPath+"/pulls", q, &pulls); err != nil {
		return nil, err
	}
	return newestGitHub(pulls, c.a.target.Repo, head)
}

// newestGitHub is the pull request with the highest number whose head is
// branch head of repo, not of a fork (the head filter is the forge's;
// checked again; a renamed repository's pull requests name its new name
// on both sides).
func newestGitHub(pulls []githubPull, repo, head string) (*PR, error) {
	var best *PR
	for i := range pulls {
		p := &pulls[i]
		if p.Head.Ref != head || p.Head.Repo == nil {
			continue
		}
		if name := p.Head.Repo.FullName; !strings.EqualFold(name, repo) && (p.Base.Repo == nil || !strings.EqualFold(name, p.Base.Repo.FullName)) {
			continue
		}
		pr, err := p.pr()
		if err != nil {
			return nil, fmt.Errorf("github: %v", err)
		}
		if best == nil || pr.Number > best.Number {
			best = pr
		}
	}
	return best, nil
}

func (c *githubClient) pull(ctx context.Context, c2 call) (*PR, error) {
	return restPull[githubPull](ctx, c.a, c2)
}

func (c *githubClient) CreatePR(ctx context.Context, p NewPR) (*PR, error) {
	in := map[string]any{"title": p.Title, "body": p.Body, "head": p.Head, "base": p.Base, "draft": p.Draft}
	return c.pull(ctx, call{method: http.MethodPost, path: c.repoPath + "/pulls", in: in})
}

func (c *githubClient) UpdatePR(ctx context.Context, number int, u PRUpdate) (*PR, error) {
	if err := positive("pull request", number); err != nil {
		return nil, err
	}
	path := c.repoPath + "/pulls/" + strconv.Itoa(number)
	patch := map[string]any{}
	if u.Title != nil {
		patch["title"] = *u.Title
	}
	if u.Body != nil {
		patch["body"] = *u.Body
	}
	if u.State != nil {
		switch *u.State {
		case Open, Closed:
			patch["state"] = string(*u.State)
		default:
			return nil, fmt.Errorf("UpdatePR: a pull request cannot be set %q", *u.State)
		}
	}
	var pr *PR
	var err error
	if len(patch) > 0 {
		pr, err = c.pull(ctx, call{method: http.MethodPatch, path: path, in: patch})
	} else {
		pr, err = c.pull(ctx, call{method: http.MethodGet, path: path})
	}
	if err != nil {
		return nil, err
	}
	if u.Draft != nil && *u.Draft != pr.Draft {
		pr.Draft, err = c.setDraft(ctx, pr.NodeID, *u.Draft)
		if err != nil {
			return nil, err
		}
	}
	return pr, nil
}

// setDraft marks a pull request ready for review (draft false) or turns it
// back into a draft: only GitHub's GraphQL API does either.
func (c *githubClient) setDraft(ctx context.Context, nodeID string, draft bool) (bool, error) {
	if nodeID == "" {
		return false, fmt.Errorf("github: the pull request has no node_id, which GraphQL needs to change its draft state")
	}
	field := "markPullRequestReadyForReview"
	if draft {
		field = "convertPullRequestToDraft"
	}
	in := map[string]any{
		"query":     "mutation($id: ID!) { " + field + "(input: {pullRequestId: $id}) { pullRequest { isDraft } } }",
		"variables": map[string]any{"id": nodeID},
	}
	r, err := c.a.send(ctx, http.MethodPost, c.graphql, in)
	if err != nil {
		return false, err
	}
	isDraft, err := decodeGraphQLDraft(r.body, field)
	if err != nil {
		if fe, ok := err.(*Error); ok {
			fe.Kind, fe.Method, fe.Path = GitHub, http.MethodPost, c.a.relPath(mustParse(c.graphql))
			if tok := c.a.target.Token; tok != "" {
				fe.Message = strings.ReplaceAll(fe.Message, tok, "[REDACTED]")
			}
			return false, fe
		}
		return false, fmt.Errorf("github POST graphql %s: %v", field, err)
	}
	return isDraft, nil
}

// decodeGraphQLDraft reads a draft mutation's answer: its isDraft, or its
// errors as an *Error (GraphQL answers 200 with errors; their type says
// which status it would have been).
func decodeGraphQLDraft(body []byte, field string) (bool, error) {
	var out struct {
		Data map[string]*struct {
			PullRequest *struct {
				IsDraft *bool `json:"isDraft"`
			} `json:"pullRequest"`
		} `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := decodeJSON(body, &out); err != nil {
		return false, err
	}
	if len(out.Errors) > 0 {
		status := http.StatusUnprocessableEntity
		switch out.Errors[0].Type {
		case "NOT_FOUND":
			status = http.StatusNotFound
		case "FORBIDDEN":
			status = http.StatusForbidden
		case "RATE_LIMITED":
			status = http.StatusTooManyRequests
		}
		return false, &Error{Status: status, Message: bound(oneLine(out.Errors[0].Message), maxMessage)}
	}
	d := out.Data[field]
	if d == nil || d.PullRequest == nil || d.PullRequest.IsDraft == nil {
		return false, fmt.Errorf("the answer has no %s.pullRequest.isDraft", field)
	}
	return *d.PullRequest.IsDraft, nil
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		return &url.URL{Path: s}
	}
	return u
}

func (c *githubClient) Comment(ctx context.Context, number int, pr bool, body string) (*Comment, error) {
	return restComment[githubComment](ctx, c.a, c.repoPath, number, body)
}

func (c *githubClient) Issue(ctx context.Context, number int) (*Issue, error) {
	return restIssueAt[githubUser](ctx, c.a, c.repoPath, number)
}

func (c *githubClient) Comments(ctx context.Context, number int, pr bool) ([]Comment, error) {
	if err := positive("issue or pull request", number); err != nil {
		return nil, err
	}
	q := url.Values{"per_page": {"100"}}
	n := strconv.Itoa(number)
	issue, err := list[githubComment](ctx, c.a, c.repoPath+"/issues/"+n+"/comments", q, nil)
	if err != nil {
		return nil, err
	}
	var review []githubComment
	if pr {
		if review, err = list[githubComment](ctx, c.a, c.repoPath+"/pulls/"+n+"/comments", q, nil); err != nil {
			return nil, err
		}
	}
	return mergeComments(GitHub, issue, review)
}

// sortComments orders comments oldest first, by id among equals.
func sortComments(cs []Comment) {
	slices.SortFunc(cs, func(a, b Comment) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

func (c *githubClient) CanWrite(ctx context.Context, login string) (bool, error) {
	return restCanWrite(ctx, c.a, c.repoPath, login)
}

// writes reports whether a permission or role name may push.
func writes(p string) bool {
	switch p {
	case "admin", "maintain", "write", "owner":
		return true
	}
	return false
}
