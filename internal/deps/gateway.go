package deps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// extPrefix is the gateway path under which it serves a download location the registry itself
// named (npm tarballs on another host, cargo's dl, PyPI's files host): /_ext/<scheme>/<host>/<path>.
const extPrefix = "_ext/"

// maxRewrite bounds a registry document the gateway rewrites in memory (a package's metadata, an
// index page); artifacts stream through.
const maxRewrite = 64 << 20

// Gateway is the only network path of the dependency step: an HTTP server, reached by one confined
// package manager, that forwards GET and HEAD to one registry and to the download locations that
// registry names, follows redirects itself, and logs every request, allowed or refused.
type Gateway struct {
	eco      Ecosystem
	upstream *url.URL // the registry's root, path ending in "/"
	base     string   // the gateway's own root as the package manager reaches it, "http://127.0.0.1:P/"
	log      *Log
	client   *http.Client
	// rewrite, when set, rewrites a registry document before the package manager sees it, so that
	// the URLs it names point back at the gateway (npm's tarball URLs, cargo's dl, PyPI's links).
	rewrite func(g *Gateway, path, contentType string, body []byte) []byte

	mu    sync.Mutex
	hosts map[string]bool // scheme://host[:port] the registry named as download locations
}

// GatewayOptions configure NewGateway.
type GatewayOptions struct {
	// Private allows upstream addresses that are loopback, private or link-local: only for a
	// registry the user configured on such an address (a company mirror, a test registry).
	Private bool
	// Transport replaces the default one (tests); its dialer should refuse private addresses
	// unless Private.
	Transport http.RoundTripper
}

// NewGateway serves eco's registry at upstream to a package manager that reaches the gateway at
// base, logging to log.
func NewGateway(eco Ecosystem, upstream, base string, log *Log, o GatewayOptions) (*Gateway, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway: bad registry URL %q", upstream)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	g := &Gateway{eco: eco, upstream: u, base: base, log: log, hosts: map[string]bool{}}
	tr := o.Transport
	if tr == nil {
		tr = newTransport(o.Private, u.Host)
	}
	g.client = &http.Client{
		Transport: tr,
		Timeout:   10 * time.Minute,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			if req.URL.Scheme != "https" && req.URL.Scheme != via[0].URL.Scheme {
				return fmt.Errorf("redirect to %s: not https", req.URL.Redacted())
			}
			return nil
		},
	}
	return g, nil
}

// Base is the gateway's root URL, as the package manager is told it.
func (g *Gateway) Base() string { return g.base }

// Upstream is the registry's root URL.
func (g *Gateway) Upstream() string { return g.upstream.String() }

// GatewayURL maps a URL a registry document names to the gateway: one under the registry's root to
// the same path under the gateway's root, an http(s) URL elsewhere to /_ext/, allowing its host
// from then on (the registry named it). Anything else is returned unchanged.
func (g *Gateway) GatewayURL(raw string) string {
	if rest, ok := strings.CutPrefix(raw, g.upstream.String()); ok {
		return g.base + rest
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return raw
	}
	g.mu.Lock()
	g.hosts[u.Scheme+"://"+u.Host] = true
	g.mu.Unlock()
	return g.base + extPrefix + u.Scheme + "/" + u.Host + u.EscapedPath() + query(u)
}

// UpstreamURL is GatewayURL's inverse, for what a package manager wrote into a lockfile: URLs under
// the gateway's root become the registry's; others are returned unchanged.
func (g *Gateway) UpstreamURL(raw string) string {
	rest, ok := strings.CutPrefix(raw, g.base)
	if !ok {
		return raw
	}
	if ext, ok := strings.CutPrefix(rest, extPrefix); ok {
		if scheme, hostPath, ok := strings.Cut(ext, "/"); ok && (scheme == "http" || scheme == "https") {
			return scheme + "://" + hostPath
		}
	}
	return g.upstream.String() + rest
}

// rebase moves the gateway to a new root URL (a new port), and the lockfiles of root that name
// the old one with it.
func (g *Gateway) rebase(base, root string, lockfiles []string) error {
	if base == g.base {
		return nil
	}
	for _, lf := range lockfiles {
		path := filepath.Join(root, filepath.FromSlash(lf))
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if nb := bytes.ReplaceAll(b, []byte(g.base), []byte(base)); !bytes.Equal(nb, b) {
			if err := os.WriteFile(path, nb, 0o644); err != nil {
				return fmt.Errorf("dependency step: %s: %w", lf, err)
			}
		}
	}
	g.base = base
	return nil
}

func query(u *url.URL) string {
	if u.RawQuery == "" {
		return ""
	}
	return "?" + u.RawQuery
}

