package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestMessage(t *testing.T) {
	long := strings.Repeat("é", 300)
	for _, tc := range []struct{ body, want string }{
		{`{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`, "Bad credentials"},
		{`{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}]}`,
			"Validation Failed: A pull request already exists for o:b."},
		{`{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}`, "Validation Failed: PullRequest head invalid"},
		{`{"message":["Another open merge request already exists for this source branch: !1"]}`, "Another open merge request already exists for this source branch: !1"},
		{`{"message":{"title":["can't be blank"],"base":["is wrong"]}}`, "base is wrong: title can't be blank"},
		{`{"error":"invalid_token","error_description":"Token was revoked.\nYou have to re-authorize."}`, "invalid_token: Token was revoked. You have to re-authorize."},
		{`{"message":"line one\r\n\tline two \u001b[31mred\u001b[0m \u200b"}`, "line one line two [31mred [0m"},
		{"Service Unavailable\n", "Service Unavailable"},
		{"<html><body>502</body></html>", ""},
		{`{"message":"` + long + `"}`, strings.Repeat("é", 98) + "…"},
		{`{"message":"your token tok-123 is bad"}`, "your token [REDACTED] is bad"},
		{`[]`, ""},
	} {
		got := message([]byte(tc.body), "tok-123")
		if got != tc.want {
			t.Errorf("message(%.60q) = %q, want %q", tc.body, got, tc.want)
		}
		if len(got) > maxMessage || !utf8.ValidString(got) || strings.ContainsAny(got, "\r\n") {
			t.Errorf("message(%.60q) = %q: not one bounded line", tc.body, got)
		}
	}
}

func TestRateReset(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	epoch := now.Add(time.Hour).Unix()
	for _, tc := range []struct {
		kind   Kind
		status int
		header map[string]string
		want   time.Time
	}{
		{GitHub, 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(epoch, 10)}, time.Unix(epoch, 0)},
		{GitHub, 429, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(epoch, 10)}, time.Unix(epoch, 0)},
		{GitHub, 403, map[string]string{"Retry-After": "60"}, now.Add(time.Minute)},
		{GitHub, 403, map[string]string{"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": strconv.FormatInt(epoch, 10)}, time.Time{}}, // a plain 403
		{GitHub, 404, map[string]string{"Retry-After": "60"}, time.Time{}},
		{GitLab, 429, map[string]string{"RateLimit-Reset": strconv.FormatInt(epoch, 10)}, time.Unix(epoch, 0)},
		{GitLab, 429, map[string]string{"Retry-After": "30", "RateLimit-Reset": strconv.FormatInt(epoch, 10)}, now.Add(30 * time.Second)},
		{GitLab, 403, map[string]string{"RateLimit-Reset": strconv.FormatInt(epoch, 10)}, time.Time{}},
		{Gitea, 429, map[string]string{"Retry-After": now.Add(2 * time.Hour).Format(http.TimeFormat)}, now.Add(2 * time.Hour)},
		{Gitea, 429, nil, time.Time{}},
		{Gitea, 429, map[string]string{"Retry-After": "99999999999999"}, time.Time{}},
		{GitHub, 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "-5"}, time.Time{}},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := rateReset(tc.kind, tc.status, h, now); !got.Equal(tc.want) {
			t.Errorf("rateReset(%s, %d, %v) = %v, want %v", tc.kind, tc.status, tc.header, got, tc.want)
		}
	}
}

func TestNextPage(t *testing.T) {
	cur := "https://api.example/repos/o/r/pulls?state=all&per_page=100"
	for _, tc := range []struct {
		header map[string][]string
		want   string
		err    bool
	}{
		{map[string][]string{"Link": {`<https://api.example/repositories/1/pulls?state=all&page=2>; rel="next", <https://api.example/repositories/1/pulls?page=5>; rel="last"`}},
			"https://api.example/repositories/1/pulls?state=all&page=2", false},
		{map[string][]string{"Link": {`<https://api.example/x?page=1>; rel="prev", <https://api.example/x?page=3>; rel="last"`}}, "", false},
		{map[string][]string{"Link": {`</repos/o/r/pulls?page=2>; rel=next`}}, "https://api.example/repos/o/r/pulls?page=2", false},
		{map[string][]string{"Link": {`<https://api.example/y?page=2>; rel="prev next"`}}, "https://api.example/y?page=2", false},
		{map[string][]string{"X-Next-Page": {"3"}}, "https://api.example/repos/o/r/pulls?page=3&per_page=100&state=all", false},
		{map[string][]string{"X-Next-Page": {""}}, "", false},
		{map[string][]string{"X-Next-Page": {"x"}}, "", true},
		{map[string][]string{"X-Next-Page": {"-1"}}, "", true},
		{nil, "", false},
	} {
		got, err := nextPage(cur, http.Header(tc.header))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("nextPage(%v) = %q, %v; want %q (error: %v)", tc.header, got, err, tc.want, tc.err)
		}
	}
}

