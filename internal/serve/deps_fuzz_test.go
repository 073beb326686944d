package serve

import (
	"bytes"
	"encoding/json"
	"html/template"
	"math"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/deps"
)

// FuzzDepsLog reads a dependency request log (deps.jsonl) as the attempt
// page does, with a bound of rows from the input, and renders the page's
// dependency section from it and from a step report (run_summary.json's
// deps object) from the input, in memory: no file, no server, so that it
// runs thousands of inputs where the page targets run tens. Properties: every line is counted
// once, as a request or as unreadable, exactly as a line-by-line decoding
// of the input says (a line that is not one JSON object of a request, or a
// last line without its newline, is unreadable), the refusals and the
// bytes (summed without wrapping) too; the rows shown are in file order,
// at most the bound of allowed requests and the bound of other lines, the
// first of each kind, with every string cut to its bound, and the rest
// counted as hidden; the section holds no markup from the input (no
// <script, no <img), one highlighted row per refused request shown and one
// unreadable row per unreadable line shown; the report's ecosystems are
// listed with their strings and lists cut.
func FuzzDepsLog(f *testing.F) {
	// Small seeds: an input that finds new code is minimized byte by byte
	// before fuzzing goes on, in time quadratic in its length, so that long
	// seeds (and their children) stall the fuzzer for seconds.
	f.Add([]byte("{\"url\":\"<script>\",\"decision\":\"refused\"}\n{\"bytes\":1,\"decision\":\"allowed\"}\n"), []byte(`{"ecosystems":[{"ignored":["<img>"]}]}`), uint8(0))
	f.Add([]byte("{\"method\":\"GET\",\"status\":200,\"sha256\":\"ab\",\"reason\":\"<a>\"}\n"), []byte(`{"ecosystems":[{"skipped":true,"error":"<a>"}]}`), uint8(1))
	f.Add([]byte("{x\nnull\n\n{\"status\":\"x\"}\r\n{\"bytes\":-1}\n{\"decision\":\"?\"}"), []byte(`{"ecosystems":[{"packages":-1,"bytes_fetched":2048}]}`), uint8(2))
	f.Add([]byte("{} x\n\t{\"url\":\"\xff\"}  \n"), []byte(`{"ecosystems":[{"skipped":"yes"}]}`), uint8(3))
	f.Add([]byte("{\"bytes\":9223372036854775807}\n{\"bytes\":1}\n"), []byte(`null`), uint8(4))

	pages, err := template.New("").Funcs(funcs).ParseFS(embedded, "templates/*.html")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, log, reportJSON []byte, bound uint8) {
		checkDepsLog(t, pages, log, reportJSON, bound)
	})
}

