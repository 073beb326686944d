package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// giteaClient speaks Gitea's (and Forgejo's) API v1 at https://HOST/api/v1.
//
// Written from Gitea 1.26's swagger and routers/api/v1, and run against
// Gitea 1.26 by TestGiteaReal: the pull request
// list has no head filter (FindPR reads it newest first, 50 a page, until
// the branch's); a draft is a title that starts with "WIP:" or "[WIP]"
// (setting WORK_IN_PROGRESS_PREFIXES; the answer's draft field says the
// same); the issue comment list is not paginated (a Link header is
// followed if one comes); review comments are read review by review; the
// collaborator permission endpoint answers only a site admin, a repository
// admin or the user asked about (403 otherwise).
type giteaClient struct {
	a        *api
	repoPath string // /repos/OWNER/NAME, escaped
}

func newGitea(a *api) (*giteaClient, error) {
	if err := checkRepo(Gitea, a.target.Repo); err != nil {
		return nil, fmt.Errorf("--forge-repo: %v", err)
	}
	owner, name, _ := strings.Cut(a.target.Repo, "/")
	return &giteaClient{a: a, repoPath: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)}, nil
}

func (c *giteaClient) Target() Target { return c.a.target }

// giteaPageSize is Gitea's default MAX_RESPONSE_ITEMS.
const giteaPageSize = "50"

// The parts of Gitea's answers factory reads.
type (
	giteaUser struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
	}
	giteaRef struct {
		Ref    string `json:"ref"`
		SHA    string `json:"sha"`
		RepoID int64  `json:"repo_id"`
		Repo   *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	}
	giteaPull struct {
		Number  int      `json:"number"`
		HTMLURL string   `json:"html_url"`
		State   string   `json:"state"`
		Draft   bool     `json:"draft"`
		Merged  bool     `json:"merged"`
		Title   string   `json:"title"`
		Body    string   `json:"body"`
		Head    giteaRef `json:"head"`
		Base    giteaRef `json:"base"`
	}
	giteaComment struct {
		ID               int64     `json:"id"`
		User             giteaUser `json:"user"`
		Body             string    `json:"body"`
		Path             string    `json:"path"`
		Position         int       `json:"position"`
		OriginalPosition int       `json:"original_position"`
		CreatedAt        time.Time `json:"created_at"`
	}
	giteaReview struct {
		ID            int64 `json:"id"`
		CommentsCount int   `json:"comments_count"`
	}
)

// giteaWIP are Gitea's default work-in-progress title prefixes, matched
// without regard to case.
var giteaWIP = []string{"WIP:", "[WIP]"}

// cutPrefix returns title without the first of prefixes it starts with
// (any case; spaces after it trimmed), and whether it had one.
func cutPrefix(title string, prefixes []string) (string, bool) {
	for _, p := range prefixes {
		if len(title) >= len(p) && strings.EqualFold(title[:len(p)], p) {
			return strings.TrimLeft(title[len(p):], " "), true
		}
	}
	return title, false
}

func (u giteaUser) user() User {
	// Gitea's own users have negative ids (-1 ghost, -2 gitea-actions).
	return User{Login: u.Login, Bot: u.ID < 0 || strings.HasSuffix(u.Login, "[bot]") || u.Login == "gitea-actions"}
}

