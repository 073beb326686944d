package forge

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// The readers of what a forge answers, fed arbitrary bytes through the
// same decoding the clients use (no network in the loop).

func checkPR(t *testing.T, who string, pr *PR) {
	t.Helper()
	if pr.Number <= 0 {
		t.Fatalf("%s: a pull request numbered %d", who, pr.Number)
	}
	switch pr.State {
	case Open, Closed, Merged:
	default:
		t.Fatalf("%s: state %q", who, pr.State)
	}
	for _, s := range []string{pr.Title, pr.Body, pr.URL, pr.Head, pr.Base, pr.HeadSHA} {
		if !utf8.ValidString(s) {
			t.Fatalf("%s: invalid UTF-8 %q", who, s)
		}
	}
}

func FuzzDecodePR(f *testing.F) {
	f.Add([]byte(`{"number":1,"node_id":"PR_kwDO","html_url":"https://github.com/o/r/pull/1","state":"open","draft":true,"title":"t","body":null,"merged_at":null,"head":{"ref":"b","sha":"abc","repo":{"full_name":"o/r"}},"base":{"ref":"main"}}`))
	f.Add([]byte(`[{"number":2,"state":"closed","merged_at":"2026-01-01T00:00:00Z","merged":true,"title":"WIP: x","head":{"ref":"b","repo_id":1,"repo":{"full_name":"o/r"}},"base":{"ref":"main","repo_id":1}}]`))
	f.Add([]byte(`{"iid":3,"web_url":"https://gitlab.com/g/p/-/merge_requests/3","state":"locked","draft":false,"title":"Draft: y","description":"d","source_branch":"b","target_branch":"main","sha":"s","source_project_id":7,"target_project_id":7}`))
	f.Add([]byte(`[{"iid":4,"state":"merged","source_branch":"b","source_project_id":1,"target_project_id":1},{"iid":5,"state":"opened","source_branch":"b","source_project_id":2,"target_project_id":1}]`))
	f.Add([]byte(`{"data":{"markPullRequestReadyForReview":{"pullRequest":{"isDraft":false}}}}`))
	f.Add([]byte(`{"data":{"convertPullRequestToDraft":null},"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}`))
	f.Add([]byte(`{"number":"1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var gh githubPull
		if decodeJSON(data, &gh) == nil {
			if pr, err := gh.pr(); err == nil {
				checkPR(t, "github", pr)
				if (gh.MergedAt != nil && *gh.MergedAt != "") != (pr.State == Merged) {
					t.Fatalf("github: merged_at %v, state %s", gh.MergedAt, pr.State)
				}
			}
		}
		var ghs []githubPull
		if decodeJSON(data, &ghs) == nil {
			if pr, err := newestGitHub(ghs, "o/r", "b"); err == nil && pr != nil {
				checkPR(t, "github list", pr)
				if pr.Head != "b" {
					t.Fatalf("github: FindPR found head %q", pr.Head)
				}
			}
		}
		var gt giteaPull
		if decodeJSON(data, &gt) == nil {
			if pr, err := gt.pr(); err == nil {
				checkPR(t, "gitea", pr)
				if _, wip := cutPrefix(gt.Title, giteaWIP); wip && !pr.Draft {
					t.Fatalf("gitea: %q is not a draft", gt.Title)
				}
			}
		}
		var gts []giteaPull
		if decodeJSON(data, &gts) == nil {
			if pr, err := newestGitea(gts, "o/r", "b"); err == nil && pr != nil {
				checkPR(t, "gitea list", pr)
			}
		}
		var gl gitlabMR
		if decodeJSON(data, &gl) == nil {
			if pr, err := gl.pr(); err == nil {
				checkPR(t, "gitlab", pr)
				if _, d := cutPrefix(gl.Title, gitlabDraft); d && !pr.Draft {
					t.Fatalf("gitlab: %q is not a draft", gl.Title)
				}
			}
		}
		var gls []gitlabMR
		if decodeJSON(data, &gls) == nil {
			if pr, err := newestGitLab(gls, "b"); err == nil && pr != nil {
				checkPR(t, "gitlab list", pr)
				for _, m := range gls {
					if m.IID == pr.Number && m.SourceProjectID != m.TargetProjectID {
						t.Fatalf("gitlab: a fork's merge request found")
					}
				}
			}
		}
		for _, field := range []string{"markPullRequestReadyForReview", "convertPullRequestToDraft"} {
			_, err := decodeGraphQLDraft(data, field)
			if fe, ok := err.(*Error); ok && (len(fe.Message) > maxMessage || strings.ContainsAny(fe.Message, "\r\n")) {
				t.Fatalf("graphql: message %q", fe.Message)
			}
		}
	})
}

func FuzzComments(f *testing.F) {
	f.Add([]byte(`[{"id":1,"user":{"login":"a","type":"User"},"body":"x","created_at":"2026-01-01T00:00:00Z"},{"id":2,"user":{"login":"dependabot[bot]","type":"Bot"},"body":"y","path":"a.go","line":null,"original_line":4,"created_at":"2026-01-01T00:00:00Z"}]`))
	f.Add([]byte(`[{"id":3,"user":{"id":-2,"login":"gitea-actions"},"body":"z","path":"b.go","position":0,"original_position":9,"created_at":"2026-01-02T00:00:00+01:00"}]`))
	f.Add([]byte(`[{"id":4,"body":"n","author":{"id":1,"username":"project_1_bot_ab"},"created_at":"2026-01-01T00:00:00.000Z","system":false,"type":"DiffNote","position":{"new_path":"c.go","new_line":3,"old_line":null}},{"id":5,"system":true,"body":"added 1 commit","created_at":"2026-01-01T00:00:00Z"}]`))
	f.Add([]byte(`[{"id":0}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(who string, cs []Comment, err error) {
			if err != nil {
				return
			}
			for i, c := range cs {
				if c.ID <= 0 {
					t.Fatalf("%s: a comment with id %d", who, c.ID)
				}
				if !c.Review && (c.Path != "" || c.Line != 0) {
					t.Fatalf("%s: a conversation comment with a place: %+v", who, c)
				}
				if i > 0 {
					p := cs[i-1]
					if p.Created.After(c.Created) || (p.Created.Equal(c.Created) && p.ID > c.ID) {
						t.Fatalf("%s: not oldest first: %+v before %+v", who, p, c)
					}
				}
			}
		}
		var gh []githubComment
		if decodeJSON(data, &gh) == nil {
			cs, err := mergeComments(GitHub, gh, gh)
			check("github", cs, err)
			if err == nil && len(cs) != 2*len(gh) {
				t.Fatalf("github: %d comments of %d", len(cs), 2*len(gh))
			}
		}
		var gt []giteaComment
		if decodeJSON(data, &gt) == nil {
			cs, err := mergeComments(Gitea, gt, gt)
			check("gitea", cs, err)
		}
		var gl []gitlabNote
		if decodeJSON(data, &gl) == nil {
			cs, err := gitlabComments(gl)
			check("gitlab", cs, err)
			if err == nil {
				system := 0
				for _, n := range gl {
					if n.System {
						system++
					}
				}
				if len(cs) != len(gl)-system {
					t.Fatalf("gitlab: %d comments of %d notes, %d system", len(cs), len(gl), system)
				}
			}
		}
		var is githubIssue
		if decodeJSON(data, &is) == nil {
			if i, err := is.issue(); err == nil && (i.Number <= 0 || (i.State != Open && i.State != Closed)) {
				t.Fatalf("issue %+v", i)
			}
		}
	})
}

// FuzzErrorAnswer feeds a refusal's body and headers to what makes an
// Error of them: one bounded line, no token, a next page only as a URL.
func FuzzErrorAnswer(f *testing.F) {
	f.Add([]byte(`{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}`), "tok-1", `<https://api.github.com/x?page=2>; rel="next"`, "3", "60")
	f.Add([]byte(`{"message":{"title":["can't be blank"]}}`), "glpat-x", "", "", "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add([]byte("Retry later\n"), "t", `<>; rel=next`, "x", "")
	f.Fuzz(func(t *testing.T, body []byte, token, link, nextPageHdr, retry string) {
		msg := message(body, token)
		if len(msg) > maxMessage || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\r\n\t") {
			t.Fatalf("message %q", msg)
		}
		if token != "" && strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) < 0 && strings.Contains(msg, token) &&
			!strings.Contains("[REDACTED]…", token) {
			t.Fatalf("message %q shows the token %q", msg, token)
		}
		h := http.Header{"Link": {link}, "X-Next-Page": {nextPageHdr}, "Retry-After": {retry}, "Ratelimit-Reset": {nextPageHdr}}
		if next, err := nextPage("https://api.example/a?page=1", h); err == nil && next != "" {
			if _, err := url.Parse(next); err != nil {
				t.Fatalf("next page %q: %v", next, err)
			}
		}
		for _, k := range Kinds {
			rateReset(k, 429, h, testNow)
			rateReset(k, 403, h, testNow)
		}
	})
}

