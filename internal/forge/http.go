package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/version"
)

// Bounds on what a forge may send back.
const (
	maxBody        = 8 << 20 // bytes of one response body
	maxPages       = 50      // pages of one list
	maxMessage     = 200     // bytes of a forge's message in an Error
	maxRedirects   = 5
	requestTimeout = 30 * time.Second
)

// api is one forge's HTTP endpoint with its token: every request of every
// client goes through send, the one place the token is handled.
type api struct {
	target  Target
	base    *url.URL // the API URL, no trailing slash
	hc      *http.Client
	ua      string
	timeout time.Duration
	now     func() time.Time
}

func newAPI(t Target, hc *http.Client) (*api, error) {
	switch t.Kind {
	case GitHub, Gitea, GitLab:
	default:
		return nil, fmt.Errorf("unknown forge %q; pass --forge github|gitea|gitlab", t.Kind)
	}
	apiURL, err := checkAPI(t.API)
	if err != nil {
		return nil, err
	}
	t.API = apiURL
	if t.Token == "" {
		return nil, fmt.Errorf("no token for %s: set %s", t.Kind, strings.Join(TokenVars(t.Kind), " or "))
	}
	if strings.IndexFunc(t.Token, func(r rune) bool { return r <= ' ' || r == 0x7f || r > '~' }) >= 0 {
		return nil, fmt.Errorf("the token in %s holds a space, line break or other character a token does not have; set it to the token alone", strings.Join(TokenVars(t.Kind), " or "))
	}
	base, _ := url.Parse(apiURL)
	return &api{
		target:  t,
		base:    base,
		hc:      sameOriginClient(hc),
		ua:      "factory/" + version.Read().Version,
		timeout: requestTimeout,
		now:     time.Now,
	}, nil
}

// checkAPI validates an API URL and returns it without a trailing slash:
// https, or plain http only on loopback (the token would travel in clear),
// no credentials, no query.
func checkAPI(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("the forge API URL %q is not an http(s) URL; pass --forge-api https://HOST/api/…", withoutUser(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("the forge API URL %s holds credentials; remove them: the token comes from the environment", withoutUser(raw))
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return "", fmt.Errorf("the forge API URL %s is plain http on a host other than this machine: the token would travel in clear; use https", u.Redacted())
		}
	default:
		return "", fmt.Errorf("the forge API URL %s is not http(s); pass --forge-api https://HOST/api/…", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("the forge API URL %s has a query or fragment; pass the API's base URL only", u.Redacted())
	}
	u.Host = strings.ToLower(u.Host)
	u.Scheme = strings.ToLower(u.Scheme)
	return strings.TrimRight(u.String(), "/"), nil
}

// loopback reports whether host names this machine's loopback
// (127.0.0.0/8, ::1, localhost).
func loopback(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOriginClient is a copy of hc (or a new client) whose redirects stay
// on the first request's scheme, host and port.
func sameOriginClient(hc *http.Client) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSHandshakeTimeout = 10 * time.Second
		tr.ResponseHeaderTimeout = requestTimeout
		tr.IdleConnTimeout = 30 * time.Second
		c = http.Client{Transport: tr, Timeout: 2 * requestTimeout}
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if origin(req.URL) != origin(first) {
			return fmt.Errorf("the forge redirected to %s; factory follows redirects only within %s, so that the token never goes to another host: pass --forge-api with the URL the API is at", origin(req.URL), origin(first))
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// origin is scheme://host:port with the default port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// A call is one request to the API: path is escaped and relative to the
// API URL ("/repos/o/r/pulls").
type call struct {
	method string
	path   string
	query  url.Values
	in     any // JSON-encoded as the body when non-nil
}

// response is a successful answer, its body read whole (bounded).
type response struct {
	header http.Header
	body   []byte
}

// do sends c and decodes the answer into out (when non-nil).
func (a *api) do(ctx context.Context, c call, out any) (*response, error) {
	u := a.base.String() + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	resp, err := a.send(ctx, c.method, u, c.in)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := a.decode(c.method, c.path, resp, out); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// send makes one request to rawURL (on the API's origin) and returns a
// 2xx answer, or an *Error.
func (a *api) send(ctx context.Context, method, rawURL string, in any) (*response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", a.target.Kind, method, err)
	}
	path := a.relPath(u)
	if origin(u) != origin(a.base) {
		return nil, fmt.Errorf("%s %s %s: the forge pointed factory at %s, not the API at %s; refusing to send the token there", a.target.Kind, method, path, origin(u), origin(a.base))
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s %s: %v", a.target.Kind, method, path, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %v", a.target.Kind, method, path, err)
	}
	a.authorize(req.Header)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", a.ua)
	resp, err := a.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL is the API's; the path says which
		}
		if ctx.Err() == context.DeadlineExceeded && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s %s %s: no answer within %s; is the forge at %s up?", a.target.Kind, method, path, a.timeout, a.base.Redacted())
		}
		return nil, fmt.Errorf("%s %s %s: %v; is the forge at %s up, and --forge-api its API's URL?", a.target.Kind, method, path, err, a.base.Redacted())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: reading the answer: %v", a.target.Kind, method, path, err)
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("%s %s %s: the answer is larger than %d MiB; refusing it", a.target.Kind, method, path, maxBody>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := message(b, a.target.Token)
		msg = strings.TrimPrefix(msg, strconv.Itoa(resp.StatusCode)+" ") // GitLab's "404 Project Not Found"
		return nil, &Error{
			Kind: a.target.Kind, Method: method, Path: path, Status: resp.StatusCode,
			Message: msg,
			Reset:   rateReset(a.target.Kind, resp.StatusCode, resp.Header, a.now()),
		}
	}
	return &response{header: resp.Header, body: b}, nil
}

