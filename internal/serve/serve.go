// Package serve is the web view of factory's artifacts (`factory serve`)
// and its one-file HTML reports (`factory report`): builds, single runs
// and loop runs, read-only, live while they run. Pages are rendered on the
// server with html/template from embedded templates; a small embedded
// script follows running builds over server-sent events. Every file read
// goes through an os.Root of an artifact directory it was given, and every
// byte shown passes a redactor of key-shaped strings and key variables.
package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/redact"
)

//go:embed templates/*.html assets/*
var embedded embed.FS

// Options configure a Server.
type Options struct {
	Outs  []string // --out dirs: builds/<hash>/..., plans/, single run dirs
	Repos []string // --repo dirs: their .runner/ (loop runs)
	// Token, when set, is required on every request: ?token=, a cookie set
	// from it, or an Authorization: Bearer header.
	Token string
	// LoopbackOnly makes the server refuse requests whose Host is not a
	// loopback name (DNS rebinding), for a loopback address without token.
	LoopbackOnly bool
	// Environ is the environment whose key variables' values are redacted.
	Environ []string
	Now     func() time.Time
	// Poll is how often event streams look for new lines (default 500ms).
	Poll time.Duration
	// FS opens an artifact directory (an Outs dir, a Repos dir's .runner)
	// for reading; its files must be seekable. Default: the directory's
	// os.Root, which refuses names and symlinks that leave it. Tests give
	// an in-memory tree.
	FS func(dir string) (fs.FS, error)
	// Git opens the repository at dir that a build or loop run names
	// (its lock says whether it runs; its commits give diffs). Default:
	// gitws.Open on an existing directory, a git subprocess.
	Git func(ctx context.Context, dir string) (*gitws.Repo, error)
}

// Server serves the pages, the API and the event streams.
type Server struct {
	o     Options
	st    *store
	red   *redact.Redactor
	pages *template.Template
	css   string
	// maxText bounds each text a page shows (the whole file is a link
	// away; a report notes the cut).
	maxText int64
	// maxDepsRows bounds the rows of a dependency request log shown: as
	// many allowed requests, and as many refused or unreadable lines.
	maxDepsRows int

	diffMu sync.Mutex
	diffs  map[string]commitDiffs // repository@commit → its diff
}

// New prepares a server over the given directories; they need not exist
// yet.
func New(o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	pages, err := parsedPages()
	if err != nil {
		return nil, err
	}
	css, err := embedded.ReadFile("assets/app.css")
	if err != nil {
		return nil, err
	}
	return &Server{o: o, st: newStore(o), red: redact.New(o.Environ), pages: pages, css: string(css), maxText: maxShownText, maxDepsRows: depsRowsServed,
		diffs: map[string]commitDiffs{}}, nil
}

// parsedPages are the page templates, parsed once for every server:
// html/template escapes each template on its first execution, which costs
// more than most pages' rendering; executing one concurrently is safe.
var parsedPages = sync.OnceValues(func() (*template.Template, error) {
	pages, err := template.New("").Funcs(funcs).ParseFS(embedded, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse the page templates: %w", err)
	}
	return pages, nil
})

// Close releases the directories.
func (s *Server) Close() { s.st.close() }

