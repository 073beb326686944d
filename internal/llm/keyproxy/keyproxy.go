// Package keyproxy keeps a provider's API key away from an agent: a reverse proxy on 127.0.0.1 that
// holds the real key, accepts only requests carrying a random stand-in key, and forwards them to one
// model endpoint with the real key in their place.
//
// It lives under internal/llm because it is model HTTP: the one package tree that talks to model
// endpoints. The agent CLIs are given its URL and its stand-in key; the runner starts one per
// iteration and closes it after.
package keyproxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// Proxy is a started key proxy. Close it when the agent is done.
type Proxy struct {
	// URL is the proxy's base URL, "http://127.0.0.1:<port>": a request to URL + p goes to the
	// upstream base URL + p.
	URL string
	// Key is the stand-in key the agent must present, random per proxy.
	Key string
	// Port is the TCP port the proxy listens on.
	Port uint16

	srv      *http.Server
	upstream *url.URL
	realKey  string
}

// authHeaders are the headers that carry an API key, in the order they are checked: OpenAI-style
// bearer tokens, Anthropic's x-api-key and Azure's api-key. The proxy answers in kind: the real key
// goes upstream in the header the stand-in came in, and the others are removed.
var authHeaders = []string{"Authorization", "X-Api-Key", "Api-Key"}

// Start starts a proxy on 127.0.0.1 forwarding to upstream (an absolute http or https base URL such
// as "https://api.openai.com/v1") with key. transport is the client side (nil: http.DefaultTransport).
func Start(upstream, key string, transport http.RoundTripper) (*Proxy, error) {
	u, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("key proxy: the API key is empty")
	}
	stand, err := randomKey()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("key proxy: listen on 127.0.0.1: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	p := &Proxy{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Key: stand, Port: uint16(port), upstream: u, realKey: key}
	if transport == nil {
		transport = http.DefaultTransport
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     transport,
		FlushInterval: -1, // server-sent events go through as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "key proxy: the upstream model endpoint failed: "+p.scrub(err.Error()), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p.guard(rp), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// CheckUpstream checks an upstream base URL as Start does.
func CheckUpstream(upstream string) error {
	_, err := parseUpstream(upstream)
	return err
}

func parseUpstream(upstream string) (*url.URL, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("key proxy: upstream %q does not parse: %w", upstream, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("key proxy: upstream %q is not an absolute http or https URL without credentials", upstream)
	}
	return u, nil
}

// randomKey is a stand-in key: 32 random bytes in hex, with a prefix that names it.
func randomKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("key proxy: random key: %w", err)
	}
	return "factory-proxy-" + hex.EncodeToString(b), nil
}

// guard refuses requests that do not present the stand-in key.
func (p *Proxy) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if presented(r.Header) == "" || !p.matches(r.Header) {
			http.Error(w, "key proxy: missing or wrong API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// presented returns the first auth header set in h, or "".
func presented(h http.Header) string {
	for _, name := range authHeaders {
		if h.Get(name) != "" {
			return name
		}
	}
	return ""
}

// matches reports whether every auth header that is set carries the stand-in key.
func (p *Proxy) matches(h http.Header) bool {
	for _, name := range authHeaders {
		v := h.Get(name)
		if v == "" {
			continue
		}
		if name == "Authorization" {
			var ok bool
			if v, ok = strings.CutPrefix(v, "Bearer "); !ok {
				return false
			}
		}
		if subtle.ConstantTimeCompare([]byte(v), []byte(p.Key)) != 1 {
			return false
		}
	}
	return true
}

// rewrite points the request at the upstream base URL and swaps the stand-in key for the real one.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	name := presented(pr.In.Header)
	pr.SetURL(p.upstream)
	for _, h := range authHeaders {
		pr.Out.Header.Del(h)
	}
	value := p.realKey
	if name == "Authorization" {
		value = "Bearer " + value
	}
	pr.Out.Header.Set(name, value)
}

// scrub removes the real key from a message, should an error ever quote a header.
func (p *Proxy) scrub(msg string) string { return strings.ReplaceAll(msg, p.realKey, "[key]") }

// Close stops the proxy, ending requests in flight.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}
