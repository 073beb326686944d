package forge

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/forge/forgetest"
)

const testToken = "ghp_test0123456789secret"

func ptr[T any](v T) *T { return &v }

func newGitHubTest(t *testing.T, api string) (*forgetest.GitHub, Client) {
	t.Helper()
	g := forgetest.NewGitHub(t, testToken)
	g.AddRepo("octo", "hello", "main")
	if api == "" {
		api = g.URL
	}
	c, err := New(Target{Kind: GitHub, API: api, Repo: "octo/hello", Token: testToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func TestGitHubPullRequests(t *testing.T) {
	for _, enterprise := range []bool{false, true} {
		t.Run("enterprise="+strconv.FormatBool(enterprise), func(t *testing.T) {
			g, _ := newGitHubTest(t, "")
			api := g.URL
			if enterprise {
				api += "/api/v3"
			}
			c, err := New(Target{Kind: GitHub, API: api, Repo: "octo/hello", Token: testToken}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if b, err := c.DefaultBranch(ctx); err != nil || b != "main" {
				t.Fatalf("DefaultBranch = %q, %v", b, err)
			}
			if pr, err := c.FindPR(ctx, "factory/issue-7"); err != nil || pr != nil {
				t.Fatalf("FindPR before = %+v, %v", pr, err)
			}
			pr, err := c.CreatePR(ctx, NewPR{Title: "Add a flag", Body: "body", Head: "factory/issue-7", Base: "main", Draft: true})
			if err != nil {
				t.Fatal(err)
			}
			if pr.Number != 1 || !pr.Draft || pr.State != Open || pr.Head != "factory/issue-7" || pr.Base != "main" || pr.NodeID == "" ||
				!strings.HasSuffix(pr.URL, "/octo/hello/pull/1") || pr.HeadSHA == "" {
				t.Errorf("CreatePR = %+v", pr)
			}
			_, err = c.CreatePR(ctx, NewPR{Title: "again", Head: "factory/issue-7", Base: "main"})
			var fe *Error
			if !errors.As(err, &fe) || fe.Status != 422 || !strings.Contains(err.Error(), "A pull request already exists for octo:factory/issue-7.") ||
				!strings.Contains(err.Error(), "may already exist") {
				t.Errorf("a second CreatePR: %v", err)
			}
			found, err := c.FindPR(ctx, "factory/issue-7")
			if err != nil || found == nil || *found != *pr {
				t.Fatalf("FindPR = %+v, %v; want %+v", found, err, pr)
			}

			// Ready for review through GraphQL, then back to a draft.
			up, err := c.UpdatePR(ctx, 1, PRUpdate{Title: ptr("Add the flag"), Body: ptr("new body"), Draft: ptr(false)})
			if err != nil || up.Draft || up.Title != "Add the flag" || up.Body != "new body" {
				t.Fatalf("UpdatePR ready = %+v, %v", up, err)
			}
			if p := g.PRs("octo/hello")[0]; p.Draft || p.Title != "Add the flag" {
				t.Errorf("on the forge: %+v", p)
			}
			gql := "/graphql"
			if enterprise {
				gql = "/api/graphql"
			}
			reqs := g.Requests()
			last := reqs[len(reqs)-1]
			if last.Path != gql || !strings.Contains(last.Body, "markPullRequestReadyForReview") || !strings.Contains(last.Body, pr.NodeID) {
				t.Errorf("the last request: %s %s %s", last.Method, last.Path, last.Body)
			}
			if up, err := c.UpdatePR(ctx, 1, PRUpdate{Draft: ptr(true)}); err != nil || !up.Draft || !g.PRs("octo/hello")[0].Draft {
				t.Errorf("UpdatePR draft = %+v, %v", up, err)
			}
			n := len(g.Requests())
			if up, err := c.UpdatePR(ctx, 1, PRUpdate{Draft: ptr(true)}); err != nil || !up.Draft || len(g.Requests()) != n+1 {
				t.Errorf("UpdatePR to the draft it is: %+v, %v, %d requests", up, err, len(g.Requests())-n)
			}

			// Close, reopen; a merged one cannot be reopened; a newer one
			// for the branch is the one found.
			if up, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Closed)}); err != nil || up.State != Closed {
				t.Errorf("close = %+v, %v", up, err)
			}
			if f, _ := c.FindPR(ctx, "factory/issue-7"); f == nil || f.State != Closed {
				t.Errorf("FindPR after closing = %+v", f)
			}
			if up, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Open), Draft: ptr(false)}); err != nil || up.State != Open || up.Draft {
				t.Errorf("reopen and ready = %+v, %v", up, err)
			}
			g.SetPRState("octo/hello", 1, "merged")
			if f, _ := c.FindPR(ctx, "factory/issue-7"); f == nil || f.State != Merged {
				t.Errorf("FindPR after merging = %+v", f)
			}
			if _, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Open)}); !errors.As(err, &fe) || fe.Status != 422 || !strings.Contains(err.Error(), "merged") {
				t.Errorf("reopening a merged one: %v", err)
			}
			if _, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Merged)}); err == nil {
				t.Error("UpdatePR merged: no error")
			}
			g.AddPR(forgetest.GitHubPR{Repo: "octo/hello", Title: "other", Head: "other", Base: "main", Author: "octo"})
			two, err := c.CreatePR(ctx, NewPR{Title: "Second try", Head: "factory/issue-7", Base: "main"})
			if err != nil || two.Number != 3 || two.Draft {
				t.Fatalf("CreatePR after merging = %+v, %v", two, err)
			}
			if f, _ := c.FindPR(ctx, "factory/issue-7"); f == nil || f.Number != 3 {
				t.Errorf("FindPR = %+v, want #3", f)
			}
			if f, _ := c.FindPR(ctx, "factory/issue-8"); f != nil {
				t.Errorf("FindPR of another branch = %+v", f)
			}
			for _, r := range g.Requests() {
				if r.Header.Get("Authorization") != "Bearer "+testToken || strings.Contains(r.Path+r.Query.Encode(), testToken) {
					t.Errorf("%s %s: Authorization %q", r.Method, r.Path, r.Header.Get("Authorization"))
				}
			}
		})
	}
}

