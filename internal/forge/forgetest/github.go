package forgetest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GitHub is a scripted GitHub API on 127.0.0.1: the REST v3 endpoints
// forge's client uses, and the GraphQL mutations that change a pull
// request's draft state, over state kept in memory (repositories,
// pull requests and issues sharing their numbers, comments, review
// comments, users and their permissions). Its answers carry GitHub's field
// names. Every request needs "Authorization: Bearer TOKEN" (or "token
// TOKEN"); others get 401. URL is the API's base, like
// https://api.github.com; URL+"/api/v3" serves the same, like GitHub
// Enterprise (its GraphQL at URL+"/api/graphql").
type GitHub struct {
	URL   string
	Token string
	// PageSize bounds every list's page (default 2), whatever per_page
	// asks, so that clients follow pages.
	PageSize int
	// Branch, when set, says whether a branch exists and its commit; a pull
	// request with a head or base it refuses gets GitHub's 422. Nil: every
	// branch exists, with a made-up commit.
	Branch func(repo, branch string) (sha string, ok bool)

	srv   *httptest.Server
	s     script
	repos map[string]*githubRepo // by lower-case OWNER/NAME
	users map[string]*githubUser // by login
}

// GitHubPR is a pull request as the scripted GitHub holds it.
type GitHubPR struct {
	Repo    string // OWNER/NAME
	Number  int
	NodeID  string
	Title   string
	Body    string
	Head    string // branch
	Base    string // branch
	HeadSHA string
	State   string // open, closed
	Draft   bool
	Merged  bool
	Author  string
	Created time.Time
}

// GitHubComment is a comment on an issue's or pull request's conversation,
// or (Review) on a line of a pull request's diff.
type GitHubComment struct {
	ID      int64
	Number  int
	Author  string
	Body    string
	Review  bool
	Path    string
	Line    int
	Created time.Time
}

type githubRepo struct {
	id            int64
	owner, name   string
	defaultBranch string
	number        int
	pulls         map[int]*GitHubPR
	issues        map[int]*githubIssue
	comments      []*GitHubComment
}

type githubIssue struct {
	number        int
	title, body   string
	author, state string
	created       time.Time
}

type githubUser struct {
	id         int64
	login      string
	bot        bool
	permission string // admin, maintain, write, triage, read, none; "" read
}

// NewGitHub starts a scripted GitHub that takes token; it stops when t
// ends.
func NewGitHub(t testing.TB, token string) *GitHub {
	g := &GitHub{Token: token, PageSize: 2, repos: map[string]*githubRepo{}, users: map[string]*githubUser{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	t.Cleanup(g.srv.Close)
	return g
}

// Client is an http.Client for the server.
func (g *GitHub) Client() *http.Client { return g.srv.Client() }

// Requests returns the requests received so far, in order.
func (g *GitHub) Requests() []Request { return g.s.requests() }

// FailNext makes the next request fail with status and header (GitHub's
// body for that status: 403 with X-RateLimit-Remaining 0 is the rate
// limit's).
func (g *GitHub) FailNext(status int, header http.Header) {
	g.s.fail(Failure{Status: status, Header: header})
}

// Fail queues f: the next request it matches fails.
func (g *GitHub) Fail(f Failure) { g.s.fail(f) }

// AddRepo adds OWNER/NAME with its default branch.
func (g *GitHub) AddRepo(owner, name, defaultBranch string) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	id, _ := g.s.next()
	g.repos[strings.ToLower(owner+"/"+name)] = &githubRepo{id: id, owner: owner, name: name, defaultBranch: defaultBranch,
		pulls: map[int]*GitHubPR{}, issues: map[int]*githubIssue{}}
	g.userLocked(owner)
}

// AddUser makes login known, a bot (type "Bot") or not; a login ending in
// [bot] is a bot anyway.
func (g *GitHub) AddUser(login string, bot bool) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	g.userLocked(login).bot = bot || strings.HasSuffix(login, "[bot]")
}

// SetPermission gives login a permission on every repository: admin,
// maintain, write, triage, read or none (a known user without one reads).
func (g *GitHub) SetPermission(login, permission string) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	g.userLocked(login).permission = permission
}

