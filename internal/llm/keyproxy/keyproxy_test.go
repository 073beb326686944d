package keyproxy_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/llm/keyproxy"
)

const realKey = "sk-real-key-never-shown"

// upstream records what reached it and answers "ok".
type upstream struct {
	mu   sync.Mutex
	reqs []*http.Request
	srv  *httptest.Server
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(r.Context()))
		u.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.reqs...)
}

func start(t *testing.T, upstreamURL string) *keyproxy.Proxy {
	t.Helper()
	p, err := keyproxy.Start(upstreamURL, realKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProxySwapsTheKey(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up.srv.URL+"/v1")
	if !strings.HasPrefix(p.Key, "factory-proxy-") || strings.Contains(p.Key, realKey) || p.Port == 0 {
		t.Fatalf("proxy %+v", p)
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
		want    map[string]string // upstream headers; "" means absent
	}{
		{"bearer", map[string]string{"Authorization": "Bearer " + p.Key}, 200,
			map[string]string{"Authorization": "Bearer " + realKey, "X-Api-Key": ""}},
		{"x-api-key", map[string]string{"X-Api-Key": p.Key, "Anthropic-Version": "2023-06-01"}, 200,
			map[string]string{"X-Api-Key": realKey, "Authorization": "", "Anthropic-Version": "2023-06-01"}},
		{"api-key", map[string]string{"Api-Key": p.Key}, 200, map[string]string{"Api-Key": realKey, "Authorization": ""}},
		{"no key", nil, 401, nil},
		{"wrong key", map[string]string{"Authorization": "Bearer factory-proxy-00"}, 401, nil},
		{"the real key", map[string]string{"X-Api-Key": realKey}, 401, nil},
		{"not bearer", map[string]string{"Authorization": "Basic " + p.Key}, 401, nil},
		{"one of two wrong", map[string]string{"Authorization": "Bearer " + p.Key, "X-Api-Key": "other"}, 401, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(up.requests())
			req, _ := http.NewRequest("POST", p.URL+"/responses?x=1", strings.NewReader("{}"))
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, c.status)
			}
			reqs := up.requests()[before:]
			if c.status != 200 {
				if len(reqs) != 0 {
					t.Errorf("a refused request reached the upstream")
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("%d upstream requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.URL.Path != "/v1/responses" || r.URL.RawQuery != "x=1" || r.Host != strings.TrimPrefix(up.srv.URL, "http://") {
				t.Errorf("upstream got %s %s?%s (Host %s), want /v1/responses?x=1 on the upstream host", r.Method, r.URL.Path, r.URL.RawQuery, r.Host)
			}
			for k, v := range c.want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("upstream header %s = %q, want %q", k, got, v)
				}
			}
			if string(body) != "ok" {
				t.Errorf("body %q", body)
			}
		})
	}
}

// Server-sent events reach the client as the upstream sends them, not when the response ends.
func TestProxyStreams(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	defer up.Close()
	defer close(release)
	p := start(t, up.URL)
	req, _ := http.NewRequest("POST", p.URL+"/v1/messages", nil)
	req.Header.Set("X-Api-Key", p.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "data: first\n" {
			t.Errorf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not arrive before the upstream finished")
	}
}

func TestStartRefuses(t *testing.T) {
	for _, c := range []struct{ upstream, key, want string }{
		{"ftp://x", "k", "not an absolute http or https URL"},
		{"/v1", "k", "not an absolute http or https URL"},
		{"https://user:pw@x", "k", "without credentials"},
		{"https://api.example.com", "", "the API key is empty"},
	} {
		if _, err := keyproxy.Start(c.upstream, c.key, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start(%q, %q) = %v, want an error with %q", c.upstream, c.key, err, c.want)
		}
	}
}

// An upstream that cannot be reached is a 502 whose message does not quote the key.
func TestProxyUpstreamDown(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	url := up.URL
	up.Close()
	p := start(t, url)
	req, _ := http.NewRequest("GET", p.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+p.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), realKey) {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}
