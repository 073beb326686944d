// Package redact removes provider keys and other secrets from text shown
// or returned to a client: key-shaped strings and the values of secret
// environment variables.
package redact

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret.
const Redacted = "[REDACTED]"

// keyPattern matches strings shaped like provider API keys: OpenAI's
// sk-… and sk-proj-…, Anthropic's sk-ant-….
var keyPattern = regexp.MustCompile(`sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}`)

// keyVars are the environment variables whose values are always secrets
// when set; any variable whose name says KEY, TOKEN, SECRET or PASSWORD is
// treated the same.
var keyVars = []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CODEX_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

// Redactor removes secrets from text: key-shaped strings, and the values
// of the key variables found in the environment, also in their HTML- and
// JSON-escaped forms (the forms they take in a page or an API answer).
type Redactor struct {
	values []string // longest first
}

// New returns the Redactor of the environment environ (KEY=value lines).
func New(environ []string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < 8 || !secretName(name) {
			continue
		}
		j, _ := json.Marshal(value)
		for _, form := range []string{value, html.EscapeString(value), string(j[1 : len(j)-1])} {
			if !seen[form] {
				seen[form] = true
				r.values = append(r.values, form)
			}
		}
	}
	slices.SortFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	return r
}

func secretName(name string) bool {
	if slices.Contains(keyVars, name) {
		return true
	}
	u := strings.ToUpper(name)
	for _, w := range []string{"API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "ACCESS_KEY"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// Bytes redacts b.
func (r *Redactor) Bytes(b []byte) []byte {
	for _, v := range r.values {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Redacted))
		}
	}
	return keyPattern.ReplaceAll(b, []byte(Redacted))
}

// String redacts s.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// Writer redacts a stream to w: it passes text on up to the last
// whitespace it has seen (secrets hold none), keeping at most 64 KiB back.
// Close writes the rest.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser { return &redactWriter{r: r, w: w} }

type redactWriter struct {
	r   *Redactor
	w   io.Writer
	buf []byte
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.buf = append(rw.buf, p...)
	cut := bytes.LastIndexAny(rw.buf, " \t\r\n")
	if cut < 0 && len(rw.buf) < 64<<10 {
		return len(p), nil
	}
	if cut < 0 {
		cut = len(rw.buf) - 1
	}
	if _, err := rw.w.Write(rw.r.Bytes(rw.buf[:cut+1])); err != nil {
		return 0, err
	}
	rw.buf = append(rw.buf[:0], rw.buf[cut+1:]...)
	return len(p), nil
}

func (rw *redactWriter) Close() error {
	if len(rw.buf) == 0 {
		return nil
	}
	_, err := rw.w.Write(rw.r.Bytes(rw.buf))
	rw.buf = nil
	return err
}