func (g *GitHub) userLocked(login string) *githubUser {
	u := g.users[login]
	if u == nil {
		id, _ := g.s.next()
		u = &githubUser{id: id, login: login, bot: strings.HasSuffix(login, "[bot]")}
		g.users[login] = u
	}
	return u
}

func (g *GitHub) repoLocked(repo string) *githubRepo {
	r := g.repos[strings.ToLower(repo)]
	if r == nil {
		panic("forgetest: no repository " + repo + "; AddRepo first")
	}
	return r
}

// AddIssue opens an issue on repo (OWNER/NAME) and returns its number.
func (g *GitHub) AddIssue(repo, author, title, body string) int {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	r := g.repoLocked(repo)
	g.userLocked(author)
	r.number++
	_, at := g.s.next()
	r.issues[r.number] = &githubIssue{number: r.number, title: title, body: body, author: author, state: "open", created: at}
	return r.number
}

// AddPR adds a pull request as it is given (Number, NodeID and Created
// are filled in) and returns its number: for a state no client made, such
// as merged.
func (g *GitHub) AddPR(p GitHubPR) int {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	r := g.repoLocked(p.Repo)
	r.number++
	p.Number = r.number
	id, at := g.s.next()
	p.NodeID = githubNodeID(id)
	p.Created = at
	if p.State == "" {
		p.State = "open"
	}
	if p.HeadSHA == "" {
		p.HeadSHA = fmt.Sprintf("%040x", id)
	}
	g.userLocked(p.Author)
	r.pulls[p.Number] = &p
	return p.Number
}

// SetPRState sets a pull request's state: open, closed or merged.
func (g *GitHub) SetPRState(repo string, number int, state string) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	p := g.repoLocked(repo).pulls[number]
	if p == nil {
		panic(fmt.Sprintf("forgetest: no pull request %s#%d", repo, number))
	}
	p.Merged = state == "merged"
	p.State = state
	if p.Merged {
		p.State = "closed"
	}
}

// AddComment adds a comment to issue or pull request number's
// conversation and returns its id.
func (g *GitHub) AddComment(repo string, number int, author, body string) int64 {
	return g.addComment(repo, GitHubComment{Number: number, Author: author, Body: body})
}

// AddReviewComment adds a review comment on line of path in pull request
// number's diff and returns its id.
func (g *GitHub) AddReviewComment(repo string, number int, author, path string, line int, body string) int64 {
	return g.addComment(repo, GitHubComment{Number: number, Author: author, Body: body, Review: true, Path: path, Line: line})
}

func (g *GitHub) addComment(repo string, c GitHubComment) int64 {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	r := g.repoLocked(repo)
	if r.pulls[c.Number] == nil && (c.Review || r.issues[c.Number] == nil) {
		panic(fmt.Sprintf("forgetest: no pull request or issue %s#%d", repo, c.Number))
	}
	g.userLocked(c.Author)
	c.ID, c.Created = g.s.next()
	r.comments = append(r.comments, &c)
	return c.ID
}

// PRs returns repo's pull requests by number.
func (g *GitHub) PRs(repo string) []GitHubPR {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	r := g.repoLocked(repo)
	var out []GitHubPR
	for _, p := range r.pulls {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b GitHubPR) int { return a.Number - b.Number })
	return out
}

// Comments returns the comments on issue or pull request number, oldest
// first (review comments too).
func (g *GitHub) Comments(repo string, number int) []GitHubComment {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	var out []GitHubComment
	for _, c := range g.repoLocked(repo).comments {
		if c.Number == number {
			out = append(out, *c)
		}
	}
	return out
}

func githubNodeID(id int64) string {
	return "PR_kwDO" + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
}