// authorize sets the headers that identify factory to the forge: the
// token, in the form each forge takes, and what factory accepts.
func (a *api) authorize(h http.Header) {
	switch a.target.Kind {
	case GitHub:
		h.Set("Authorization", "Bearer "+a.target.Token)
		h.Set("Accept", "application/vnd.github+json")
		h.Set("X-GitHub-Api-Version", "2022-11-28")
	case Gitea:
		h.Set("Authorization", "token "+a.target.Token)
		h.Set("Accept", "application/json")
	case GitLab:
		h.Set("PRIVATE-TOKEN", a.target.Token)
		h.Set("Accept", "application/json")
	}
}

// relPath is u's path relative to the API URL, for messages.
func (a *api) relPath(u *url.URL) string {
	p := u.EscapedPath()
	if rest, ok := strings.CutPrefix(p, a.base.EscapedPath()); ok && strings.HasPrefix(rest, "/") {
		return rest
	}
	return p
}

// decode decodes a successful answer into out.
func (a *api) decode(method, path string, r *response, out any) error {
	if err := decodeJSON(r.body, out); err != nil {
		hint := ""
		if b := bytes.TrimSpace(r.body); len(b) > 0 && b[0] == '<' {
			hint = fmt.Sprintf(" (an HTML page: is %s the forge's API URL? pass --forge-api)", a.base.Redacted())
		}
		return fmt.Errorf("%s %s %s: the answer is not what factory expects%s: %v", a.target.Kind, method, path, hint, err)
	}
	return nil
}

// decodeJSON decodes an untrusted JSON answer: unknown fields are allowed
// (forges add fields), the types of known ones are checked.
func decodeJSON(body []byte, out any) error {
	if len(body) > maxBody {
		return fmt.Errorf("larger than %d MiB", maxBody>>20)
	}
	if err := json.Unmarshal(body, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s is a JSON %s, not a %s", fieldName(te), te.Value, te.Type)
		}
		return fmt.Errorf("not JSON: %s", bound(oneLine(err.Error()), maxMessage))
	}
	return nil
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field == "" {
		return "the answer"
	}
	return "field " + strconv.Quote(te.Field)
}

// get GETs one object.
func (a *api) get(ctx context.Context, path string, q url.Values, out any) error {
	_, err := a.do(ctx, call{method: http.MethodGet, path: path, query: q}, out)
	return err
}

// list GETs path and the pages after it (the Link header's rel="next",
// else GitLab's X-Next-Page), at most maxPages, and returns the items in
// order. stop, when non-nil, ends the walk after the first item it
// accepts (that item is the last one returned).
func list[T any](ctx context.Context, a *api, path string, q url.Values, stop func(T) bool) ([]T, error) {
	var all []T
	u := a.base.String() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("%s GET %s: more than %d pages; factory reads at most %d", a.target.Kind, path, maxPages, maxPages)
		}
		r, err := a.send(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		var items []T
		if err := a.decode(http.MethodGet, path, r, &items); err != nil {
			return nil, err
		}
		for _, it := range items {
			all = append(all, it)
			if stop != nil && stop(it) {
				return all, nil
			}
		}
		next, err := nextPage(u, r.header)
		if err != nil {
			return nil, fmt.Errorf("%s GET %s: %v", a.target.Kind, path, err)
		}
		if next == "" || len(items) == 0 {
			return all, nil
		}
		u = next
	}
}

// nextPage is the URL of the page after cur: the Link header's
// rel="next" (GitHub, Gitea, GitLab), else cur with page=X-Next-Page
// (GitLab); "" on the last page. send checks that it is on the API's
// origin.
func nextPage(cur string, h http.Header) (string, error) {
	base, err := url.Parse(cur)
	if err != nil {
		return "", err
	}
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(part, ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			if !relNext(params) {
				continue
			}
			u, err := base.Parse(target[1 : len(target)-1])
			if err != nil {
				return "", fmt.Errorf("the next page's link is not a URL")
			}
			return u.String(), nil
		}
	}
	if n := strings.TrimSpace(h.Get("X-Next-Page")); n != "" {
		p, err := strconv.Atoi(n)
		if err != nil || p < 1 {
			return "", fmt.Errorf("X-Next-Page %q is not a page number", bound(oneLine(n), 40))
		}
		q := base.Query()
		q.Set("page", strconv.Itoa(p))
		base.RawQuery = q.Encode()
		return base.String(), nil
	}
	return "", nil
}

