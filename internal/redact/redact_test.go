package redact

import (
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := New([]string{"OPENAI_API_KEY=abc<def>&ghi-1234", "PATH=/usr/bin:/bin", "SHORT_TOKEN=abc"})
	for in, want := range map[string]string{
		"key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA end":           "key " + Redacted + " end",
		"sk-proj-AAAAAAAAAAAAAAAAAAAA":                            Redacted,
		"value abc<def>&ghi-1234 and abc&lt;def&gt;&amp;ghi-1234": "value " + Redacted + " and " + Redacted,
		"/usr/bin:/bin stays; abc stays; sk-short stays":          "/usr/bin:/bin stays; abc stays; sk-short stays",
	} {
		if got := r.String(in); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
	var b strings.Builder
	w := r.Writer(&b)
	key := "sk-ant-api03-BBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	for _, chunk := range []string{"line one " + key[:10], key[10:] + " tail\n", "last " + key} {
		w.Write([]byte(chunk))
	}
	w.Close()
	if got := b.String(); strings.Contains(got, "BBBB") || strings.Count(got, Redacted) != 2 {
		t.Errorf("streamed: %q", got)
	}
}