// githubMessage is GitHub's error body for a status.
func githubMessage(status int, h http.Header, msg string) map[string]any {
	if msg == "" {
		switch {
		case status == 401:
			msg = "Bad credentials"
		case (status == 403 || status == 429) && h.Get("X-RateLimit-Remaining") == "0":
			msg = "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID."
		case status == 403 || status == 429:
			msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
			if h.Get("Retry-After") == "" {
				msg = "Resource not accessible by personal access token"
			}
		case status == 404:
			msg = "Not Found"
		case status == 422:
			msg = "Validation Failed"
		default:
			msg = http.StatusText(status)
		}
	}
	return map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	f, failed := g.s.record(r)
	if failed {
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		scriptJSON(w, f.Status, githubMessage(f.Status, f.Header, f.Message))
		return
	}
	auth := r.Header.Get("Authorization")
	if g.Token == "" || (auth != "Bearer "+g.Token && auth != "token "+g.Token) {
		scriptJSON(w, http.StatusUnauthorized, githubMessage(401, nil, ""))
		return
	}
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	path := r.URL.Path
	if p, ok := strings.CutPrefix(path, "/api/v3/"); ok {
		path = "/" + p
	}
	if r.Method == http.MethodPost && (path == "/graphql" || path == "/api/graphql") {
		g.graphql(w, r)
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 || parts[0] != "repos" {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	repo := g.repos[strings.ToLower(parts[1]+"/"+parts[2])]
	if repo == nil {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	rest := parts[3:]
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0
		}
		return n
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		scriptJSON(w, 200, g.repoJSON(r, repo))
	case len(rest) == 1 && rest[0] == "pulls" && r.Method == http.MethodGet:
		g.listPulls(w, r, repo)
	case len(rest) == 1 && rest[0] == "pulls" && r.Method == http.MethodPost:
		g.createPull(w, r, repo)
	case len(rest) == 2 && rest[0] == "pulls" && r.Method == http.MethodGet:
		if p := repo.pulls[num(rest[1])]; p != nil {
			scriptJSON(w, 200, g.pullJSON(r, repo, p))
			return
		}
		scriptJSON(w, 404, githubMessage(404, nil, ""))
	case len(rest) == 2 && rest[0] == "pulls" && r.Method == http.MethodPatch:
		g.updatePull(w, r, repo, repo.pulls[num(rest[1])])
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "comments" && r.Method == http.MethodGet:
		g.listComments(w, r, repo, num(rest[1]), true)
	case len(rest) == 2 && rest[0] == "issues" && r.Method == http.MethodGet:
		g.getIssue(w, r, repo, num(rest[1]))
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "comments" && r.Method == http.MethodGet:
		g.listComments(w, r, repo, num(rest[1]), false)
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "comments" && r.Method == http.MethodPost:
		g.addCommentHTTP(w, r, repo, num(rest[1]))
	case len(rest) == 3 && rest[0] == "collaborators" && rest[2] == "permission" && r.Method == http.MethodGet:
		g.permission(w, r, rest[1])
	default:
		scriptJSON(w, 404, githubMessage(404, nil, ""))
	}
}

func (g *GitHub) base(r *http.Request) string { return "http://" + r.Host }

func (g *GitHub) userJSON(r *http.Request, login string) any {
	u := g.users[login]
	if u == nil {
		return nil
	}
	typ := "User"
	if u.bot {
		typ = "Bot"
	}
	return map[string]any{"login": u.login, "id": u.id, "node_id": "U_" + strconv.FormatInt(u.id, 10), "type": typ, "site_admin": false,
		"url": g.base(r) + "/users/" + u.login, "html_url": g.base(r) + "/" + u.login}
}

func (g *GitHub) repoJSON(r *http.Request, repo *githubRepo) map[string]any {
	full := repo.owner + "/" + repo.name
	return map[string]any{"id": repo.id, "node_id": "R_" + strconv.FormatInt(repo.id, 10), "name": repo.name, "full_name": full,
		"private": false, "owner": g.userJSON(r, repo.owner), "html_url": g.base(r) + "/" + full,
		"url": g.base(r) + "/repos/" + full, "default_branch": repo.defaultBranch, "visibility": "public",
		"permissions": map[string]bool{"admin": true, "maintain": true, "push": true, "triage": true, "pull": true}}
}

func (g *GitHub) pullJSON(r *http.Request, repo *githubRepo, p *GitHubPR) map[string]any {
	full := repo.owner + "/" + repo.name
	ref := func(branch, sha string) map[string]any {
		return map[string]any{"label": repo.owner + ":" + branch, "ref": branch, "sha": sha,
			"user": g.userJSON(r, repo.owner), "repo": g.repoJSON(r, repo)}
	}
	baseSHA := ""
	if g.Branch != nil {
		baseSHA, _ = g.Branch(full, p.Base)
	}
	var merged, closed time.Time
	if p.State == "closed" {
		closed = p.Created.Add(time.Hour)
		if p.Merged {
			merged = closed
		}
	}
	return map[string]any{
		"url": g.base(r) + "/repos/" + full + "/pulls/" + strconv.Itoa(p.Number), "id": 1000 + p.Number, "node_id": p.NodeID,
		"html_url": g.base(r) + "/" + full + "/pull/" + strconv.Itoa(p.Number), "number": p.Number, "state": p.State,
		"locked": false, "title": p.Title, "user": g.userJSON(r, p.Author), "body": scriptOptString(p.Body),
		"labels": []any{}, "created_at": scriptTime(p.Created), "updated_at": scriptTime(p.Created),
		"closed_at": scriptOptTime(closed), "merged_at": scriptOptTime(merged), "merge_commit_sha": nil,
		"draft": p.Draft, "head": ref(p.Head, p.HeadSHA), "base": ref(p.Base, baseSHA),
		"author_association": "OWNER", "merged": p.Merged, "mergeable": nil, "comments": 0, "commits": 1,
	}
}

func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request, repo *githubRepo) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var pulls []*GitHubPR
	for _, p := range repo.pulls {
		if state != "all" && p.State != state {
			continue
		}
		if h := q.Get("head"); h != "" {
			owner, branch, ok := strings.Cut(h, ":")
			if !ok || !strings.EqualFold(owner, repo.owner) || branch != p.Head {
				continue
			}
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		pulls = append(pulls, p)
	}
	asc := q.Get("direction") == "asc"
	slices.SortFunc(pulls, func(a, b *GitHubPR) int {
		if asc {
			return a.Number - b.Number
		}
		return b.Number - a.Number
	})
	out := make([]map[string]any, len(pulls))
	for i, p := range pulls {
		out[i] = g.pullJSON(r, repo, p)
	}
	scriptPage(w, r, out, 30, 100, g.PageSize, false, true)
}

