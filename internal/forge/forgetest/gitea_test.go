package forgetest

import (
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// giteaGit runs git in dir with a private HOME and no system or global
// config; extra is appended to its environment.
func giteaGit(t *testing.T, dir string, extra []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, ".."),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"GIT_AUTHOR_NAME=Factory Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Factory Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
	}, extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func giteaMustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := giteaGit(t, dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// giteaHeaderEnv gives one git process an HTTP header for the server's URL
// through its environment only: not in argv, a URL or .git/config.
func giteaHeaderEnv(g *Gitea, header string) []string {
	return []string{
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http." + g.URL + "/.extraHeader",
		"GIT_CONFIG_VALUE_0=" + header,
	}
}

func giteaBasic(user, pass string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

type giteaPull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Draft  bool   `json:"draft"`
	Merged bool   `json:"merged"`
	Head   struct {
		Ref string `json:"ref"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// TestGitea drives a real Gitea the way factory's forge code will: pushes
// over HTTP with the token in git's environment, pull requests (draft,
// lookup by head branch), a collaborator's permission, review comments.
func TestGitea(t *testing.T) {
	gitconfig := filepath.Join(os.Getenv("HOME"), ".gitconfig")
	before, errBefore := os.Stat(gitconfig)

	began := time.Now()
	g := StartGitea(t)
	t.Logf("StartGitea took %s", time.Since(began).Round(time.Millisecond))

	var version struct {
		Version string `json:"version"`
	}
	g.Do(t, "", http.MethodGet, "/version", nil, &version)
	if version.Version != strings.TrimPrefix(GiteaVersion, "v") {
		t.Errorf("/version says %q, want %q", version.Version, strings.TrimPrefix(GiteaVersion, "v"))
	}

	clone := g.CreateRepo(t, "demo")
	if want := g.URL + "/" + g.Admin + "/demo.git"; clone != want {
		t.Errorf("clone URL %q, want %q", clone, want)
	}

	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	giteaMustGit(t, work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	giteaMustGit(t, work, "add", "README.md")
	giteaMustGit(t, work, "commit", "-q", "-m", "first")
	giteaMustGit(t, work, "remote", "add", "origin", clone)

	// Without a header git has nothing to authenticate with: refused.
	if out, err := giteaGit(t, work, nil, "push", "-q", "origin", "main"); err == nil {
		t.Fatalf("an unauthenticated push succeeded:\n%s", out)
	}
	// The header forms Gitea 1.26 accepts for git over HTTP (services/auth:
	// Basic with the token as password or as the user name; the OAuth2
	// method's "token X" / "Bearer X"). factory sends Basic login:token.
	forms := []struct {
		name, header string
	}{
		{"basic-login-token", giteaBasic(g.Admin, g.Token)},
		{"basic-token-as-user", giteaBasic(g.Token, "")},
		{"token", "Authorization: token " + g.Token},
		{"bearer", "Authorization: Bearer " + g.Token},
	}
	for i, f := range forms {
		ref := "main"
		if i > 0 {
			ref = "HEAD:refs/heads/form-" + f.name
		}
		if out, err := giteaGit(t, work, giteaHeaderEnv(g, f.header), "push", "-q", "origin", ref); err != nil {
			t.Errorf("push with %s: %v\n%s", f.name, err, out)
		}
	}
	// A wrong token is refused, and the token is nowhere in the clone's config.
	if out, err := giteaGit(t, work, giteaHeaderEnv(g, giteaBasic(g.Admin, strings.Repeat("0", 40))), "push", "-q", "origin", "HEAD:refs/heads/wrong"); err == nil {
		t.Errorf("a push with a wrong token succeeded:\n%s", out)
	}
	config, err := os.ReadFile(filepath.Join(work, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(config), g.Token) {
		t.Errorf(".git/config holds the token:\n%s", config)
	}

	auth := giteaHeaderEnv(g, giteaBasic(g.Admin, g.Token))
	giteaMustGit(t, work, "checkout", "-q", "-b", "factory/issue-1")
	if err := os.WriteFile(filepath.Join(work, "feature.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	giteaMustGit(t, work, "add", "feature.txt")
	giteaMustGit(t, work, "commit", "-q", "-m", "feature")
	if out, err := giteaGit(t, work, auth, "push", "-q", "origin", "factory/issue-1"); err != nil {
		t.Fatalf("push factory/issue-1: %v\n%s", err, out)
	}

	// A draft is a title with a WIP prefix ("WIP:" or "[WIP]"); the API has
	// no draft option on create, but reports draft.
	repo := "/repos/" + g.Admin + "/demo"
	var pr giteaPull
	g.Do(t, g.Token, http.MethodPost, repo+"/pulls", map[string]any{
		"head": "factory/issue-1", "base": "main", "title": "WIP: the feature", "body": "body",
	}, &pr)
	if pr.Number == 0 || !pr.Draft || pr.State != "open" || pr.Head.Ref != "factory/issue-1" || pr.Base.Ref != "main" {
		t.Fatalf("created %+v, want an open draft from factory/issue-1 to main", pr)
	}
	var ready giteaPull
	g.Do(t, g.Token, http.MethodPatch, repo+"/pulls/"+strconv.Itoa(pr.Number), map[string]any{"title": "the feature"}, &ready)
	if ready.Draft {
		t.Errorf("a title without WIP: still a draft: %+v", ready)
	}

	// Finding the PR of a head branch: /pulls/{base}/{head} (a head with a
	// slash works); the list has no head filter (an unknown head= is ignored).
	var found giteaPull
	g.Do(t, g.Token, http.MethodGet, repo+"/pulls/main/factory/issue-1", nil, &found)
	if found.Number != pr.Number {
		t.Errorf("/pulls/main/factory/issue-1 gave #%d, want #%d", found.Number, pr.Number)
	}
	var listed []giteaPull
	g.Do(t, g.Token, http.MethodGet, repo+"/pulls?state=all&head=no-such-branch", nil, &listed)
	if len(listed) != 1 || listed[0].Number != pr.Number {
		t.Errorf("pulls?state=all&head=no-such-branch gave %+v: head is a filter after all?", listed)
	}

	// A second account with read permission.
	readerToken := g.CreateUser(t, "reader")
	g.AddCollaborator(t, "demo", "reader", "read")
	var perm struct {
		Permission string `json:"permission"`
		User       struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.Do(t, g.Token, http.MethodGet, repo+"/collaborators/reader/permission", nil, &perm)
	if perm.Permission != "read" || perm.User.Login != "reader" {
		t.Errorf("reader's permission: %+v, want read", perm)
	}
	g.Do(t, g.Token, http.MethodGet, repo+"/collaborators/"+g.Admin+"/permission", nil, &perm)
	if perm.Permission != "owner" {
		t.Errorf("the owner's permission: %q, want owner", perm.Permission)
	}
	// The reader's token reads, and cannot push.
	g.Do(t, readerToken, http.MethodGet, repo+"/pulls/"+strconv.Itoa(pr.Number), nil, &found)
	if out, err := giteaGit(t, work, giteaHeaderEnv(g, giteaBasic("reader", readerToken)), "push", "-q", "origin", "HEAD:refs/heads/reader"); err == nil {
		t.Errorf("a push with read permission succeeded:\n%s", out)
	}

	// Review comments: a review (with a code comment) by the reader, then
	// /pulls/{n}/reviews and /pulls/{n}/reviews/{id}/comments.
	g.Do(t, readerToken, http.MethodPost, repo+"/pulls/"+strconv.Itoa(pr.Number)+"/reviews", map[string]any{
		"event": "COMMENT", "body": "a few things",
		"comments": []map[string]any{{"path": "feature.txt", "body": "say three", "new_position": 2}},
	}, nil)
	var reviews []struct {
		ID       int64  `json:"id"`
		State    string `json:"state"`
		Body     string `json:"body"`
		Comments int    `json:"comments_count"`
		User     struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.Do(t, g.Token, http.MethodGet, repo+"/pulls/"+strconv.Itoa(pr.Number)+"/reviews", nil, &reviews)
	if len(reviews) != 1 || reviews[0].User.Login != "reader" || reviews[0].State != "COMMENT" || reviews[0].Body != "a few things" || reviews[0].Comments != 1 {
		t.Fatalf("reviews: %+v", reviews)
	}
	var comments []struct {
		ID       int64  `json:"id"`
		Body     string `json:"body"`
		Path     string `json:"path"`
		Position int    `json:"position"`
		ReviewID int64  `json:"pull_request_review_id"`
		User     struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.Do(t, g.Token, http.MethodGet, repo+"/pulls/"+strconv.Itoa(pr.Number)+"/reviews/"+strconv.FormatInt(reviews[0].ID, 10)+"/comments", nil, &comments)
	if len(comments) != 1 || comments[0].Body != "say three" || comments[0].Path != "feature.txt" || comments[0].Position != 2 ||
		comments[0].User.Login != "reader" || comments[0].ReviewID != reviews[0].ID {
		t.Errorf("review comments: %+v", comments)
	}

	// A closed PR stays findable by base/head, and no second PR can be
	// opened while one is open.
	g.Do(t, g.Token, http.MethodPatch, repo+"/pulls/"+strconv.Itoa(pr.Number), map[string]any{"state": "closed"}, nil)
	g.Do(t, g.Token, http.MethodGet, repo+"/pulls/main/factory/issue-1", nil, &found)
	if found.Number != pr.Number || found.State != "closed" {
		t.Errorf("after closing, /pulls/main/factory/issue-1 gave %+v", found)
	}

	// Gitea's own git config went to its HOME, not the user's.
	if _, err := os.Stat(filepath.Join(g.dir, "home")); err != nil {
		t.Error(err)
	}
	after, errAfter := os.Stat(gitconfig)
	if (errBefore == nil) != (errAfter == nil) || (errBefore == nil && !after.ModTime().Equal(before.ModTime())) {
		t.Errorf("%s changed while Gitea ran", gitconfig)
	}
}
