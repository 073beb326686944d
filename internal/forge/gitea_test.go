package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const giteaToken = "gitea0123456789secret"

// giteaFake is a small Gitea API v1 for the client's unit tests, answering
// as Gitea 1.26's swagger says (the real server is TestGiteaReal's).
type giteaFake struct {
	*httptest.Server
	mu       sync.Mutex
	pulls    []map[string]any // newest last
	comments map[int][]map[string]any
	reviews  map[int][]map[string]any
	rcomment map[int64][]map[string]any
	perms    map[string]string
	paths    []string
	limit    int
}

func newGiteaFake(t *testing.T) *giteaFake {
	f := &giteaFake{comments: map[int][]map[string]any{}, reviews: map[int][]map[string]any{}, rcomment: map[int64][]map[string]any{},
		perms: map[string]string{"owner": "owner", "adm": "admin", "wr": "write", "rd": "read"}, limit: 2}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func giteaUserJSON(id int64, login string) map[string]any {
	return map[string]any{"id": id, "login": login, "login_name": "", "full_name": "", "email": login + "@noreply.localhost", "is_admin": false}
}

func (f *giteaFake) pull(n int, title, head string, headRepo int64) map[string]any {
	_, wip := cutPrefix(title, giteaWIP)
	return map[string]any{"id": 100 + n, "number": n, "html_url": f.URL + "/o/r/pulls/" + strconv.Itoa(n), "state": "open", "merged": false,
		"merged_at": nil, "draft": wip, "title": title, "body": "", "user": giteaUserJSON(1, "o"), "is_locked": false,
		"head":       map[string]any{"label": head, "ref": head, "sha": fmt.Sprintf("%040d", n), "repo_id": headRepo, "repo": map[string]any{"id": headRepo, "full_name": "o/r"}},
		"base":       map[string]any{"label": "main", "ref": "main", "sha": fmt.Sprintf("%040d", 0), "repo_id": 1, "repo": map[string]any{"id": 1, "full_name": "o/r"}},
		"created_at": time.Date(2026, 1, 1, 0, n, 0, 0, time.UTC)}
}

func (f *giteaFake) write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// page answers one page of items (Gitea's page and limit), with a Link
// header to the next.
func (f *giteaFake) page(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	lo := min((page-1)*f.limit, len(items))
	hi := min(lo+f.limit, len(items))
	if hi < len(items) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, f.URL, r.URL.Path, q.Encode()))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(items)))
	f.write(w, 200, append([]map[string]any{}, items[lo:hi]...))
}

func (f *giteaFake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "token "+giteaToken {
		f.write(w, 401, map[string]any{"message": "token is required", "url": f.URL + "/api/swagger"})
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/api/v1/repos/o/r")
	var in map[string]any
	if r.Body != nil {
		json.NewDecoder(r.Body).Decode(&in)
	}
	num := func(i int) int {
		n, _ := strconv.Atoi(strings.Split(strings.Trim(p, "/"), "/")[i])
		return n
	}
	find := func(n int) map[string]any {
		for _, pr := range f.pulls {
			if pr["number"] == n {
				return pr
			}
		}
		return nil
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case p == "" && r.Method == "GET":
		f.write(w, 200, map[string]any{"id": 1, "full_name": "o/r", "default_branch": "trunk"})
	case p == "/pulls" && r.Method == "GET":
		var newest []map[string]any
		for i := len(f.pulls) - 1; i >= 0; i-- {
			newest = append(newest, f.pulls[i])
		}
		f.page(w, r, newest)
	case p == "/pulls" && r.Method == "POST":
		for _, pr := range f.pulls {
			if h := pr["head"].(map[string]any); pr["state"] == "open" && h["ref"] == in["head"] && h["repo_id"] == int64(1) {
				f.write(w, 409, map[string]any{"message": "pull request already exists for these targets", "url": f.URL + "/api/swagger"})
				return
			}
		}
		pr := f.pull(len(f.pulls)+len(f.comments)+1, in["title"].(string), in["head"].(string), 1)
		pr["body"] = in["body"]
		f.pulls = append(f.pulls, pr)
		f.write(w, 201, pr)
	case len(parts) == 2 && parts[0] == "pulls" && (r.Method == "GET" || r.Method == "PATCH"):
		pr := find(num(1))
		if pr == nil {
			f.write(w, 404, map[string]any{"message": "The target couldn't be found.", "errors": []string{}})
			return
		}
		for _, k := range []string{"title", "body", "state"} {
			if v, ok := in[k]; ok {
				pr[k] = v
			}
		}
		_, pr["draft"] = cutPrefix(pr["title"].(string), giteaWIP)
		f.write(w, 200, pr)
	case len(parts) == 2 && parts[0] == "issues" && r.Method == "GET":
		n := num(1)
		if pr := find(n); pr != nil {
			f.write(w, 200, map[string]any{"number": n, "title": pr["title"], "state": "open", "user": giteaUserJSON(1, "o"),
				"pull_request": map[string]any{"merged": false, "html_url": pr["html_url"]}})
			return
		}
		if n != 50 {
			f.write(w, 404, map[string]any{"message": "The target couldn't be found.", "errors": []string{}})
			return
		}
		f.write(w, 200, map[string]any{"id": 500, "number": 50, "html_url": f.URL + "/o/r/issues/50", "title": "Add a flag", "body": "Please",
			"user": giteaUserJSON(3, "alice"), "state": "open", "pull_request": nil, "labels": []any{}})
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "comments" && r.Method == "GET":
		f.write(w, 200, append([]map[string]any{}, f.comments[num(1)]...)) // not paginated, as Gitea's
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "comments" && r.Method == "POST":
		c := map[string]any{"id": 900 + len(f.comments[num(1)]), "body": in["body"], "user": giteaUserJSON(1, "o"),
			"created_at": time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), "html_url": "x"}
		f.comments[num(1)] = append(f.comments[num(1)], c)
		f.write(w, 201, c)
	case len(parts) == 3 && parts[0] == "pulls" && parts[2] == "reviews" && r.Method == "GET":
		f.page(w, r, f.reviews[num(1)])
	case len(parts) == 5 && parts[0] == "pulls" && parts[2] == "reviews" && parts[4] == "comments" && r.Method == "GET":
		id, _ := strconv.ParseInt(parts[3], 10, 64)
		f.write(w, 200, append([]map[string]any{}, f.rcomment[id]...))
	case len(parts) == 3 && parts[0] == "collaborators" && parts[2] == "permission":
		perm, ok := f.perms[parts[1]]
		if !ok {
			f.write(w, 404, map[string]any{"message": "user redirect does not exist [name: " + parts[1] + "]", "url": f.URL + "/api/swagger"})
			return
		}
		if parts[1] == "rd" {
			f.write(w, 403, map[string]any{"message": "Only admins can query all permissions, repo admins can query all repo permissions, collaborators can query only their own", "url": "x"})
			return
		}
		f.write(w, 200, map[string]any{"permission": perm, "role_name": perm, "user": giteaUserJSON(9, parts[1])})
	case r.URL.Path == "/api/v1/limited":
		w.Header().Set("Retry-After", "60")
		f.write(w, 429, map[string]any{"message": "rate limited"})
	default:
		f.write(w, 404, map[string]any{"message": "not found: " + r.URL.Path})
	}
}