// tokenServer answers every request with handler after recording it; the
// handler sees the request, r.Header included.
type tokenServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newServer(t *testing.T, handler http.HandlerFunc) *tokenServer {
	s := &tokenServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *tokenServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func TestAPIHeadersAndLimits(t *testing.T) {
	for _, tc := range []struct {
		kind         Kind
		header, want string
	}{
		{GitHub, "Authorization", "Bearer tok-1"},
		{Gitea, "Authorization", "token tok-1"},
		{GitLab, "Private-Token", "tok-1"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"n": 1, "extra": {"forges": "add fields"}}`)
			})
			a, err := newAPI(Target{Kind: tc.kind, API: s.URL + "/api/", Token: "tok-1"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out struct{ N int }
			if err := a.get(context.Background(), "/x", url.Values{"q": {"1"}}, &out); err != nil || out.N != 1 {
				t.Fatalf("get = %v, %+v", err, out)
			}
			r := s.requests()[0]
			if got := r.Header.Get(tc.header); got != tc.want {
				t.Errorf("%s: %q, want %q", tc.header, got, tc.want)
			}
			if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "factory/") {
				t.Errorf("User-Agent %q", ua)
			}
			if r.URL.Path != "/api/x" || r.URL.RawQuery != "q=1" || !strings.Contains(r.Header.Get("Accept"), "json") {
				t.Errorf("request %s ? %s, Accept %q", r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"))
			}
			if strings.Contains(r.URL.String(), "tok-1") {
				t.Errorf("the token is in the URL %s", r.URL)
			}
		})
	}
}

func TestAPIRefusals(t *testing.T) {
	for _, tc := range []struct {
		target Target
		err    string
	}{
		{Target{Kind: GitHub, API: "http://api.example.com", Token: "t"}, "plain http"},
		{Target{Kind: GitHub, API: "http://10.0.0.1:8080/api/v3", Token: "t"}, "plain http"},
		{Target{Kind: GitHub, API: "https://api.github.com", Token: ""}, "set GITHUB_TOKEN or GH_TOKEN"},
		{Target{Kind: GitLab, API: "https://gitlab.com/api/v4", Token: "a\r\nX-Evil: 1"}, "line break"},
		{Target{Kind: "svn", API: "https://x", Token: "t"}, "unknown forge"},
		{Target{Kind: Gitea, API: "https://u:p@h/api/v1", Token: "t"}, "credentials"},
	} {
		_, err := newAPI(tc.target, nil)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("newAPI(%+v) = %v, want an error with %q", tc.target, err, tc.err)
		}
		if err != nil && tc.target.Token != "" && tc.target.Token != "t" && strings.Contains(err.Error(), tc.target.Token) {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:1/api/v1", "http://127.9.9.9/x", "http://[::1]:80", "http://localhost:3000", "http://LOCALHOST", "https://api.github.com/"} {
		if _, err := newAPI(Target{Kind: Gitea, API: ok, Token: "t"}, nil); err != nil {
			t.Errorf("newAPI(%s): %v", ok, err)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	big := strings.Repeat("x", maxBody+1)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			fmt.Fprint(w, big)
		case "/html":
			fmt.Fprint(w, "<html>login</html>")
		case "/type":
			fmt.Fprint(w, `{"n": "one"}`)
		case "/rate":
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "1767323045")
			w.WriteHeader(403)
			fmt.Fprint(w, `{"message":"API rate limit exceeded for user ID 1."}`)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	})
	a, err := newAPI(Target{Kind: GitHub, API: s.URL, Token: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		N int `json:"n"`
	}
	ctx := context.Background()
	if err := a.get(ctx, "/big", nil, &out); err == nil || !strings.Contains(err.Error(), "larger than 8 MiB") {
		t.Errorf("big: %v", err)
	}
	if err := a.get(ctx, "/html", nil, &out); err == nil || !strings.Contains(err.Error(), "is "+s.URL+" the forge's API URL") {
		t.Errorf("html: %v", err)
	}
	if err := a.get(ctx, "/type", nil, &out); err == nil || !strings.Contains(err.Error(), `field "n" is a JSON string, not a int`) {
		t.Errorf("type: %v", err)
	}
	err = a.get(ctx, "/rate", nil, &out)
	var fe *Error
	if !errors.As(err, &fe) || fe.Status != 403 || fe.Reset.Unix() != 1767323045 || !strings.Contains(err.Error(), "rate limited until 2026-01-02T03:04:05Z") {
		t.Errorf("rate: %v", err)
	}
	a.timeout = 50 * time.Millisecond
	if err := a.get(ctx, "/slow", nil, &out); err == nil || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Errorf("slow: %v", err)
	}
}

func TestListPagesBounded(t *testing.T) {
	var s *tokenServer
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		if r.URL.Query().Get("endless") == "" && page < 3 {
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?page=%d>; rel="next"`, s.URL, r.URL.Path, page+1))
		} else if r.URL.Query().Get("endless") != "" {
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?endless=1&page=%d>; rel="next"`, s.URL, r.URL.Path, page+1))
		}
		fmt.Fprintf(w, `[%d, %d]`, 2*page-1, 2*page)
	})
	a, err := newAPI(Target{Kind: Gitea, API: s.URL, Token: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := list[int](context.Background(), a, "/l", nil, nil)
	if err != nil || fmt.Sprint(got) != "[1 2 3 4 5 6]" {
		t.Errorf("list = %v, %v", got, err)
	}
	got, err = list(context.Background(), a, "/l", nil, func(n int) bool { return n == 3 })
	if err != nil || fmt.Sprint(got) != "[1 2 3]" || len(s.requests()) != 5 {
		t.Errorf("list with stop = %v, %v after %d requests", got, err, len(s.requests()))
	}
	_, err = list[int](context.Background(), a, "/l", url.Values{"endless": {"1"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 50 pages") {
		t.Errorf("endless list: %v", err)
	}
}

// A Link header or a redirect to another origin must not get the token:
// net/http keeps Authorization for another port on the same host, and
// never drops a custom header such as GitLab's PRIVATE-TOKEN.
func TestTokenStaysOnItsOrigin(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			other := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[]`) })
			var s *tokenServer
			s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/away": // another port of 127.0.0.1
					http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
				case "/away-by-name": // another name of this machine
					u, _ := url.Parse(other.URL)
					http.Redirect(w, r, "http://localhost:"+u.Port()+"/stolen", http.StatusMovedPermanently)
				case "/moved": // the same origin: followed
					http.Redirect(w, r, s.URL+"/here", http.StatusMovedPermanently)
				case "/here":
					fmt.Fprint(w, `[]`)
				case "/list":
					w.Header().Set("Link", "<"+other.URL+`/stolen?page=2>; rel="next"`)
					fmt.Fprint(w, `[1]`)
				}
			})
			a, err := newAPI(Target{Kind: kind, API: s.URL, Token: "tok-secret"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var out []int
			for _, p := range []string{"/away", "/away-by-name"} {
				err := a.get(ctx, p, nil, &out)
				if err == nil || !strings.Contains(err.Error(), "factory follows redirects only within") {
					t.Errorf("%s: %v", p, err)
				}
				if err != nil && strings.Contains(err.Error(), "tok-secret") {
					t.Errorf("%s: the error shows the token: %v", p, err)
				}
			}
			if err := a.get(ctx, "/moved", nil, &out); err != nil {
				t.Errorf("a redirect on the same origin: %v", err)
			}
			if _, err := list[int](ctx, a, "/list", nil, nil); err == nil || !strings.Contains(err.Error(), "refusing to send the token there") {
				t.Errorf("a next page on another origin: %v", err)
			}
			if n := len(other.requests()); n != 0 {
				t.Errorf("the other server got %d requests", n)
			}
			// With a caller's client too, and its own CheckRedirect still asked.
			asked := false
			hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { asked = true; return nil }}
			a2, _ := newAPI(Target{Kind: kind, API: s.URL, Token: "tok-secret"}, hc)
			if err := a2.get(ctx, "/away", nil, &out); err == nil || len(other.requests()) != 0 {
				t.Errorf("a caller's client followed the redirect: %v", err)
			}
			if err := a2.get(ctx, "/moved", nil, &out); err != nil || !asked {
				t.Errorf("a caller's CheckRedirect: %v, asked %v", err, asked)
			}
			if hc.CheckRedirect == nil || a2.hc == hc {
				t.Error("the caller's client was changed")
			}
			for _, r := range s.requests() {
				if r.URL.Path == "/here" && r.Header.Get("Authorization")+r.Header.Get("Private-Token") == "" {
					t.Error("a same-origin redirect lost the token")
				}
			}
		})
	}
}
