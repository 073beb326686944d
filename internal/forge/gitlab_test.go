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

const glToken = "glpat-test0123456789secret"

func newGitLabTest(t *testing.T) (*forgetest.GitLab, Client) {
	t.Helper()
	g := forgetest.NewGitLab(t, glToken)
	g.AddProject("team/sub/app", "main")
	c, err := New(Target{Kind: GitLab, API: g.API, Repo: "team/sub/app", Token: glToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func TestGitLabMergeRequests(t *testing.T) {
	g, c := newGitLabTest(t)
	ctx := context.Background()
	if b, err := c.DefaultBranch(ctx); err != nil || b != "main" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	if pr, err := c.FindPR(ctx, "factory/issue-3"); err != nil || pr != nil {
		t.Fatalf("FindPR before = %+v, %v", pr, err)
	}
	pr, err := c.CreatePR(ctx, NewPR{Title: "Fix the parser", Body: "desc", Head: "factory/issue-3", Base: "main", Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 1 || !pr.Draft || pr.Title != "Draft: Fix the parser" || pr.State != Open || pr.Body != "desc" ||
		pr.Head != "factory/issue-3" || pr.Base != "main" || !strings.HasSuffix(pr.URL, "/team/sub/app/-/merge_requests/1") || pr.HeadSHA == "" {
		t.Errorf("CreatePR = %+v", pr)
	}
	_, err = c.CreatePR(ctx, NewPR{Title: "again", Head: "factory/issue-3", Base: "main"})
	var fe *Error
	if !errors.As(err, &fe) || fe.Status != 409 || !strings.Contains(err.Error(), "Another open merge request already exists for this source branch: !1") ||
		!strings.Contains(err.Error(), "may already exist") {
		t.Errorf("a second CreatePR: %v", err)
	}
	if f, err := c.FindPR(ctx, "factory/issue-3"); err != nil || f == nil || *f != *pr {
		t.Fatalf("FindPR = %+v, %v", f, err)
	}
	// Ready: the prefix goes; a draft again: it comes back, once.
	up, err := c.UpdatePR(ctx, 1, PRUpdate{Draft: ptr(false), Body: ptr("new")})
	if err != nil || up.Draft || up.Title != "Fix the parser" || up.Body != "new" {
		t.Fatalf("UpdatePR ready = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 1, PRUpdate{Draft: ptr(true)}); err != nil || !up.Draft || up.Title != "Draft: Fix the parser" {
		t.Errorf("UpdatePR draft = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 1, PRUpdate{Draft: ptr(true)}); err != nil || up.Title != "Draft: Fix the parser" {
		t.Errorf("UpdatePR draft twice = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 1, PRUpdate{Title: ptr("[Draft] New title"), Draft: ptr(false)}); err != nil || up.Draft || up.Title != "New title" {
		t.Errorf("UpdatePR title and ready = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Closed)}); err != nil || up.State != Closed {
		t.Errorf("close = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 1, PRUpdate{State: ptr(Open)}); err != nil || up.State != Open {
		t.Errorf("reopen = %+v, %v", up, err)
	}
	if got, err := c.UpdatePR(ctx, 1, PRUpdate{}); err != nil || got.Number != 1 {
		t.Errorf("an empty update = %+v, %v", got, err)
	}
	g.SetMRState("team/sub/app", 1, "merged")
	if f, _ := c.FindPR(ctx, "factory/issue-3"); f == nil || f.State != Merged {
		t.Errorf("FindPR merged = %+v", f)
	}
	// A fork's merge request from a branch of the same name is not ours;
	// a newer one of ours is the one found.
	g.AddMR(forgetest.GitLabMR{Project: "team/sub/app", Title: "fork", Source: "factory/issue-3", Target: "main", Author: "eve", SourceProjectID: 999})
	if f, _ := c.FindPR(ctx, "factory/issue-3"); f == nil || f.Number != 1 {
		t.Errorf("FindPR with a fork's = %+v", f)
	}
	three, err := c.CreatePR(ctx, NewPR{Title: "again", Head: "factory/issue-3", Base: "main"})
	if err != nil || three.Number != 3 || three.Draft {
		t.Fatalf("CreatePR = %+v, %v", three, err)
	}
	if f, _ := c.FindPR(ctx, "factory/issue-3"); f == nil || f.Number != 3 {
		t.Errorf("FindPR = %+v, want !3", f)
	}
	g.SetMRState("team/sub/app", 3, "locked")
	if f, _ := c.FindPR(ctx, "factory/issue-3"); f == nil || f.State != Open {
		t.Errorf("FindPR locked = %+v", f)
	}
	for _, r := range g.Requests() {
		if r.Header.Get("Private-Token") != glToken || r.Header.Get("Authorization") != "" || strings.Contains(r.Path+r.Query.Encode(), glToken) {
			t.Errorf("%s %s: headers %v", r.Method, r.Path, r.Header)
		}
		if !strings.HasPrefix(r.Path, "/api/v4/projects/team%2Fsub%2Fapp") {
			t.Errorf("%s %s: not the escaped project path", r.Method, r.Path)
		}
	}
}

func TestGitLabIssuesAndNotes(t *testing.T) {
	for _, noLink := range []bool{false, true} {
		t.Run("X-Next-Page only="+strconv.FormatBool(noLink), func(t *testing.T) {
			g, c := newGitLabTest(t)
			g.NoLink = noLink
			ctx := context.Background()
			iid := g.AddIssue("team/sub/app", "alice", "Crash on empty input", "Steps: …")
			g.AddNote("team/sub/app", iid, false, "alice", "one")
			g.AddSystemNote("team/sub/app", iid, false, "alice", "changed the description")
			g.AddNote("team/sub/app", iid, false, "project_7_bot_4f3a2b", "automated")
			g.AddNote("team/sub/app", iid, false, "renovate_bot", "bump")
			g.AddNote("team/sub/app", iid, false, "bob", "two")

			is, err := c.Issue(ctx, iid)
			if err != nil || is.Number != iid || is.Title != "Crash on empty input" || is.Body != "Steps: …" || is.Author.Login != "alice" ||
				is.State != Open || !strings.HasSuffix(is.URL, "/team/sub/app/-/issues/1") {
				t.Fatalf("Issue = %+v, %v", is, err)
			}
			cs, err := c.Comments(ctx, iid, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cm := range cs {
				got = append(got, cm.Author.Login+":"+strconv.FormatBool(cm.Author.Bot)+":"+cm.Body)
			}
			if strings.Join(got, ",") != "alice:false:one,project_7_bot_4f3a2b:true:automated,renovate_bot:true:bump,bob:false:two" {
				t.Errorf("Comments = %v", got)
			}
			pages := 0
			for _, r := range g.Requests() {
				if strings.HasSuffix(r.Path, "/issues/1/notes") {
					pages++
				}
			}
			if pages != 3 {
				t.Errorf("read %d pages of 2, want 3", pages)
			}

			mr, err := c.CreatePR(ctx, NewPR{Title: "t", Head: "b", Base: "main"})
			if err != nil {
				t.Fatal(err)
			}
			g.AddNote("team/sub/app", mr.Number, true, "alice", "looks good")
			g.AddDiffNote("team/sub/app", mr.Number, "bob", "src/parse.go", 42, "off by one")
			mine, err := c.Comment(ctx, mr.Number, true, "factory: fixed")
			if err != nil || mine.ID == 0 || mine.Body != "factory: fixed" {
				t.Fatalf("Comment = %+v, %v", mine, err)
			}
			onIssue, err := c.Comment(ctx, iid, false, "factory: on the issue")
			if err != nil || len(g.Notes("team/sub/app", iid, false)) != 6 {
				t.Fatalf("Comment on the issue = %+v, %v", onIssue, err)
			}
			cs, err = c.Comments(ctx, mr.Number, true)
			if err != nil || len(cs) != 3 {
				t.Fatalf("Comments of the merge request = %+v, %v", cs, err)
			}
			if d := cs[1]; !d.Review || d.Path != "src/parse.go" || d.Line != 42 || d.Author.Login != "bob" {
				t.Errorf("the diff note = %+v", d)
			}
			if cs[0].Review || cs[2].ID != mine.ID {
				t.Errorf("Comments = %+v", cs)
			}
			if _, err := c.Issue(ctx, 77); !errors.Is(err, ErrNotFound) {
				t.Errorf("Issue of nothing: %v", err)
			}
		})
	}
}

func TestGitLabCanWrite(t *testing.T) {
	g, c := newGitLabTest(t)
	for user, level := range map[string]int{"owner": 50, "maint": 40, "dev": 30, "rep": 20, "guest": 10} {
		g.SetAccess(user, level)
	}
	g.AddUser("outsider", false)
	for login, want := range map[string]bool{"owner": true, "maint": true, "dev": true, "rep": false, "guest": false, "outsider": false, "nobody": false, "": false} {
		got, err := c.CanWrite(context.Background(), login)
		if err != nil || got != want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v", login, got, err, want)
		}
	}
}

func TestGitLabErrors(t *testing.T) {
	g, c := newGitLabTest(t)
	ctx := context.Background()
	reset := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	for _, tc := range []struct {
		status int
		header http.Header
		want   []string
	}{
		{401, nil, []string{"401 Unauthorized", "set GITLAB_TOKEN"}},
		{403, nil, []string{"403 Forbidden", "lacks a permission"}},
		{404, nil, []string{"404 Not Found", "--forge-repo"}},
		{429, http.Header{"Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}}, []string{"429 Retry later", "rate limited until " + reset.UTC().Format(time.RFC3339)}},
		{429, nil, []string{"429 Retry later", "rate limited; rerun in a few minutes"}},
	} {
		g.FailNext(tc.status, tc.header)
		_, err := c.DefaultBranch(ctx)
		var fe *Error
		if !errors.As(err, &fe) || fe.Status != tc.status {
			t.Errorf("%d: %v", tc.status, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: %q does not say %q", tc.status, err, w)
			}
		}
	}
	_, err := c.UpdatePR(ctx, 1, PRUpdate{Title: ptr("x")})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdatePR of nothing: %v", err)
	}
	if _, err := c.CreatePR(ctx, NewPR{Title: "t", Head: "main", Base: "main"}); err == nil || !strings.Contains(err.Error(), "422 You can't use same project/branch") {
		t.Errorf("CreatePR main to main: %v", err)
	}
	g.Branch = func(_, b string) (string, bool) { return "", b == "main" }
	if _, err := c.CreatePR(ctx, NewPR{Title: "t", Head: "gone", Base: "main"}); err == nil || !strings.Contains(err.Error(), `Source branch "gone" does not exist`) {
		t.Errorf("CreatePR of a missing branch: %v", err)
	}
	bad, _ := New(Target{Kind: GitLab, API: g.API, Repo: "team/sub/app", Token: "glpat-wrong"}, nil)
	if _, err := bad.DefaultBranch(ctx); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "glpat-wrong") {
		t.Errorf("a wrong token: %v", err)
	}
	other, _ := New(Target{Kind: GitLab, API: g.API, Repo: "team/other", Token: glToken}, nil)
	if _, err := other.DefaultBranch(ctx); err == nil || !strings.Contains(err.Error(), "404 Project Not Found") {
		t.Errorf("another project: %v", err)
	}
}