func githubInvalid(w http.ResponseWriter, field, code, msg string) {
	e := map[string]any{"resource": "PullRequest", "code": code}
	if field != "" {
		e["field"] = field
	}
	if msg != "" {
		e["message"] = msg
	}
	body := githubMessage(422, nil, "")
	body["errors"] = []any{e}
	scriptJSON(w, 422, body)
}

func (g *GitHub) createPull(w http.ResponseWriter, r *http.Request, repo *githubRepo) {
	in, err := scriptDecode(r)
	if err != nil {
		scriptJSON(w, 400, githubMessage(400, nil, err.Error()))
		return
	}
	title, _ := in["title"].(string)
	body, _ := in["body"].(string)
	head, _ := in["head"].(string)
	base, _ := in["base"].(string)
	draft, _ := in["draft"].(bool)
	if o, b, ok := strings.Cut(head, ":"); ok && strings.EqualFold(o, repo.owner) {
		head = b
	}
	full := repo.owner + "/" + repo.name
	sha := fmt.Sprintf("%040x", len(repo.pulls)+1)
	if g.Branch != nil {
		var ok bool
		if sha, ok = g.Branch(full, head); !ok {
			githubInvalid(w, "head", "invalid", "")
			return
		}
		if _, ok := g.Branch(full, base); !ok {
			githubInvalid(w, "base", "invalid", "")
			return
		}
	}
	switch {
	case title == "":
		githubInvalid(w, "title", "missing_field", "")
		return
	case head == "" || base == "":
		githubInvalid(w, "head", "missing_field", "")
		return
	case head == base:
		githubInvalid(w, "", "custom", "No commits between "+base+" and "+head)
		return
	}
	for _, p := range repo.pulls {
		if p.State == "open" && p.Head == head && p.Base == base {
			githubInvalid(w, "", "custom", "A pull request already exists for "+repo.owner+":"+head+".")
			return
		}
	}
	repo.number++
	id, at := g.s.next()
	p := &GitHubPR{Repo: full, Number: repo.number, NodeID: githubNodeID(id), Title: title, Body: body, Head: head, Base: base,
		HeadSHA: sha, State: "open", Draft: draft, Author: repo.owner, Created: at}
	repo.pulls[p.Number] = p
	scriptJSON(w, http.StatusCreated, g.pullJSON(r, repo, p))
}