// target is the upstream URL for a request path, or a reason to refuse it.
func (g *Gateway) target(r *http.Request) (string, string) {
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	q := query(r.URL)
	if ext, ok := strings.CutPrefix(p, extPrefix); ok {
		scheme, hostPath, _ := strings.Cut(ext, "/")
		host, path, _ := strings.Cut(hostPath, "/")
		// pip re-escapes the links it reads: a port's ":" comes back as "%3A".
		if h, err := url.PathUnescape(host); err == nil {
			host = h
		}
		origin := scheme + "://" + host
		g.mu.Lock()
		named := g.hosts[origin]
		g.mu.Unlock()
		if !named {
			return origin + "/" + path + q, fmt.Sprintf("host %s is not a download location the %s registry named", origin, g.eco)
		}
		return origin + "/" + path + q, ""
	}
	if strings.Contains("/"+p+"/", "/../") {
		return g.upstream.String() + p + q, "path with ..: refused"
	}
	return g.upstream.String() + p + q, ""
}

// ServeHTTP forwards one request, or refuses it, and logs it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	to, refusal := g.target(r)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		refusal = "method " + r.Method + " is not allowed: the gateway forwards only GET and HEAD"
	}
	if refusal != "" {
		g.log.Add(Request{Method: r.Method, URL: to, Status: http.StatusForbidden, Decision: Refused, Reason: refusal})
		http.Error(w, "factory dependency gateway: refused: "+refusal, http.StatusForbidden)
		return
	}
	entry := Request{Method: r.Method, URL: to, Decision: Allowed}
	status, err := g.forward(r.Context(), w, r, to, &entry)
	if err != nil {
		entry.Reason = err.Error()
		if status == 0 {
			entry.Status = http.StatusBadGateway
			http.Error(w, "factory dependency gateway: "+to+": "+err.Error(), http.StatusBadGateway)
		}
	}
	g.log.Add(entry)
}

// forwarded are the request headers a package manager's request keeps upstream: content
// negotiation and cache validation, never credentials or cookies.
var forwarded = []string{"Accept", "If-None-Match", "If-Modified-Since", "User-Agent"}

// returned are the response headers the package manager sees.
var returned = []string{"Content-Type", "Etag", "Last-Modified", "Cache-Control"}

// forward fetches to and writes the answer to w, recording status, size and hash in e. It returns
// the status written (0 for none) and what went wrong.
func (g *Gateway) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, to string, e *Request) (int, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, to, nil)
	if err != nil {
		return 0, err
	}
	for _, h := range forwarded {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if final := resp.Request.URL.String(); final != to {
		e.Reason = "redirected to " + final
	}
	e.Status = resp.StatusCode
	for _, h := range returned {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	hash := sha256.New()
	ct := resp.Header.Get("Content-Type")
	if g.rewrite != nil && r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && rewritable(ct) {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxRewrite+1))
		if err != nil {
			return 0, err
		}
		if len(body) > maxRewrite {
			return 0, fmt.Errorf("registry document over %d MiB", maxRewrite>>20)
		}
		hash.Write(body)
		e.Bytes, e.SHA256 = int64(len(body)), hex.EncodeToString(hash.Sum(nil))
		out := g.rewrite(g, strings.TrimPrefix(r.URL.Path, "/"), ct, body)
		w.Header().Set("Content-Length", fmt.Sprint(len(out)))
		w.Header().Del("Etag") // the body is not the upstream's any more
		w.WriteHeader(resp.StatusCode)
		_, err = w.Write(out)
		return resp.StatusCode, err
	}
	if resp.ContentLength >= 0 && !resp.Uncompressed {
		w.Header().Set("Content-Length", fmt.Sprint(resp.ContentLength))
	}
	w.WriteHeader(resp.StatusCode)
	n, err := io.Copy(io.MultiWriter(w, hash), resp.Body)
	e.Bytes, e.SHA256 = n, hex.EncodeToString(hash.Sum(nil))
	return resp.StatusCode, err
}

// rewritable reports whether a response is a registry document (JSON, HTML, plain text) rather than
// an artifact.
func rewritable(contentType string) bool {
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "json") || strings.Contains(ct, "html") || strings.HasPrefix(ct, "text/") || ct == ""
}

// newTransport is a transport whose dialer refuses loopback, private, link-local and unspecified
// addresses, but for the configured registry's own host:port when private is set.
func newTransport(private bool, registryHost string) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the user's HTTP(S)_PROXY would see every request; see docs/dependencies.md
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		allowPrivate := private && sameHost(registryHost, host, port)
		var errs []error
		for _, ip := range ips {
			if !allowPrivate && privateIP(ip.IP) {
				errs = append(errs, fmt.Errorf("%s resolves to %s, a private address the user did not configure as a registry", host, ip.IP))
				continue
			}
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.IP.String(), port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("%s: no address", host)
		}
		return nil, errors.Join(errs...)
	}
	return tr
}

// sameHost reports whether host:port is the registry's host (with its default port when it names
// none).
func sameHost(registryHost, host, port string) bool {
	rh, rp, err := net.SplitHostPort(registryHost)
	if err != nil {
		rh, rp = registryHost, ""
	}
	return strings.EqualFold(rh, host) && (rp == "" || rp == port)
}

func privateIP(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
}
