package forgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request is one request a scripted forge received, recorded before it is
// answered (refused ones too).
type Request struct {
	Method string
	Path   string // the escaped path, as sent
	Query  url.Values
	Header http.Header
	Body   string
}

// Failure makes a scripted forge refuse a request: the next one, or the
// next one whose method and path match, with Status, Header and a body
// like the forge's own for that status (Message replaces its text).
type Failure struct {
	Method  string // "" matches any
	Path    string // "" matches any; else a suffix of the escaped path ("/pulls")
	Status  int
	Header  http.Header
	Message string
}

// script is what the scripted forges share: the recorded requests and the
// queue of failures.
type script struct {
	mu    sync.Mutex
	reqs  []Request
	fails []Failure
	seq   int64 // ids and times
}

// record keeps r (its body read and put back) and returns the failure it
// is to get, if any.
func (s *script) record(r *http.Request) (Failure, bool) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)})
	for i, f := range s.fails {
		if (f.Method == "" || f.Method == r.Method) && (f.Path == "" || strings.HasSuffix(r.URL.EscapedPath(), f.Path)) {
			s.fails = append(s.fails[:i], s.fails[i+1:]...)
			return f, true
		}
	}
	return Failure{}, false
}

func (s *script) requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *script) fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, f)
}

// next is a new id; the clock of a scripted forge is the same counter, in
// minutes after 2026-01-01, so that the order of things is their order of
// creation. The caller holds mu.
func (s *script) next() (int64, time.Time) {
	s.seq++
	return s.seq, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s.seq) * time.Minute)
}

func scriptJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// scriptDecode decodes a request's JSON body into a map (fields are
// checked by the handlers: a forge ignores the ones it does not know).
func scriptDecode(r *http.Request) (map[string]any, error) {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("Problems parsing JSON")
	}
	return m, nil
}

// scriptPage answers one page of items: per_page (or GitLab's per_page;
// default def, at most the forge's max and the script's pageSize) and
// page, with a Link header (first, prev, next, last) built on the
// request's own URL and, when gitlab, X-Page, X-Per-Page, X-Next-Page,
// X-Prev-Page, X-Total and X-Total-Pages. link false leaves the Link
// header out (GitLab's headers alone).
func scriptPage[T any](w http.ResponseWriter, r *http.Request, items []T, def, most, pageSize int, gitlab, link bool) {
	per, err := strconv.Atoi(r.URL.Query().Get("per_page"))
	if err != nil || per < 1 {
		per = def
	}
	per = min(per, most)
	if pageSize > 0 {
		per = min(per, pageSize)
	}
	page, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	pages := max1((len(items) + per - 1) / per)
	lo := min((page-1)*per, len(items))
	hi := min(lo+per, len(items))
	at := func(p int) string {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(p))
		u.RawQuery = q.Encode()
		return "http://" + r.Host + u.RequestURI()
	}
	var links []string
	if page > 1 {
		links = append(links, fmt.Sprintf(`<%s>; rel="prev"`, at(page-1)))
	}
	if page < pages {
		links = append(links, fmt.Sprintf(`<%s>; rel="next"`, at(page+1)))
	}
	links = append(links, fmt.Sprintf(`<%s>; rel="first"`, at(1)), fmt.Sprintf(`<%s>; rel="last"`, at(pages)))
	if link {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	if gitlab {
		h := w.Header()
		h.Set("X-Page", strconv.Itoa(page))
		h.Set("X-Per-Page", strconv.Itoa(per))
		h.Set("X-Total", strconv.Itoa(len(items)))
		h.Set("X-Total-Pages", strconv.Itoa(pages))
		h.Set("X-Next-Page", "")
		h.Set("X-Prev-Page", "")
		if page < pages {
			h.Set("X-Next-Page", strconv.Itoa(page+1))
		}
		if page > 1 {
			h.Set("X-Prev-Page", strconv.Itoa(page-1))
		}
	}
	out := items[lo:hi]
	if out == nil {
		out = []T{}
	}
	scriptJSON(w, http.StatusOK, out)
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func scriptTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// scriptOptTime is a time or JSON null.
func scriptOptTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return scriptTime(t)
}

// scriptOptString is a string or JSON null when empty.
func scriptOptString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