// relNext reports whether a Link value's parameters say rel="next".
func relNext(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
			continue
		}
		for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
			if strings.EqualFold(rel, "next") {
				return true
			}
		}
	}
	return false
}

// rateReset is when a rate limit ends, from a refusal's headers; zero when
// the refusal is not a rate limit or says no time.
func rateReset(k Kind, status int, h http.Header, now time.Time) time.Time {
	if status != http.StatusTooManyRequests && !(k == GitHub && status == http.StatusForbidden) {
		return time.Time{}
	}
	epoch := func(name string) time.Time {
		n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64)
		if err != nil || n <= 0 || n > 1<<36 {
			return time.Time{}
		}
		return time.Unix(n, 0)
	}
	if k == GitHub && strings.TrimSpace(h.Get("X-RateLimit-Remaining")) == "0" {
		if t := epoch("X-RateLimit-Reset"); !t.IsZero() {
			return t
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 && s <= 7*24*3600 {
			return now.Add(time.Duration(s) * time.Second).Truncate(time.Second)
		}
		if t, err := http.ParseTime(v); err == nil {
			return t
		}
	}
	if status == http.StatusTooManyRequests {
		for _, name := range []string{"RateLimit-Reset", "X-RateLimit-Reset"} {
			if t := epoch(name); !t.IsZero() {
				return t
			}
		}
	}
	return time.Time{}
}

// message is a forge's error answer as one short line: GitHub's and
// Gitea's message (with GitHub's errors), GitLab's message (a string, a
// list or fields to lists) or error/error_description, else the text of a
// short plain answer. The token, should the forge echo it, is cut out.
func message(body []byte, token string) string {
	var v any
	var parts []string
	if json.Unmarshal(body, &v) == nil {
		if m, ok := v.(map[string]any); ok {
			parts = appendMessage(parts, "", m["message"])
			if len(parts) == 0 {
				parts = appendMessage(parts, "", m["error"])
				parts = appendMessage(parts, "", m["error_description"])
			}
			if errs, ok := m["errors"].([]any); ok {
				for _, e := range errs {
					parts = appendMessage(parts, "", e)
				}
			}
		} else {
			parts = appendMessage(parts, "", v)
		}
	} else if b := bytes.TrimSpace(body); len(b) > 0 && b[0] != '<' {
		parts = append(parts, string(b))
	}
	s := oneLine(strings.Join(parts, ": "))
	if token != "" {
		// A token that is not whole characters can split one: mend.
		s = strings.ToValidUTF8(strings.ReplaceAll(s, token, "[REDACTED]"), "\uFFFD")
	}
	return bound(s, maxMessage)
}

// appendMessage adds the strings in v: a string, a list, an object's
// message (GitHub's errors[]) or its fields (GitLab's {"title": ["is
// too long"]}).
func appendMessage(parts []string, field string, v any) []string {
	const most = 8
	if len(parts) >= most {
		return parts
	}
	switch v := v.(type) {
	case string:
		if v = strings.TrimSpace(v); v != "" {
			if field != "" {
				v = field + " " + v
			}
			parts = append(parts, v)
		}
	case []any:
		for _, e := range v {
			parts = appendMessage(parts, field, e)
		}
	case map[string]any:
		if m, ok := v["message"].(string); ok && m != "" {
			return appendMessage(parts, field, m)
		}
		if _, ok := v["code"]; ok { // GitHub: {"resource":"PullRequest","field":"head","code":"invalid"}
			var words []string
			for _, k := range []string{"resource", "field", "code"} {
				if s, ok := v[k].(string); ok && s != "" {
					words = append(words, s)
				}
			}
			return appendMessage(parts, field, strings.Join(words, " "))
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			parts = appendMessage(parts, strings.TrimSpace(field+" "+k), v[k])
		}
	}
	return parts
}

// oneLine makes s one line of printable text: runs of spaces, line breaks
// and control or invisible characters become one space.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// bound cuts s to at most n bytes, on a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// seg is one path segment of an API URL, escaped; "", "." and ".." are
// refused (they would change the path).
func seg(what, s string) (string, error) {
	if s == "" || s == "." || s == ".." {
		return "", fmt.Errorf("%s %q is not a valid name", what, s)
	}
	return url.PathEscape(s), nil
}

// positive refuses a number a forge never gives.
func positive(what string, n int) error {
	if n <= 0 {
		return fmt.Errorf("%s %d: numbers start at 1", what, n)
	}
	return nil
}