// Handler is the whole site.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page(func(r *http.Request) (string, string, any, error) {
		return "index", "factory", s.st.rows(r.Context()), nil
	}))
	mux.HandleFunc("GET /builds/{o}/{hash}", s.page(s.buildPage))
	mux.HandleFunc("GET /builds/{o}/{hash}/{wo}/{run}/{n}", s.page(s.buildAttemptPage))
	mux.HandleFunc("GET /runs/{o}/{id}", s.page(s.runPage))
	mux.HandleFunc("GET /runs/{o}/{id}/{n}", s.page(s.runAttemptPage))
	mux.HandleFunc("GET /loops/{l}/{id}", s.page(s.loopPage))
	mux.HandleFunc("GET /loops/{l}/{id}/{dir}", s.page(s.iterPage))
	mux.HandleFunc("GET /api/index", s.api(func(r *http.Request) (string, string, any, error) {
		return "", "", s.st.rows(r.Context()), nil
	}))
	mux.HandleFunc("GET /api/builds/{o}/{hash}", s.api(s.buildPage))
	mux.HandleFunc("GET /api/builds/{o}/{hash}/{wo}/{run}/{n}", s.api(s.buildAttemptPage))
	mux.HandleFunc("GET /api/runs/{o}/{id}", s.api(s.runPage))
	mux.HandleFunc("GET /api/runs/{o}/{id}/{n}", s.api(s.runAttemptPage))
	mux.HandleFunc("GET /api/loops/{l}/{id}", s.api(s.loopPage))
	mux.HandleFunc("GET /api/loops/{l}/{id}/{dir}", s.api(s.iterPage))
	mux.HandleFunc("GET /api/stream/index", s.streamIndex)
	mux.HandleFunc("GET /api/stream/builds/{o}/{hash}", s.streamBuild)
	mux.HandleFunc("GET /api/stream/loops/{l}/{id}", s.streamLoop)
	mux.HandleFunc("GET /files/out/{o}/{path...}", s.file)
	mux.HandleFunc("GET /files/loop/{l}/{path...}", s.file)
	mux.HandleFunc("GET /static/{name}", s.static)
	return s.headers(s.auth(cleanPaths(mux)))
}

