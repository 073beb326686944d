// Package forge opens and updates pull requests (GitHub, Gitea/Forgejo)
// and merge requests (GitLab), reads issues and comments, and checks who
// may write to a repository. Everything a forge answers is untrusted:
// decoded strictly into small types, bounded in size.
//
// The token is read by factory's process only: it goes in an
// Authorization header of factory's own HTTP requests and, for a push, in
// the environment of that one git process (PushEnv), never in a URL, an
// argv, a file or a command's environment.
//
// The clients are plain net/http, not go-github, the Gitea SDK or GitLab's
// client-go: about eight endpoints per forge, strict bounded decoding of
// untrusted replies, and one token-handling path (http.go) that we control.
package forge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind names a forge's API.
type Kind string

// The forges factory speaks to.
const (
	GitHub Kind = "github"
	Gitea  Kind = "gitea" // Gitea and Forgejo
	GitLab Kind = "gitlab"
)

// Kinds lists the forges in the order --help shows them.
var Kinds = []Kind{GitHub, Gitea, GitLab}

// TokenVars are the environment variables a forge's token is read from,
// first set wins.
func TokenVars(k Kind) []string {
	switch k {
	case GitHub:
		return []string{"GITHUB_TOKEN", "GH_TOKEN"}
	case Gitea:
		return []string{"GITEA_TOKEN"}
	case GitLab:
		return []string{"GITLAB_TOKEN"}
	}
	return nil
}

// Target is one repository on one forge.
type Target struct {
	Kind Kind
	// API is the API's base URL: https://api.github.com,
	// https://host/api/v1 (Gitea), https://host/api/v4 (GitLab).
	API string
	// Repo is OWNER/NAME (GitLab: the project's full path, groups
	// included).
	Repo  string
	Token string
}

// State is a pull request's state.
type State string

// Pull request states.
const (
	Open   State = "open"
	Closed State = "closed"
	Merged State = "merged"
)

// PR is a pull request (a merge request on GitLab).
type PR struct {
	Number int    `json:"number"` // GitLab: the MR's iid
	URL    string `json:"url"`    // the page a person opens
	State  State  `json:"state"`
	Draft  bool   `json:"draft"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Head   string `json:"head"` // branch
	Base   string `json:"base"` // branch
	// HeadSHA is the commit the forge has for the head branch.
	HeadSHA string `json:"head_sha,omitempty"`
	// NodeID is GitHub's GraphQL id (marking a draft ready needs it).
	NodeID string `json:"-"`
}

// NewPR is what CreatePR sends.
type NewPR struct {
	Title, Body, Head, Base string
	Draft                   bool
}

// PRUpdate is what UpdatePR changes; nil fields are left as they are.
type PRUpdate struct {
	Title *string
	Body  *string
	Draft *bool  // false: mark ready for review
	State *State // Open to reopen; Closed to close
}

// Issue is an issue (or the conversation of a pull request).
type Issue struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Author User   `json:"author"`
	State  State  `json:"state"`
}

// User is an account on the forge.
type User struct {
	Login string `json:"login"`
	Bot   bool   `json:"bot,omitempty"`
}

// Comment is one comment on an issue or a pull request.
type Comment struct {
	ID     int64  `json:"id"`
	Author User   `json:"author"`
	Body   string `json:"body"`
	// Review comments are on a line of the diff: Path and Line say where.
	Review  bool      `json:"review,omitempty"`
	Path    string    `json:"path,omitempty"`
	Line    int       `json:"line,omitempty"`
	Created time.Time `json:"created"`
}

// Client is one repository on one forge. Every method makes at most a few
// requests; lists are read to the end (pages followed, bounded).
type Client interface {
	Target() Target
	// DefaultBranch is the repository's default branch.
	DefaultBranch(ctx context.Context) (string, error)
	// FindPR returns the most recent pull request whose head is branch of
	// this repository, in any state; nil when there is none.
	FindPR(ctx context.Context, head string) (*PR, error)
	CreatePR(ctx context.Context, p NewPR) (*PR, error)
	UpdatePR(ctx context.Context, number int, u PRUpdate) (*PR, error)
	// Comment adds a comment to the conversation of pull request number
	// (pr) or issue number (GitLab numbers merge requests and issues
	// apart).
	Comment(ctx context.Context, number int, pr bool, body string) (*Comment, error)
	// Issue reads an issue; a pull request's number gives an error that
	// wraps ErrNotIssue.
	Issue(ctx context.Context, number int) (*Issue, error)
	// Comments lists an issue's or a pull request's comments, oldest
	// first; for a pull request, review comments on the diff too.
	Comments(ctx context.Context, number int, pr bool) ([]Comment, error)
	// CanWrite reports whether login may push to the repository.
	CanWrite(ctx context.Context, login string) (bool, error)
}

// Error is a forge's refusal, one line with a hint.
type Error struct {
	Kind   Kind
	Method string
	Path   string // the API path, never with a token
	Status int
	// Message is the forge's own message, trimmed to one line.
	Message string
	// Reset is when a rate limit ends (zero when not a rate limit).
	Reset time.Time
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s %s: %d", e.Kind, e.Method, e.Path, e.Status)
	if e.Message != "" {
		msg += " " + e.Message
	}
	return msg + "; " + e.Hint()
}

// Hint says what a user can do about the refusal.
func (e *Error) Hint() string {
	switch {
	case !e.Reset.IsZero():
		return "rate limited until " + e.Reset.UTC().Format(time.RFC3339) + "; rerun after that"
	case e.Status == 401:
		return "the token is missing, expired or wrong; set " + TokenVars(e.Kind)[0] + " to a valid token"
	case e.Status == 403:
		return "the token lacks a permission this needs (repository contents and pull requests: write), or the forge refused it"
	case e.Status == 404:
		return "the repository, branch or item does not exist, or the token cannot see it; check --forge-repo, that the branch is pushed, and the token's access"
	case e.Status == 412: // Gitea, to change a merged pull request's state
		return "the pull request is merged; its state cannot change"
	case e.Status == 409 || e.Status == 422:
		return "the forge rejected the request's content (a pull request for this branch may already exist, or the branch is not pushed)"
	case e.Status == 429:
		return "rate limited; rerun in a few minutes"
	}
	return "the forge failed; retry later"
}

// ErrNotFound is wrapped by an *Error with status 404 (errors.Is).
var ErrNotFound = errors.New("not found")

// ErrNotIssue is wrapped by Client.Issue's error when the number is a pull
// request's.
var ErrNotIssue = errors.New("a pull request, not an issue")

func (e *Error) Is(target error) bool { return target == ErrNotFound && e.Status == 404 }
