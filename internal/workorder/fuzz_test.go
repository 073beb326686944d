package workorder

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/factory-harness/factory/internal/canon"
)

func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"a.py", "./a.py", "src/x/../y.py", "a/b/", "données/é.md",
		"", "/etc/passwd", "C:foo", `c:\x`, `a\b`, "..", "../x", "a/../../x",
		"*.py", "a?.py", "[ab].py", ".git/config", ".GIT/hooks/x", "sub/.git/x",
		".", "./", "a\x00b", "a\nb", "a/./b//c", ".gitignore", "x/.GiT",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := NormalizePath(p)
		if err != nil {
			if got != "" {
				t.Fatalf("NormalizePath(%q) returned %q with error %v", p, got, err)
			}
			return
		}
		if got == "" || got == "." {
			t.Fatalf("NormalizePath(%q) = %q, which names no file", p, got)
		}
		if strings.HasPrefix(got, "/") {
			t.Fatalf("NormalizePath(%q) = %q is absolute", p, got)
		}
		if len(got) >= 2 && got[1] == ':' && strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", rune(got[0])) {
			t.Fatalf("NormalizePath(%q) = %q starts with a drive letter", p, got)
		}
		if strings.Contains(got, `\`) {
			t.Fatalf("NormalizePath(%q) = %q contains a backslash", p, got)
		}
		if strings.ContainsAny(got, "*?[") {
			t.Fatalf("NormalizePath(%q) = %q contains a glob character", p, got)
		}
		if strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("NormalizePath(%q) = %q contains a control character", p, got)
		}
		for _, part := range strings.Split(got, "/") {
			switch {
			case part == "..":
				t.Fatalf("NormalizePath(%q) = %q has a .. component", p, got)
			case part == "." || part == "":
				t.Fatalf("NormalizePath(%q) = %q is not clean", p, got)
			case strings.ToLower(part) == ".git":
				t.Fatalf("NormalizePath(%q) = %q has a .git component", p, got)
			}
		}
		again, err := NormalizePath(got)
		if err != nil {
			t.Fatalf("NormalizePath(%q) = %q, but NormalizePath(%q) fails: %v", p, got, got, err)
		}
		if again != got {
			t.Fatalf("NormalizePath is not idempotent: %q -> %q -> %q", p, got, again)
		}
	})
}

func FuzzParseProposal(f *testing.F) {
	h := EmptySHA256
	for _, s := range []string{
		`{"summary":"s","writes":[{"path":"a.py","base_sha256":"` + h + `","content":"x\n"}]}`,
		" \n" + `{"summary":"","writes":[{"path":"a","base_sha256":"` + h + `","content":""},{"path":"b","base_sha256":"` + h + `","content":"<&>\u2028"}]}` + "\n",
		`{"summary":"s","writes":[]}`,
		`{"summary":"s","writes":[null]}`,
		`{"summary":"s","writes":{}}`,
		`{"summary":"s","writes":[{"path":"a","base_sha256":"` + strings.ToUpper(h) + `","content":""}]}`,
		`{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"\u0000"}]}`,
		`{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"a","content":"b"}]}`,
		`{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"a","mode":"0755"}]}`,
		`{"summary":"s","summary":"t"}`,
		"Here you go:\n```json\n{}\n```",
		`[{"summary":"s"}]`,
		`{"summary":"s","writes":[{"path":"a","base_sha256":"` + h + `","content":"\ud800"}]} trailing`,
		`{"summary":null,"writes":[{"path":null,"base_sha256":null,"content":null}]}`,
		"{\"summary\":\"\xff\"}",
		`{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		p, err := ParseProposal(reply)
		if err != nil {
			if p != nil {
				t.Fatalf("ParseProposal returned a proposal alongside error %v", err)
			}
			return
		}
		checkProposalInvariants(t, p)

		// Round trip: what we accepted, re-encoded, is accepted again and
		// means the same thing. HTML escaping is off so the re-encoding does
		// not grow past MaxReplyBytes for content the original fitted in.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p); err != nil {
			t.Fatalf("re-marshal accepted proposal: %v", err)
		}
		if buf.Len() > MaxReplyBytes {
			return // U+2028/U+2029 are always escaped and may grow the reply; out of scope
		}
		q, err := ParseProposal(buf.String())
		if err != nil {
			t.Fatalf("re-parse of re-marshalled proposal failed: %v\nreply: %q\nre-marshalled: %q", err, reply, buf.String())
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the proposal:\n got %#v\nwant %#v", q, p)
		}
	})
}

func checkProposalInvariants(t *testing.T, p *WriteProposal) {
	t.Helper()
	if len(p.Writes) == 0 {
		t.Fatal("accepted a proposal with no writes")
	}
	total := 0
	for i, w := range p.Writes {
		if len(w.BaseSHA256) != 64 || strings.Trim(w.BaseSHA256, "0123456789abcdef") != "" {
			t.Fatalf("writes[%d].base_sha256 %q is not 64 lowercase hex digits", i, w.BaseSHA256)
		}
		if strings.IndexByte(w.Content, 0) >= 0 {
			t.Fatalf("writes[%d].content contains NUL", i)
		}
		if len(w.Content) > MaxWriteBytes {
			t.Fatalf("writes[%d].content is %d bytes, over MaxWriteBytes", i, len(w.Content))
		}
		total += len(w.Content)
	}
	if total > MaxProposalBytes {
		t.Fatalf("accepted %d content bytes, over MaxProposalBytes", total)
	}
}

func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		minimalOrder,
		`{"id":"WO-01","title":"t","intent":"i","allowed_files":["./a.py","b/../c.py"],"forbidden":["secrets/","*.lock","no prose here"],` +
			`"acceptance_commands":["true"],"context_files":["a.py"],"preconditions":[{"kind":"file_exists","path":"a.py"}],` +
			`"postconditions":[{"kind":"file_exists","path":"c.py"}],"notes":null,"verify_exempt":true}`,
		// Before the fix, "./C:x" normalised to "C:x", which does not parse again.
		`{"id":"a","title":"t","intent":"i","allowed_files":["./C:x"],"forbidden":[],"acceptance_commands":["true"],"context_files":[]}`,
		`{"id":"x","id":"y"}`,
		`{"id":5}`,
		`{"preconditions":[{"kind":"file_exists","path":"a","extra":1}]}`,
		`{"preconditions":[null,5,"x",[]]}`,
		`{"forbidden":[null]}`,
		`{"allowed_files":{"a":1}}`,
		`{"notes":{"a":[1,2,{"b":null}]}}`,
		`{} {}`,
		`[]`,
		`null`,
		"\xff",
		`{"id":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w WorkOrder
		if err := DecodeStrict(data, &w); err != nil {
			return
		}
		if err := w.Normalize(); err != nil {
			return
		}
		// A valid, normalised order is a fixed point: its canonical JSON
		// parses back to the same order and hence the same run id.
		b, err := canon.JSON(&w)
		if err != nil {
			t.Fatalf("canonical JSON of a valid order: %v", err)
		}
		w2, err := ParseWorkOrder(b)
		if err != nil {
			t.Fatalf("canonical JSON of a valid order does not parse: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(&w, w2) {
			t.Fatalf("normalised order changed on re-parse:\n got %#v\nwant %#v", w2, &w)
		}
		id1, err1 := RunID(&w, "c0ffee")
		id2, err2 := RunID(w2, "c0ffee")
		if err1 != nil || err2 != nil || id1 != id2 {
			t.Fatalf("run ids differ after re-parse: %q (%v) vs %q (%v)", id1, err1, id2, err2)
		}
	})
}