// headers sets the security headers of every answer: only the server's
// own script and style files run, nothing is framed, no referrer leaks a
// token, nothing is cached.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		if s.o.LoopbackOnly && !loopbackHost(r.Host) {
			http.Error(w, "this server answers only to a loopback host name", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenCookie carries the token after a first request with ?token=.
const tokenCookie = "factory_token"

// auth requires the token on every request, pages, API and streams alike.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.o.Token))
	ok := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return got != "" && subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("token"); q != "" && ok(q) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if b, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(b) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="factory serve"`)
		http.Error(w, "401 unauthorized: open the URL factory serve printed (it carries ?token=)", http.StatusUnauthorized)
	})
}

// cleanPaths answers 404 to any path with an empty, "." or ".." segment
// (also when encoded as %2e%2e), a backslash or a NUL, before the mux
// would redirect it somewhere.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p != "/" {
			for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
				if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
					http.NotFound(w, r)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// view produces a page's template name, title and data.
type view func(r *http.Request) (tmpl, title string, data any, err error)

func intParam(r *http.Request, name string) (int, error) {
	n, err := strconv.Atoi(r.PathValue(name))
	if err != nil || n < 0 {
		return 0, errNotFound
	}
	return n, nil
}

func (s *Server) buildPage(r *http.Request) (string, string, any, error) {
	o, err := intParam(r, "o")
	if err != nil {
		return "", "", nil, err
	}
	v, err := s.buildView(r.Context(), o, r.PathValue("hash"))
	if err != nil {
		return "", "", nil, err
	}
	return "build", "build " + v.Hash, v, nil
}

func (s *Server) buildAttemptPage(r *http.Request) (string, string, any, error) {
	o, err1 := intParam(r, "o")
	n, err2 := intParam(r, "n")
	hash, wo, run := r.PathValue("hash"), r.PathValue("wo"), r.PathValue("run")
	if err1 != nil || err2 != nil || o >= len(s.st.outs) || !validID(hash) || !validID(wo) || !validID(run) {
		return "", "", nil, errNotFound
	}
	repo := ""
	if f, sum, err := s.st.build(o, hash); err == nil {
		repo = f.Repo
		if repo == "" && sum != nil {
			repo = sum.Repo
		}
	}
	v, err := s.attemptView(r.Context(), o, "builds/"+hash+"/"+wo+"/"+run, n, repo)
	if err != nil {
		return "", "", nil, err
	}
	v.Title = fmt.Sprintf("%s attempt %d (run %s)", wo, n, run)
	v.URL = fmt.Sprintf("/builds/%d/%s/%s/%s/%d", o, hash, wo, run, n)
	v.Back = fmt.Sprintf("/builds/%d/%s", o, hash)
	return "attempt", v.Title, v, nil
}

func (s *Server) runPage(r *http.Request) (string, string, any, error) {
	o, err := intParam(r, "o")
	if err != nil {
		return "", "", nil, err
	}
	v, err := s.runView(o, r.PathValue("id"))
	if err != nil {
		return "", "", nil, err
	}
	return "run", "run " + v.ID, v, nil
}

func (s *Server) runAttemptPage(r *http.Request) (string, string, any, error) {
	o, err1 := intParam(r, "o")
	n, err2 := intParam(r, "n")
	id := r.PathValue("id")
	if err1 != nil || err2 != nil || o >= len(s.st.outs) || !validID(id) {
		return "", "", nil, errNotFound
	}
	v, err := s.attemptView(r.Context(), o, id, n, "")
	if err != nil {
		return "", "", nil, err
	}
	v.Title = fmt.Sprintf("run %s attempt %d", id, n)
	v.URL = fmt.Sprintf("/runs/%d/%s/%d", o, id, n)
	v.Back = fmt.Sprintf("/runs/%d/%s", o, id)
	return "attempt", v.Title, v, nil
}

func (s *Server) loopPage(r *http.Request) (string, string, any, error) {
	l, err := intParam(r, "l")
	if err != nil {
		return "", "", nil, err
	}
	v, err := s.loopView(r.Context(), l, r.PathValue("id"))
	if err != nil {
		return "", "", nil, err
	}
	return "loop", "loop run " + v.ID, v, nil
}

func (s *Server) iterPage(r *http.Request) (string, string, any, error) {
	l, err := intParam(r, "l")
	if err != nil {
		return "", "", nil, err
	}
	v, err := s.iterView(l, r.PathValue("id"), r.PathValue("dir"))
	if err != nil {
		return "", "", nil, err
	}
	return "iteration", fmt.Sprintf("loop run %s iteration %s", v.RunID, v.Dir), v, nil
}

// pageData is what the layout gets.
type pageData struct {
	Page  string
	Title string
	Data  any
	R     linker
	CSS   template.CSS
	Nonce string
	Now   time.Time
	Items []any // a report's extra sections (attempt views)
}

func (s *Server) page(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tmpl, title, data, err := v(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		var buf bytes.Buffer
		if err := s.pages.ExecuteTemplate(&buf, "layout", pageData{Page: tmpl, Title: title, Data: data, Now: s.o.Now()}); err != nil {
			http.Error(w, "render "+tmpl+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(s.red.Bytes(buf.Bytes()))
	}
}

func (s *Server) api(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _, data, err := v(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		b, err := json.MarshalIndent(data, "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.red.Bytes(append(b, '\n')))
	}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if isNotFound(err) {
		http.NotFound(w, r)
		return
	}
	http.Error(w, s.red.String(err.Error()), http.StatusInternalServerError)
}

// file serves one artifact file as plain text, redacted, streamed.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	var src *source
	if r.PathValue("o") != "" {
		o, err := intParam(r, "o")
		if err != nil || o >= len(s.st.outs) {
			http.NotFound(w, r)
			return
		}
		src = s.st.outs[o]
	} else {
		l, err := intParam(r, "l")
		if err != nil || l >= len(s.st.loops) {
			http.NotFound(w, r)
			return
		}
		src = s.st.loops[l]
	}
	name := r.PathValue("path")
	if !safeRel(name) {
		http.NotFound(w, r)
		return
	}
	f, err := src.openFile(name) // refuses names and symlinks that leave the directory
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	rw := s.red.Writer(w)
	if _, err := io.Copy(rw, f); err == nil {
		rw.Close()
	}
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	data, err := embedded.ReadFile("assets/" + name)
	if err != nil || !validID(name) {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(data)
}

// sse starts an event stream.
func sse(w http.ResponseWriter) (http.Flusher, bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	return fl, true
}

// streamIndex sends the index rows whenever they change.
func (s *Server) streamIndex(w http.ResponseWriter, r *http.Request) {
	fl, ok := sse(w)
	if !ok {
		return
	}
	var last []byte
	tick := time.NewTicker(2 * s.o.Poll)
	defer tick.Stop()
	for {
		b, _ := json.Marshal(s.st.rows(r.Context()))
		if !bytes.Equal(b, last) {
			last = b
			fmt.Fprintf(w, "event: rows\ndata: %s\n\n", s.red.Bytes(b))
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// from is where a stream starts: Last-Event-ID on a reconnect, else ?from=.
func from(r *http.Request) int64 {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("from")
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return max(n, 0)
}

// follow sends every complete line appended to name from offset on as an
// "ev" event whose id is the offset after it, and calls state after each
// poll that found lines (and once at the start).
func (s *Server) follow(w http.ResponseWriter, r *http.Request, src *source, name string, off int64, state func() any) {
	fl, ok := sse(w)
	if !ok {
		return
	}
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	ping := time.Now()
	first := true
	for {
		n := 0
		if f, err := src.openFile(name); err == nil {
			var compact bytes.Buffer
			off, _ = scanReader(f, off, func(line []byte, end int64) bool {
				// Compacted: JSON may hold a bare CR between tokens,
				// which would end the SSE data line early.
				compact.Reset()
				if json.Compact(&compact, line) == nil {
					fmt.Fprintf(w, "id: %d\nevent: ev\ndata: %s\n\n", end, s.red.Bytes(compact.Bytes()))
					n++
				}
				return n < 1000 // a burst is sent in slices
			})
			f.Close()
		}
		if (n > 0 || first) && state != nil {
			b, _ := json.Marshal(state())
			fmt.Fprintf(w, "event: state\ndata: %s\n\n", s.red.Bytes(b))
		}
		first = false
		if n > 0 || time.Since(ping) > 15*time.Second {
			if n == 0 {
				io.WriteString(w, ": ping\n\n")
			}
			ping = time.Now()
			fl.Flush()
		} else {
			fl.Flush()
		}
		if n == 1000 {
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// BuildState is the live part of the build page, sent over its stream.
type BuildState struct {
	Status   string            `json:"status"`
	Detail   string            `json:"detail,omitempty"`
	Passed   int               `json:"passed"`
	Total    int               `json:"total"`
	Activity *Activity         `json:"activity,omitempty"`
	WOs      map[string]string `json:"work_orders"` // id → outcome
}

func (s *Server) streamBuild(w http.ResponseWriter, r *http.Request) {
	o, err := intParam(r, "o")
	hash := r.PathValue("hash")
	if err != nil || o >= len(s.st.outs) || !validID(hash) {
		http.NotFound(w, r)
		return
	}
	if _, _, err := s.st.build(o, hash); err != nil {
		http.NotFound(w, r)
		return
	}
	src := s.st.outs[o]
	s.follow(w, r, src, "builds/"+hash+"/events.jsonl", from(r), func() any {
		f, sum, err := s.st.build(o, hash)
		if err != nil {
			return nil
		}
		st := BuildState{WOs: map[string]string{}, Passed: f.passed(), Total: f.Total}
		st.Status, st.Detail = s.st.buildStatus(r.Context(), o, hash, f, sum)
		for _, wo := range f.WOs {
			out := wo.Verdict
			if out == "" {
				out = "running"
				if f.Ended {
					out = "stopped"
				}
			}
			st.WOs[wo.ID] = out
		}
		if st.Status == StatusRunning {
			st.Activity = activity(src, hash, f)
		}
		return st
	})
}

func (s *Server) streamLoop(w http.ResponseWriter, r *http.Request) {
	l, err := intParam(r, "l")
	id := r.PathValue("id")
	if err != nil || l >= len(s.st.loops) || !validID(id) {
		http.NotFound(w, r)
		return
	}
	s.follow(w, r, s.st.loops[l], "iterations/"+id+"/events.jsonl", from(r), func() any {
		row := s.st.loopRow(r.Context(), l, id)
		return map[string]any{"status": row.Status, "passed": row.Passed, "total": row.Total}
	})
}
