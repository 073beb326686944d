package forge

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// GitHub's REST v3 and Gitea's API v1 (which follows it) share these
// routes and shapes: a repository, an issue, a conversation's comments, a
// pull request's answer, a collaborator's permission. GitLab has its own.

// forgeUser is a forge's user object.
type forgeUser interface{ user() User }

// restIssue is an issue as GitHub and Gitea answer it.
type restIssue[U forgeUser] struct {
	Number      int       `json:"number"`
	HTMLURL     string    `json:"html_url"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
	User        U         `json:"user"`
	State       string    `json:"state"`
	PullRequest *struct{} `json:"pull_request"`
}

type (
	githubIssue = restIssue[githubUser]
	giteaIssue  = restIssue[giteaUser]
)

func (i *restIssue[U]) issue() (*Issue, error) {
	if err := positive("issue", i.Number); err != nil {
		return nil, err
	}
	st, err := openClosed(i.State, "open")
	if err != nil {
		return nil, fmt.Errorf("issue #%d: %v", i.Number, err)
	}
	return &Issue{Number: i.Number, URL: i.HTMLURL, Title: i.Title, Body: i.Body, Author: i.User.user(), State: st}, nil
}

// rawComment is a pointer to a forge's comment object.
type rawComment[C any] interface {
	*C
	comment(review bool) (Comment, error)
}

// rawPull is a pointer to a forge's pull request object.
type rawPull[P any] interface {
	*P
	pr() (*PR, error)
}

// restDefaultBranch reads the repository's default branch.
func restDefaultBranch(ctx context.Context, a *api, repoPath string) (string, error) {
	var repo struct {
		DefaultBranch string `json:"default_branch"`
	}
	if err := a.get(ctx, repoPath, nil, &repo); err != nil {
		return "", err
	}
	if repo.DefaultBranch == "" {
		return "", fmt.Errorf("%s: %s has no default branch (an empty repository?)", a.target.Kind, a.target.Repo)
	}
	return repo.DefaultBranch, nil
}

// restPull sends c2 and reads the pull request it answers.
func restPull[P any, PP rawPull[P]](ctx context.Context, a *api, c2 call) (*PR, error) {
	var p P
	if _, err := a.do(ctx, c2, &p); err != nil {
		return nil, err
	}
	pr, err := PP(&p).pr()
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %v", a.target.Kind, c2.method, c2.path, err)
	}
	return pr, nil
}

// restIssueAt reads issue n, refusing a pull request's number.
func restIssueAt[U forgeUser](ctx context.Context, a *api, repoPath string, n int) (*Issue, error) {
	if err := positive("issue", n); err != nil {
		return nil, err
	}
	var raw restIssue[U]
	path := repoPath + "/issues/" + strconv.Itoa(n)
	if err := a.get(ctx, path, nil, &raw); err != nil {
		return nil, err
	}
	if raw.PullRequest != nil {
		return nil, fmt.Errorf("#%d of %s is %w", n, a.target.Repo, ErrNotIssue)
	}
	out, err := raw.issue()
	if err != nil {
		return nil, fmt.Errorf("%s GET %s: %v", a.target.Kind, path, err)
	}
	return out, nil
}

// restComment adds body to the conversation of issue or pull request n.
func restComment[C any, PC rawComment[C]](ctx context.Context, a *api, repoPath string, n int, body string) (*Comment, error) {
	if err := positive("issue or pull request", n); err != nil {
		return nil, err
	}
	var raw C
	path := repoPath + "/issues/" + strconv.Itoa(n) + "/comments"
	if _, err := a.do(ctx, call{method: http.MethodPost, path: path, in: map[string]string{"body": body}}, &raw); err != nil {
		return nil, err
	}
	out, err := PC(&raw).comment(false)
	if err != nil {
		return nil, fmt.Errorf("%s POST %s: %v", a.target.Kind, path, err)
	}
	return &out, nil
}

// mergeComments converts and merges a conversation's comments and a pull
// request's review comments, oldest first.
func mergeComments[C any, PC rawComment[C]](k Kind, issue, review []C) ([]Comment, error) {
	out := make([]Comment, 0, len(issue)+len(review))
	for i, list := range [][]C{issue, review} {
		for j := range list {
			cm, err := PC(&list[j]).comment(i == 1)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			out = append(out, cm)
		}
	}
	sortComments(out)
	return out, nil
}

// restCanWrite reads login's permission on the repository; 404 (no such
// user or collaborator), and the statuses in cannotTell, count as no.
func restCanWrite(ctx context.Context, a *api, repoPath, login string, cannotTell ...int) (bool, error) {
	l, err := seg("login", login)
	if err != nil {
		return false, nil
	}
	var perm struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	err = a.get(ctx, repoPath+"/collaborators/"+l+"/permission", nil, &perm)
	if fe, ok := err.(*Error); ok && (fe.Status == http.StatusNotFound || slices.Contains(cannotTell, fe.Status)) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return writes(perm.Permission) || writes(perm.RoleName), nil
}