func (g *GitHub) updatePull(w http.ResponseWriter, r *http.Request, repo *githubRepo, p *GitHubPR) {
	if p == nil {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	in, err := scriptDecode(r)
	if err != nil {
		scriptJSON(w, 400, githubMessage(400, nil, err.Error()))
		return
	}
	if s, ok := in["state"].(string); ok {
		switch {
		case s != "open" && s != "closed":
			githubInvalid(w, "state", "invalid", "")
			return
		case s == "open" && p.Merged:
			githubInvalid(w, "", "custom", "state cannot be changed. The pull request cannot be reopened because it has been merged.")
			return
		case s == "open" && p.State == "closed":
			for _, o := range repo.pulls {
				if o != p && o.State == "open" && o.Head == p.Head && o.Base == p.Base {
					githubInvalid(w, "", "custom", "state cannot be changed. There is already an open pull request from "+repo.owner+":"+p.Head+" to "+p.Base+".")
					return
				}
			}
		}
		p.State = s
	}
	if s, ok := in["title"].(string); ok {
		p.Title = s
	}
	if s, ok := in["body"].(string); ok {
		p.Body = s
	}
	scriptJSON(w, 200, g.pullJSON(r, repo, p))
}

func (g *GitHub) getIssue(w http.ResponseWriter, r *http.Request, repo *githubRepo, n int) {
	full := repo.owner + "/" + repo.name
	if p := repo.pulls[n]; p != nil {
		scriptJSON(w, 200, map[string]any{
			"url": g.base(r) + "/repos/" + full + "/issues/" + strconv.Itoa(n), "html_url": g.base(r) + "/" + full + "/pull/" + strconv.Itoa(n),
			"id": 2000 + n, "number": n, "title": p.Title, "user": g.userJSON(r, p.Author), "state": p.State, "body": scriptOptString(p.Body),
			"labels": []any{}, "locked": false, "comments": 0, "created_at": scriptTime(p.Created), "draft": p.Draft,
			"pull_request": map[string]any{"url": g.base(r) + "/repos/" + full + "/pulls/" + strconv.Itoa(n), "merged_at": nil},
		})
		return
	}
	i := repo.issues[n]
	if i == nil {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	scriptJSON(w, 200, map[string]any{
		"url": g.base(r) + "/repos/" + full + "/issues/" + strconv.Itoa(n), "html_url": g.base(r) + "/" + full + "/issues/" + strconv.Itoa(n),
		"id": 2000 + n, "node_id": "I_" + strconv.Itoa(n), "number": n, "title": i.title, "user": g.userJSON(r, i.author),
		"labels": []any{}, "state": i.state, "locked": false, "comments": 0, "created_at": scriptTime(i.created),
		"updated_at": scriptTime(i.created), "closed_at": nil, "author_association": "CONTRIBUTOR", "body": scriptOptString(i.body),
		"state_reason": nil,
	})
}

func (g *GitHub) commentJSON(r *http.Request, repo *githubRepo, c *GitHubComment) map[string]any {
	full := repo.owner + "/" + repo.name
	out := map[string]any{"id": c.ID, "node_id": "IC_" + strconv.FormatInt(c.ID, 10), "body": c.Body, "user": g.userJSON(r, c.Author),
		"created_at": scriptTime(c.Created), "updated_at": scriptTime(c.Created), "author_association": "CONTRIBUTOR"}
	if c.Review {
		out["url"] = g.base(r) + "/repos/" + full + "/pulls/comments/" + strconv.FormatInt(c.ID, 10)
		out["html_url"] = g.base(r) + "/" + full + "/pull/" + strconv.Itoa(c.Number) + "#discussion_r" + strconv.FormatInt(c.ID, 10)
		out["pull_request_review_id"] = c.ID + 1
		out["diff_hunk"] = "@@ -1,3 +1,4 @@"
		out["path"] = c.Path
		out["commit_id"] = fmt.Sprintf("%040x", c.ID)
		out["original_commit_id"] = fmt.Sprintf("%040x", c.ID)
		out["line"], out["original_line"] = c.Line, c.Line
		out["side"], out["subject_type"], out["start_line"], out["position"] = "RIGHT", "line", nil, 1
	} else {
		out["url"] = g.base(r) + "/repos/" + full + "/issues/comments/" + strconv.FormatInt(c.ID, 10)
		out["html_url"] = g.base(r) + "/" + full + "/issues/" + strconv.Itoa(c.Number) + "#issuecomment-" + strconv.FormatInt(c.ID, 10)
		out["issue_url"] = g.base(r) + "/repos/" + full + "/issues/" + strconv.Itoa(c.Number)
	}
	return out
}

func (g *GitHub) listComments(w http.ResponseWriter, r *http.Request, repo *githubRepo, n int, review bool) {
	if repo.pulls[n] == nil && (review || repo.issues[n] == nil) {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	out := []map[string]any{}
	for _, c := range repo.comments {
		if c.Number == n && c.Review == review {
			out = append(out, g.commentJSON(r, repo, c))
		}
	}
	scriptPage(w, r, out, 30, 100, g.PageSize, false, true)
}

func (g *GitHub) addCommentHTTP(w http.ResponseWriter, r *http.Request, repo *githubRepo, n int) {
	if repo.pulls[n] == nil && repo.issues[n] == nil {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	in, err := scriptDecode(r)
	if err != nil {
		scriptJSON(w, 400, githubMessage(400, nil, err.Error()))
		return
	}
	body, _ := in["body"].(string)
	if body == "" {
		body := githubMessage(422, nil, "")
		body["errors"] = []any{map[string]any{"resource": "IssueComment", "code": "missing_field", "field": "body"}}
		scriptJSON(w, 422, body)
		return
	}
	c := &GitHubComment{Number: n, Author: repo.owner, Body: body}
	c.ID, c.Created = g.s.next()
	repo.comments = append(repo.comments, c)
	scriptJSON(w, http.StatusCreated, g.commentJSON(r, repo, c))
}

func (g *GitHub) permission(w http.ResponseWriter, r *http.Request, login string) {
	u := g.users[login]
	if u == nil {
		scriptJSON(w, 404, githubMessage(404, nil, ""))
		return
	}
	role := u.permission
	if role == "" {
		role = "read"
	}
	legacy := map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}[role]
	if legacy == "" {
		legacy = "none"
	}
	scriptJSON(w, 200, map[string]any{"permission": legacy, "role_name": role, "user": g.userJSON(r, login)})
}

// graphql answers the two mutations that change a pull request's draft
// state, by its node id in variables.id (or inline in the query).
func (g *GitHub) graphql(w http.ResponseWriter, r *http.Request) {
	in, err := scriptDecode(r)
	if err != nil {
		scriptJSON(w, 400, map[string]any{"message": err.Error()})
		return
	}
	query, _ := in["query"].(string)
	vars, _ := in["variables"].(map[string]any)
	var field string
	var draft bool
	switch {
	case strings.Contains(query, "markPullRequestReadyForReview"):
		field = "markPullRequestReadyForReview"
	case strings.Contains(query, "convertPullRequestToDraft"):
		field, draft = "convertPullRequestToDraft", true
	default:
		scriptJSON(w, 200, map[string]any{"errors": []any{map[string]any{"message": "this scripted GitHub answers only markPullRequestReadyForReview and convertPullRequestToDraft"}}})
		return
	}
	id, _ := vars["id"].(string)
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	for _, repo := range g.repos {
		for _, p := range repo.pulls {
			if p.NodeID == id && id != "" {
				if p.State != "open" {
					scriptJSON(w, 200, map[string]any{"data": map[string]any{field: nil}, "errors": []any{map[string]any{
						"type": "UNPROCESSABLE", "path": []string{field}, "message": "Pull request is closed"}}})
					return
				}
				p.Draft = draft
				scriptJSON(w, 200, map[string]any{"data": map[string]any{field: map[string]any{"pullRequest": map[string]any{"isDraft": p.Draft}}}})
				return
			}
		}
	}
	scriptJSON(w, 200, map[string]any{"data": map[string]any{field: nil}, "errors": []any{map[string]any{
		"type": "NOT_FOUND", "path": []string{field}, "locations": []any{map[string]int{"line": 1, "column": 22}},
		"message": "Could not resolve to a node with the global id of '" + id + "'"}}})
}