func FuzzDetect(f *testing.F) {
	for _, s := range []string{"https://github.com/o/r.git", "git@gitlab.com:g/s/p.git", "ssh://git@h:22/o/r", "http://127.0.0.1:3000/o/r.git",
		"https://u:p@h/o/r", "[::1]:o/r", "file:///x", "C:\\x"} {
		f.Add(s, "gitea")
	}
	f.Fuzz(func(t *testing.T, remote, kind string) {
		tg, err := Detect(remote, Kind(kind), "", "")
		if err != nil {
			if i := strings.Index(remote, "://"); i > 0 {
				if user, _, ok := strings.Cut(remote[i+3:], "@"); ok && strings.Contains(user, ":") && !strings.ContainsAny(user, "/?#") {
					if _, pass, _ := strings.Cut(user, ":"); len(pass) > 3 && strings.Contains(err.Error(), ":"+pass+"@") {
						t.Fatalf("the error shows the password: %v", err)
					}
				}
			}
			return
		}
		if api, err := checkAPI(tg.API); err != nil || api != tg.API {
			t.Fatalf("Detect(%q) = %+v: its API %v", remote, tg, err)
		}
		if err := checkRepo(tg.Kind, tg.Repo); err != nil {
			t.Fatalf("Detect(%q) = %+v: %v", remote, tg, err)
		}
		if u, _ := url.Parse(tg.API); u.User != nil {
			t.Fatalf("Detect(%q) = %+v: credentials in the API URL", remote, tg)
		}
	})
}