func (p *giteaPull) pr() (*PR, error) {
	if err := positive("pull request", p.Number); err != nil {
		return nil, err
	}
	_, wip := cutPrefix(p.Title, giteaWIP)
	out := &PR{Number: p.Number, URL: p.HTMLURL, Draft: p.Draft || wip, Title: p.Title, Body: p.Body,
		Head: p.Head.Ref, Base: p.Base.Ref, HeadSHA: p.Head.SHA}
	switch {
	case p.Merged:
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

// sameRepo reports whether a pull request's head is a branch of repo (not
// of a fork).
func (p *giteaPull) sameRepo(repo string) bool {
	if p.Head.RepoID != 0 && p.Base.RepoID != 0 {
		return p.Head.RepoID == p.Base.RepoID
	}
	return p.Head.Repo != nil && strings.EqualFold(p.Head.Repo.FullName, repo)
}

func (c *giteaComment) comment(review bool) (Comment, error) {
	if c.ID <= 0 {
		return Comment{}, fmt.Errorf("a comment with the id %d", c.ID)
	}
	out := Comment{ID: c.ID, Author: c.User.user(), Body: c.Body, Created: c.CreatedAt}
	if review {
		out.Review, out.Path, out.Line = true, c.Path, c.Position
		if out.Line == 0 {
			out.Line = c.OriginalPosition
		}
	}
	return out, nil
}

func (c *giteaClient) DefaultBranch(ctx context.Context) (string, error) {
	return restDefaultBranch(ctx, c.a, c.repoPath)
}

func (c *giteaClient) FindPR(ctx context.Context, head string) (*PR, error) {
	if head == "" {
		return nil, fmt.Errorf("FindPR: no branch")
	}
	// Newest first (Gitea's default order: created, then id, descending);
	// the first of the branch's is the one.
	repo := c.a.target.Repo
	match := func(p giteaPull) bool { return p.Head.Ref == head && p.sameRepo(repo) }
	pulls, err := list(ctx, c.a, c.repoPath+"/pulls", url.Values{"state": {"all"}, "limit": {giteaPageSize}}, match)
	if err != nil {
		return nil, err
	}
	return newestGitea(pulls, repo, head)
}

// newestGitea is the pull request with the highest number whose head is
// branch head of repo.
func newestGitea(pulls []giteaPull, repo, head string) (*PR, error) {
	var best *PR
	for i := range pulls {
		if pulls[i].Head.Ref != head || !pulls[i].sameRepo(repo) {
			continue
		}
		pr, err := pulls[i].pr()
		if err != nil {
			return nil, fmt.Errorf("gitea: %v", err)
		}
		if best == nil || pr.Number > best.Number {
			best = pr
		}
	}
	return best, nil
}

func (c *giteaClient) pull(ctx context.Context, c2 call) (*PR, error) {
	return restPull[giteaPull](ctx, c.a, c2)
}

func (c *giteaClient) CreatePR(ctx context.Context, p NewPR) (*PR, error) {
	title := p.Title
	if _, wip := cutPrefix(title, giteaWIP); p.Draft && !wip {
		title = "WIP: " + title
	}
	in := map[string]any{"title": title, "body": p.Body, "head": p.Head, "base": p.Base}
	return c.pull(ctx, call{method: http.MethodPost, path: c.repoPath + "/pulls", in: in})
}

func (c *giteaClient) UpdatePR(ctx context.Context, number int, u PRUpdate) (*PR, error) {
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
	if u.Draft != nil {
		title := ""
		if u.Title != nil {
			title = *u.Title
		} else {
			cur, err := c.pull(ctx, call{method: http.MethodGet, path: path})
			if err != nil {
				return nil, err
			}
			title = cur.Title
		}
		bare, wip := cutPrefix(title, giteaWIP)
		switch {
		case *u.Draft && !wip:
			patch["title"] = "WIP: " + title
		case !*u.Draft && wip:
			patch["title"] = bare
		}
	}
	if len(patch) == 0 {
		return c.pull(ctx, call{method: http.MethodGet, path: path})
	}
	return c.pull(ctx, call{method: http.MethodPatch, path: path, in: patch})
}

func (c *giteaClient) Comment(ctx context.Context, number int, pr bool, body string) (*Comment, error) {
	return restComment[giteaComment](ctx, c.a, c.repoPath, number, body)
}

func (c *giteaClient) Issue(ctx context.Context, number int) (*Issue, error) {
	return restIssueAt[giteaUser](ctx, c.a, c.repoPath, number)
}

// maxReviews bounds the reviews whose comments Comments reads (a request
// each).
const maxReviews = 200

func (c *giteaClient) Comments(ctx context.Context, number int, pr bool) ([]Comment, error) {
	if err := positive("issue or pull request", number); err != nil {
		return nil, err
	}
	n := strconv.Itoa(number)
	issue, err := list[giteaComment](ctx, c.a, c.repoPath+"/issues/"+n+"/comments", nil, nil)
	if err != nil {
		return nil, err
	}
	var review []giteaComment
	if pr {
		reviews, err := list[giteaReview](ctx, c.a, c.repoPath+"/pulls/"+n+"/reviews", url.Values{"limit": {giteaPageSize}}, nil)
		if err != nil {
			return nil, err
		}
		read := 0
		for _, r := range reviews {
			if r.CommentsCount == 0 {
				continue
			}
			if read++; read > maxReviews {
				return nil, fmt.Errorf("gitea: pull request #%d has more than %d reviews with comments; factory reads at most %d", number, maxReviews, maxReviews)
			}
			if r.ID <= 0 {
				return nil, fmt.Errorf("gitea: a review with the id %d", r.ID)
			}
			cs, err := list[giteaComment](ctx, c.a, c.repoPath+"/pulls/"+n+"/reviews/"+strconv.FormatInt(r.ID, 10)+"/comments", nil, nil)
			if err != nil {
				return nil, err
			}
			review = append(review, cs...)
		}
	}
	return mergeComments(Gitea, issue, review)
}

func (c *giteaClient) CanWrite(ctx context.Context, login string) (bool, error) {
	// Gitea answers others' permissions only to a repository admin's
	// token: 403 cannot tell, and a comment nobody can vouch for is left
	// out (docs/forges.md).
	return restCanWrite(ctx, c.a, c.repoPath, login, http.StatusForbidden)
}