// checkDepsLog is FuzzDepsLog's check of one input.
func checkDepsLog(t testing.TB, pages *template.Template, log, reportJSON []byte, bound uint8) {
	maxRows := int(bound%16) + 1
	l := readDepsLog(bytes.NewReader(log), int64(len(log)), maxRows)

	// Line by line, as the log's writer means it.
	var want []DepsRow
	var requests, refusedN, unreadable int
	var sum int64
	parts := bytes.SplitAfter(log, []byte("\n"))
	for i, p := range parts {
		if len(p) == 0 {
			continue
		}
		row := DepsRow{Line: len(want) + 1}
		body := bytes.TrimSpace(bytes.TrimRight(p, "\r\n"))
		switch {
		case i == len(parts)-1 && !bytes.HasSuffix(p, []byte("\n")):
			row.Unreadable = "incomplete"
		case len(p) > maxEventLine:
			row.Unreadable = "long"
		case len(body) == 0 || body[0] != '{':
			row.Unreadable = "not an object"
		default:
			if err := json.Unmarshal(body, &row.Request); err != nil {
				row.Request, row.Unreadable = deps.Request{}, err.Error()
			}
		}
		if row.Unreadable != "" {
			unreadable++
		} else {
			requests++
			if row.Decision == deps.Refused {
				refusedN++
			}
			sum = addSatRef(sum, row.Bytes)
		}
		want = append(want, row)
	}
	if l.Lines != len(want) || l.Requests != requests || l.Refused != refusedN || l.Unreadable != unreadable || l.Bytes != sum || l.Cut || l.ReadError != "" {
		t.Fatalf("read %d lines, %d requests, %d refused, %d unreadable, %d bytes (cut %v, %q); want %d, %d, %d, %d, %d",
			l.Lines, l.Requests, l.Refused, l.Unreadable, l.Bytes, l.Cut, l.ReadError, len(want), requests, refusedN, unreadable, sum)
	}

	// The rows shown: the first of each kind, in order, cut.
	var shown []DepsRow
	nAllowed, nOther := 0, 0
	for _, r := range want {
		other := r.Unreadable != "" || r.Decision != deps.Allowed
		if other && nOther < maxRows {
			nOther++
			shown = append(shown, r)
		} else if !other && nAllowed < maxRows {
			nAllowed++
			shown = append(shown, r)
		}
	}
	if len(l.Rows) != len(shown) || l.Hidden != len(want)-len(shown) {
		t.Fatalf("%d rows shown and %d hidden, want %d and %d", len(l.Rows), l.Hidden, len(shown), len(want)-len(shown))
	}
	flaggedShown, unreadableShown := 0, 0
	for i, r := range l.Rows {
		w := shown[i]
		if r.Line != w.Line || (r.Unreadable != "") != (w.Unreadable != "") {
			t.Fatalf("row %d is line %d (unreadable %q), want line %d (unreadable %q)", i, r.Line, r.Unreadable, w.Line, w.Unreadable)
		}
		if r.Unreadable != "" {
			unreadableShown++
			continue
		}
		if r.Flagged() {
			flaggedShown++
		}
		for _, c := range []struct {
			got, full string
			max       int
		}{{r.Method, w.Method, 100}, {r.URL, w.URL, maxDepsField}, {r.SHA256, w.SHA256, 100}, {r.Decision, w.Decision, 100}, {r.Reason, w.Reason, maxDepsField}} {
			if !cutOf(c.got, c.full, c.max) {
				t.Fatalf("line %d: %q shown for %q (bound %d runes)", r.Line, c.got, c.full, c.max)
			}
		}
		if r.Status != w.Status || r.Bytes != w.Bytes || r.Flagged() != (w.Decision != deps.Allowed) {
			t.Fatalf("line %d shown as %+v, reads %+v", r.Line, r.Request, w.Request)
		}
	}

	// The report's ecosystems.
	v := &DepsView{Record: depsRecorded, Ecosystems: []DepsEco{}, Log: &l, Logs: []DepsFile{{Name: "attempt_1/logs/deps_npm_1.txt"}}}
	var rep deps.Report
	if decodeWhole(reportJSON, &rep) == nil {
		v.Ran, v.Ecosystems = true, depsEcos(&rep)
		if len(v.Ecosystems) != len(rep.Outcomes) {
			t.Fatalf("%d ecosystems listed of %d", len(v.Ecosystems), len(rep.Outcomes))
		}
		for i, e := range v.Ecosystems {
			o := rep.Outcomes[i]
			if len(e.Ignored)+e.IgnoredMore != len(o.Ignored) || len(e.Ignored) > maxDepsIgnored || len(e.Lockfiles) > maxDepsIgnored ||
				!cutOf(e.Error, o.Error, maxDepsError) || !cutOf(e.Ecosystem, string(o.Ecosystem), 100) {
				t.Fatalf("ecosystem %d listed as %+v, reads %+v", i, e, o)
			}
			for j, ig := range e.Ignored {
				if !cutOf(ig, o.Ignored[j], maxDepsField) {
					t.Fatalf("ignored setting %q shown as %q", o.Ignored[j], ig)
				}
			}
		}
	}

	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, "deps", map[string]any{"D": v, "R": linker{}, "Files": "/files/out/0/builds/x/WO-01/r1", "ID": "deps"}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	lower := strings.ToLower(html)
	if strings.Contains(lower, "<script") || strings.Contains(lower, "<img") || !utf8.ValidString(html) {
		t.Fatalf("the section holds markup from the input:\n%s", html)
	}
	if n := strings.Count(html, `<tr class="refused">`); n != flaggedShown {
		t.Fatalf("%d highlighted rows, want %d:\n%s", n, flaggedShown, html)
	}
	if n := strings.Count(html, `<tr class="unreadable">`); n != unreadableShown {
		t.Fatalf("%d unreadable rows, want %d:\n%s", n, unreadableShown, html)
	}
}

// cutOf reports whether got is full, or full cut to max runes and marked.
func cutOf(got, full string, max int) bool {
	if got == full {
		return utf8.RuneCountInString(full) <= max
	}
	prefix, ok := strings.CutSuffix(got, "…")
	return ok && utf8.RuneCountInString(prefix) == max && strings.HasPrefix(full, prefix)
}

// addSatRef is a + b held at the int64 bounds: written apart from addSat,
// for the check.
func addSatRef(a, b int64) int64 {
	s := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
	switch {
	case s.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case s.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return s.Int64()
}