func TestGitHubBranchMissing(t *testing.T) {
	g, c := newGitHubTest(t, "")
	g.Branch = func(repo, branch string) (string, bool) { return "0123", branch == "main" }
	_, err := c.CreatePR(context.Background(), NewPR{Title: "t", Head: "nope", Base: "main"})
	if err == nil || !strings.Contains(err.Error(), "422 Validation Failed: PullRequest head invalid") {
		t.Errorf("CreatePR of a branch not pushed: %v", err)
	}
}

func TestGitHubIssuesAndComments(t *testing.T) {
	g, c := newGitHubTest(t, "")
	ctx := context.Background()
	issue := g.AddIssue("octo/hello", "alice", "Add a --verbose flag", "Please.")
	g.AddUser("ci", true)
	g.AddComment("octo/hello", issue, "alice", "first")
	g.AddComment("octo/hello", issue, "dependabot[bot]", "bump")
	g.AddComment("octo/hello", issue, "ci", "CI passed")
	g.AddComment("octo/hello", issue, "bob", "fourth")
	g.AddComment("octo/hello", issue, "alice", "fifth")

	got, err := c.Issue(ctx, issue)
	if err != nil || got.Number != issue || got.Title != "Add a --verbose flag" || got.Body != "Please." || got.Author.Login != "alice" ||
		got.State != Open || !strings.HasSuffix(got.URL, "/octo/hello/issues/1") {
		t.Fatalf("Issue = %+v, %v", got, err)
	}
	cs, err := c.Comments(ctx, issue, false)
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, cm := range cs {
		summary = append(summary, cm.Author.Login+":"+strconv.FormatBool(cm.Author.Bot)+":"+cm.Body)
	}
	if strings.Join(summary, ",") != "alice:false:first,dependabot[bot]:true:bump,ci:true:CI passed,bob:false:fourth,alice:false:fifth" {
		t.Errorf("Comments = %v", summary)
	}
	pages := 0
	for _, r := range g.Requests() {
		if strings.HasSuffix(r.Path, "/issues/1/comments") {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("read %d pages of 2, want 3", pages)
	}

	pr, err := c.CreatePR(ctx, NewPR{Title: "t", Head: "b", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Issue(ctx, pr.Number); !errors.Is(err, ErrNotIssue) {
		t.Errorf("Issue of a pull request: %v", err)
	}
	g.AddComment("octo/hello", pr.Number, "alice", "conversation")
	g.AddReviewComment("octo/hello", pr.Number, "bob", "main.go", 12, "rename this")
	mine, err := c.Comment(ctx, pr.Number, true, "factory: done")
	if err != nil || mine.ID == 0 || mine.Body != "factory: done" || mine.Author.Login != "octo" {
		t.Fatalf("Comment = %+v, %v", mine, err)
	}
	cs, err = c.Comments(ctx, pr.Number, true)
	if err != nil || len(cs) != 3 {
		t.Fatalf("Comments of the pull request = %+v, %v", cs, err)
	}
	if r := cs[1]; !r.Review || r.Path != "main.go" || r.Line != 12 || r.Body != "rename this" || r.Author.Login != "bob" {
		t.Errorf("the review comment = %+v", r)
	}
	if cs[0].Review || cs[2].ID != mine.ID || !cs[0].Created.Before(cs[1].Created) {
		t.Errorf("Comments = %+v", cs)
	}
	if cs, err := c.Comments(ctx, pr.Number, false); err != nil || len(cs) != 2 {
		t.Errorf("Comments without review comments = %+v, %v", cs, err)
	}
	if _, err := c.Comments(ctx, 99, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("Comments of no issue: %v", err)
	}
	if _, err := c.Issue(ctx, 0); err == nil {
		t.Error("Issue(0): no error")
	}
}

func TestGitHubCanWrite(t *testing.T) {
	g, c := newGitHubTest(t, "")
	for login, perm := range map[string]string{"adm": "admin", "mnt": "maintain", "wr": "write", "tri": "triage", "rd": "read", "no": "none"} {
		g.SetPermission(login, perm)
	}
	g.AddUser("someone", false)
	for login, want := range map[string]bool{"adm": true, "mnt": true, "wr": true, "tri": false, "rd": false, "no": false,
		"someone": false, "ghost-unknown": false, "": false, "..": false} {
		got, err := c.CanWrite(context.Background(), login)
		if err != nil || got != want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v", login, got, err, want)
		}
	}
	g.FailNext(500, nil)
	if _, err := c.CanWrite(context.Background(), "adm"); err == nil {
		t.Error("CanWrite on a failing forge: no error")
	}
}

func TestGitHubErrors(t *testing.T) {
	g, c := newGitHubTest(t, "")
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, tc := range []struct {
		status int
		header http.Header
		want   []string
		reset  bool
	}{
		{401, nil, []string{"github GET /repos/octo/hello: 401 Bad credentials", "set GITHUB_TOKEN to a valid token"}, false},
		{403, nil, []string{"403 Resource not accessible by personal access token", "lacks a permission"}, false},
		{403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}},
			[]string{"API rate limit exceeded", "rate limited until " + reset.UTC().Format(time.RFC3339)}, true},
		{429, http.Header{"Retry-After": {"120"}}, []string{"secondary rate limit", "rate limited until"}, true},
		{404, nil, []string{"404 Not Found", "check --forge-repo"}, false},
		{422, nil, []string{"422 Validation Failed", "rejected the request's content"}, false},
		{502, nil, []string{"502 Bad Gateway", "retry later"}, false},
	} {
		g.FailNext(tc.status, tc.header)
		_, err := c.DefaultBranch(ctx)
		var fe *Error
		if !errors.As(err, &fe) || fe.Status != tc.status || fe.Reset.IsZero() == tc.reset {
			t.Errorf("%d: %v (%+v)", tc.status, err, fe)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: %q does not say %q", tc.status, err, w)
			}
		}
		if strings.ContainsAny(err.Error(), "\n\r") || strings.Contains(err.Error(), testToken) {
			t.Errorf("%d: %q", tc.status, err)
		}
	}
	if tc := (&Error{Status: 404}); !errors.Is(tc, ErrNotFound) {
		t.Error("a 404 is not ErrNotFound")
	}

	// A wrong token, refused by the forge itself.
	bad, _ := New(Target{Kind: GitHub, API: g.URL, Repo: "octo/hello", Token: "ghp_wrong"}, nil)
	if _, err := bad.DefaultBranch(ctx); err == nil || !strings.Contains(err.Error(), "401 Bad credentials") || strings.Contains(err.Error(), "ghp_wrong") {
		t.Errorf("a wrong token: %v", err)
	}
	// GraphQL's errors come back as an *Error too.
	pr, _ := c.CreatePR(ctx, NewPR{Title: "t", Head: "b", Base: "main", Draft: true})
	g.Fail(forgetest.Failure{Path: "/graphql", Status: 403})
	if _, err := c.UpdatePR(ctx, pr.Number, PRUpdate{Draft: ptr(false)}); !errors.As(err, new(*Error)) || !strings.Contains(err.Error(), "github POST /graphql: 403") {
		t.Errorf("GraphQL refused: %v", err)
	}
	g.SetPRState("octo/hello", pr.Number, "closed")
	var fe *Error
	if _, err := c.UpdatePR(ctx, pr.Number, PRUpdate{Draft: ptr(false)}); !errors.As(err, &fe) || fe.Status != 422 || !strings.Contains(err.Error(), "Pull request is closed") {
		t.Errorf("GraphQL error: %v", err)
	}
	for _, bad := range []string{"a/b/c", "a", "../x"} {
		if _, err := New(Target{Kind: GitHub, API: g.URL, Repo: bad, Token: "t"}, nil); err == nil {
			t.Errorf("New with repo %q: no error", bad)
		}
	}
}