func newGiteaTest(t *testing.T) (*giteaFake, Client) {
	f := newGiteaFake(t)
	c, err := New(Target{Kind: Gitea, API: f.URL + "/api/v1", Repo: "o/r", Token: giteaToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestGiteaPullRequests(t *testing.T) {
	f, c := newGiteaTest(t)
	ctx := context.Background()
	if b, err := c.DefaultBranch(ctx); err != nil || b != "trunk" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	// Other pull requests around it: one of a fork with the same branch
	// name, several of other branches, so that FindPR reads pages.
	f.pulls = append(f.pulls, f.pull(1, "old", "factory/x", 1))
	f.pulls[0]["state"], f.pulls[0]["merged"] = "closed", true
	f.pulls = append(f.pulls, f.pull(2, "fork", "factory/x", 77))
	for n := 3; n <= 7; n++ {
		f.pulls = append(f.pulls, f.pull(n, "other", "b"+strconv.Itoa(n), 1))
	}
	got, err := c.FindPR(ctx, "factory/x")
	if err != nil || got == nil || got.Number != 1 || got.State != Merged {
		t.Fatalf("FindPR = %+v, %v", got, err)
	}
	if got, err := c.FindPR(ctx, "nothing"); err != nil || got != nil {
		t.Errorf("FindPR of no branch = %+v, %v", got, err)
	}
	pr, err := c.CreatePR(ctx, NewPR{Title: "New work", Body: "b", Head: "factory/x", Base: "trunk", Draft: true})
	if err != nil || pr.Title != "WIP: New work" || !pr.Draft || pr.State != Open || pr.Number != 8 {
		t.Fatalf("CreatePR = %+v, %v", pr, err)
	}
	if _, err := c.CreatePR(ctx, NewPR{Title: "again", Head: "factory/x", Base: "trunk"}); err == nil || !strings.Contains(err.Error(), "409 pull request already exists") {
		t.Errorf("a second CreatePR: %v", err)
	}
	n := len(f.paths)
	if got, err := c.FindPR(ctx, "factory/x"); err != nil || got.Number != 8 || len(f.paths) != n+1 {
		t.Errorf("FindPR = %+v, %v after %d requests (the newest is on the first page)", got, err, len(f.paths)-n)
	}
	up, err := c.UpdatePR(ctx, 8, PRUpdate{Draft: ptr(false)})
	if err != nil || up.Draft || up.Title != "New work" {
		t.Errorf("ready = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 8, PRUpdate{Draft: ptr(true), Body: ptr("nb")}); err != nil || !up.Draft || up.Title != "WIP: New work" || up.Body != "nb" {
		t.Errorf("draft = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 8, PRUpdate{Title: ptr("[WIP] Renamed"), Draft: ptr(false)}); err != nil || up.Draft || up.Title != "Renamed" {
		t.Errorf("rename and ready = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 8, PRUpdate{State: ptr(Closed)}); err != nil || up.State != Closed {
		t.Errorf("close = %+v, %v", up, err)
	}
	if up, err := c.UpdatePR(ctx, 8, PRUpdate{State: ptr(Open)}); err != nil || up.State != Open {
		t.Errorf("reopen = %+v, %v", up, err)
	}
	if _, err := c.UpdatePR(ctx, 99, PRUpdate{Draft: ptr(false)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdatePR of nothing: %v", err)
	}
}

func TestGiteaIssuesAndComments(t *testing.T) {
	f, c := newGiteaTest(t)
	ctx := context.Background()
	is, err := c.Issue(ctx, 50)
	if err != nil || is.Title != "Add a flag" || is.Body != "Please" || is.Author.Login != "alice" || is.State != Open {
		t.Fatalf("Issue = %+v, %v", is, err)
	}
	pr, _ := c.CreatePR(ctx, NewPR{Title: "t", Head: "h", Base: "trunk"})
	if _, err := c.Issue(ctx, pr.Number); !errors.Is(err, ErrNotIssue) {
		t.Errorf("Issue of a pull request: %v", err)
	}
	at := func(m int) time.Time { return time.Date(2026, 1, 5, 0, m, 0, 0, time.UTC) }
	f.comments[pr.Number] = []map[string]any{
		{"id": 10, "body": "conversation", "user": giteaUserJSON(3, "alice"), "created_at": at(1)},
		{"id": 13, "body": "ci", "user": giteaUserJSON(-2, "gitea-actions"), "created_at": at(4)},
	}
	f.reviews[pr.Number] = []map[string]any{{"id": 5, "comments_count": 1, "state": "COMMENT"}, {"id": 6, "comments_count": 0}, {"id": 7, "comments_count": 1}}
	f.rcomment[5] = []map[string]any{{"id": 11, "body": "rename", "user": giteaUserJSON(4, "bob"), "path": "a.go", "position": 3, "original_position": 0, "created_at": at(2)}}
	f.rcomment[7] = []map[string]any{{"id": 12, "body": "old line", "user": giteaUserJSON(5, "renovate[bot]"), "path": "b.go", "position": 0, "original_position": 9, "created_at": at(3)}}
	mine, err := c.Comment(ctx, pr.Number, true, "factory: done")
	if err != nil || mine.Body != "factory: done" || mine.ID == 0 {
		t.Fatalf("Comment = %+v, %v", mine, err)
	}
	cs, err := c.Comments(ctx, pr.Number, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cm := range cs {
		got = append(got, fmt.Sprintf("%d %s %v %v %s:%d", cm.ID, cm.Author.Login, cm.Author.Bot, cm.Review, cm.Path, cm.Line))
	}
	want := "10 alice false false :0,11 bob false true a.go:3,12 renovate[bot] true true b.go:9,13 gitea-actions true false :0," + strconv.FormatInt(mine.ID, 10) + " o false false :0"
	if strings.Join(got, ",") != want {
		t.Errorf("Comments =\n%s\nwant\n%s", strings.Join(got, ","), want)
	}
	if cs, err := c.Comments(ctx, pr.Number, false); err != nil || len(cs) != 3 {
		t.Errorf("Comments without reviews = %v, %v", cs, err)
	}
}

func TestGiteaCanWriteAndErrors(t *testing.T) {
	f, c := newGiteaTest(t)
	ctx := context.Background()
	for login, want := range map[string]bool{"owner": true, "adm": true, "wr": true, "nobody": false} {
		if got, err := c.CanWrite(ctx, login); err != nil || got != want {
			t.Errorf("CanWrite(%q) = %v, %v; want %v", login, got, err, want)
		}
	}
	var fe *Error
	// The token is no admin: Gitea's 403 cannot tell, so not a writer.
	if got, err := c.CanWrite(ctx, "rd"); err != nil || got {
		t.Errorf("CanWrite by a token that is not an admin = %v, %v; want false, nil", got, err)
	}
	bad, _ := New(Target{Kind: Gitea, API: f.URL + "/api/v1", Repo: "o/r", Token: "wrong"}, nil)
	if _, err := bad.DefaultBranch(ctx); !errors.As(err, &fe) || fe.Status != 401 || !strings.Contains(err.Error(), "set GITEA_TOKEN") {
		t.Errorf("a wrong token: %v", err)
	}
	a, _ := newAPI(Target{Kind: Gitea, API: f.URL + "/api/v1", Repo: "o/r", Token: giteaToken}, nil)
	if err := a.get(ctx, "/limited", nil, nil); !errors.As(err, &fe) || fe.Status != 429 || fe.Reset.IsZero() {
		t.Errorf("a rate limit: %v", err)
	}
}
