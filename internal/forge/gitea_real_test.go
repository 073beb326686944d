package forge

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/forge/forgetest"
)

// TestGiteaReal runs every method of the Gitea client against a real
// Gitea (forgetest.StartGitea; skipped when it is not built).
func TestGiteaReal(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo(t, "hello")
	repo := "/repos/" + g.Admin + "/hello"
	put := func(path, branch, newBranch string) {
		body := map[string]any{"content": base64.StdEncoding.EncodeToString([]byte("line one\nline two\n")), "message": "add " + path}
		if branch != "" {
			body["branch"] = branch
		}
		if newBranch != "" {
			body["new_branch"] = newBranch
		}
		g.Do(t, g.Token, http.MethodPost, repo+"/contents/"+path, body, nil)
	}
	put("README.md", "main", "")
	put("a.txt", "main", "factory/x")
	put("b.txt", "main", "factory/y")
	aliceToken := g.CreateUser(t, "alice")
	g.AddCollaborator(t, "hello", "alice", "write")
	g.CreateUser(t, "bob")
	g.AddCollaborator(t, "hello", "bob", "read")

	c, err := New(Target{Kind: Gitea, API: g.API, Repo: g.Admin + "/hello", Token: g.Token}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := c.DefaultBranch(ctx); err != nil || b != "main" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	if pr, err := c.FindPR(ctx, "factory/x"); err != nil || pr != nil {
		t.Fatalf("FindPR before = %+v, %v", pr, err)
	}
	pr, err := c.CreatePR(ctx, NewPR{Title: "Add a", Body: "body", Head: "factory/x", Base: "main", Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Title != "WIP: Add a" || !pr.Draft || pr.State != Open || pr.Head != "factory/x" || pr.Base != "main" || pr.HeadSHA == "" ||
		!strings.HasPrefix(pr.URL, g.URL+"/") || pr.Body != "body" {
		t.Errorf("CreatePR = %+v", pr)
	}
	var fe *Error
	if _, err := c.CreatePR(ctx, NewPR{Title: "again", Head: "factory/x", Base: "main"}); !errors.As(err, &fe) || (fe.Status != 409 && fe.Status != 422) {
		t.Errorf("a second CreatePR: %v", err)
	}
	if f, err := c.FindPR(ctx, "factory/x"); err != nil || f == nil || f.Number != pr.Number {
		t.Fatalf("FindPR = %+v, %v", f, err)
	}
	if up, err := c.UpdatePR(ctx, pr.Number, PRUpdate{Draft: ptr(false), Body: ptr("new body")}); err != nil || up.Draft || up.Title != "Add a" || up.Body != "new body" {
		t.Errorf("ready = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, pr.Number, PRUpdate{State: ptr(Closed)}); err != nil || up.State != Closed {
		t.Errorf("close = %+v, %v", up, err)
	}
	if f, _ := c.FindPR(ctx, "factory/x"); f == nil || f.State != Closed {
		t.Errorf("FindPR closed = %+v", f)
	}
	if up, err := c.UpdatePR(ctx, pr.Number, PRUpdate{State: ptr(Open), Draft: ptr(true)}); err != nil || up.State != Open || !up.Draft {
		t.Errorf("reopen as a draft = %+v, %v", up, err)
	}

	// Comments: the conversation, a review comment, factory's own.
	g.Do(t, aliceToken, http.MethodPost, repo+"/issues/"+strconv.Itoa(pr.Number)+"/comments", map[string]any{"body": "please rename"}, nil)
	g.Do(t, aliceToken, http.MethodPost, repo+"/pulls/"+strconv.Itoa(pr.Number)+"/reviews", map[string]any{
		"event": "COMMENT", "body": "",
		"comments": []any{map[string]any{"path": "a.txt", "body": "this line", "new_position": 2}},
	}, nil)
	mine, err := c.Comment(ctx, pr.Number, true, "factory: on it")
	if err != nil || mine.ID == 0 || mine.Author.Login != g.Admin {
		t.Fatalf("Comment = %+v, %v", mine, err)
	}
	cs, err := c.Comments(ctx, pr.Number, true)
	if err != nil {
		t.Fatal(err)
	}
	var review, convo int
	for _, cm := range cs {
		switch {
		case cm.Review && cm.Path == "a.txt" && cm.Line == 2 && cm.Author.Login == "alice" && cm.Body == "this line":
			review++
		case !cm.Review && cm.Author.Login == "alice" && cm.Body == "please rename":
			convo++
		}
	}
	if review != 1 || convo != 1 || cs[len(cs)-1].ID != mine.ID {
		t.Errorf("Comments = %+v", cs)
	}

	// An issue, and a pull request's number that is not one.
	var created struct {
		Number int `json:"number"`
	}
	g.Do(t, aliceToken, http.MethodPost, repo+"/issues", map[string]any{"title": "Add a flag", "body": "Please."}, &created)
	is, err := c.Issue(ctx, created.Number)
	if err != nil || is.Title != "Add a flag" || is.Body != "Please." || is.Author.Login != "alice" || is.State != Open {
		t.Errorf("Issue = %+v, %v", is, err)
	}
	if _, err := c.Issue(ctx, pr.Number); !errors.Is(err, ErrNotIssue) {
		t.Errorf("Issue of a pull request: %v", err)
	}
	if _, err := c.Comment(ctx, created.Number, false, "factory: noted"); err != nil {
		t.Errorf("Comment on the issue: %v", err)
	}
	if cs, err := c.Comments(ctx, created.Number, false); err != nil || len(cs) != 1 || cs[0].Body != "factory: noted" {
		t.Errorf("Comments of the issue = %+v, %v", cs, err)
	}

	for login, want := range map[string]bool{g.Admin: true, "alice": true, "bob": false, "nobody-here": false} {
		if got, err := c.CanWrite(ctx, login); err != nil || got != want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v", login, got, err, want)
		}
	}
	// Alice writes but is no admin: Gitea answers her about herself only.
	ac, _ := New(Target{Kind: Gitea, API: g.API, Repo: g.Admin + "/hello", Token: aliceToken}, nil)
	if got, err := ac.CanWrite(ctx, "alice"); err != nil || !got {
		t.Errorf("alice's CanWrite(alice) = %v, %v", got, err)
	}
	// About bob Gitea refuses her (403): cannot tell, so not a writer.
	if got, err := ac.CanWrite(ctx, "bob"); err != nil || got {
		t.Errorf("alice's CanWrite(bob) = %v, %v; want false, nil", got, err)
	}

	// Merged; the newest of a branch; a wrong token.
	g.Do(t, g.Token, http.MethodPatch, repo+"/pulls/"+strconv.Itoa(pr.Number), map[string]any{"title": "Add a"}, nil)
	merge(t, g.API+repo+"/pulls/"+strconv.Itoa(pr.Number)+"/merge", g.Token)
	if f, err := c.FindPR(ctx, "factory/x"); err != nil || f == nil || f.State != Merged {
		t.Errorf("FindPR merged = %+v, %v", f, err)
	}
	y1, err := c.CreatePR(ctx, NewPR{Title: "y one", Head: "factory/y", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdatePR(ctx, y1.Number, PRUpdate{State: ptr(Closed)}); err != nil {
		t.Fatal(err)
	}
	y2, err := c.CreatePR(ctx, NewPR{Title: "y two", Head: "factory/y", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := c.FindPR(ctx, "factory/y"); err != nil || f == nil || f.Number != y2.Number {
		t.Errorf("FindPR = %+v, %v; want #%d", f, err, y2.Number)
	}
	bad, _ := New(Target{Kind: Gitea, API: g.API, Repo: g.Admin + "/hello", Token: "0123456789abcdef"}, nil)
	if _, err := bad.DefaultBranch(ctx); !errors.As(err, &fe) || fe.Status != 401 {
		t.Errorf("a wrong token: %v", err)
	}
}

// merge merges a pull request, waiting while Gitea still checks whether it
// can (its merge answers 405 until then).
func merge(t *testing.T, url, token string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"Do":"merge"}`))
		req.Header.Set("Authorization", "token "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("merge: %s %s", resp.Status, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