func TestGitHubGraphQLURL(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com":       "https://api.github.com/graphql",
		"https://ghe.example/api/v3":   "https://ghe.example/api/graphql",
		"http://127.0.0.1:5555":        "http://127.0.0.1:5555/graphql",
		"http://127.0.0.1:5555/api/v3": "http://127.0.0.1:5555/api/graphql",
	} {
		if got := githubGraphQL(api); got != want {
			t.Errorf("githubGraphQL(%s) = %s, want %s", api, got, want)
		}
	}
}

func TestNewestGitHub(t *testing.T) {
	var pulls []githubPull
	if err := decodeJSON([]byte(`[
		{"number": 9, "state": "open", "head": {"ref": "b", "repo": {"full_name": "fork/hello"}}, "base": {"ref": "main", "repo": {"full_name": "octo/hello"}}},
		{"number": 4, "state": "closed", "head": {"ref": "b", "repo": {"full_name": "octo/hello"}}, "base": {"ref": "main", "repo": {"full_name": "octo/hello"}}},
		{"number": 6, "state": "open", "head": {"ref": "b", "repo": {"full_name": "octo/renamed"}}, "base": {"ref": "main", "repo": {"full_name": "octo/renamed"}}},
		{"number": 8, "state": "open", "head": {"ref": "b", "repo": null}, "base": {"ref": "main", "repo": {"full_name": "octo/hello"}}},
		{"number": 7, "state": "open", "head": {"ref": "c", "repo": {"full_name": "octo/hello"}}, "base": {"ref": "main"}}
	]`), &pulls); err != nil {
		t.Fatal(err)
	}
	if pr, err := newestGitHub(pulls, "octo/hello", "b"); err != nil || pr == nil || pr.Number != 6 {
		t.Errorf("newestGitHub = %+v, %v; want #6 (not a fork's, not a deleted fork's)", pr, err)
	}
	if pr, err := newestGitHub(pulls[:2], "octo/hello", "b"); err != nil || pr == nil || pr.Number != 4 || pr.State != Closed {
		t.Errorf("newestGitHub = %+v, %v; want #4", pr, err)
	}
	if _, err := newestGitHub([]githubPull{{Number: 1, State: "weird", Head: pulls[1].Head}}, "octo/hello", "b"); err == nil {
		t.Error("an unknown state: no error")
	}
}
