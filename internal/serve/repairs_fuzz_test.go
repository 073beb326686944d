package serve

import (
	"bytes"
	"errors"
	"html/template"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/forge"
	"github.com/factory-harness/factory/internal/workorder"
)

// FuzzRepairRecord decodes a repair.json from the input as the build page
// does and renders the page's repairs section from it, in memory (no
// file, no server). Properties: a record decodes exactly when the strict
// decoder takes it and it names repair n with an outcome factory writes;
// every string shown is the record's, cut to its bound, and the id lists
// keep their bound; the section holds no markup from the input and is
// valid UTF-8; an undecodable record is named as a partial view.
func FuzzRepairRecord(f *testing.F) {
	f.Add([]byte(`{"repair":1,"failed":"WO-02","outcome":"applied","removed":["WO-02"],"added":["<script>"],"revised":[]}`), uint8(1))
	f.Add([]byte(`{"repair":2,"outcome":"gave_up","reason":"<img src=x onerror=alert(1)>"}`), uint8(2))
	f.Add([]byte(`{"repair":1,"outcome":"rejected","reason":"\u00e9\u00e9","stage":"</pre><script>"}`), uint8(1))
	f.Add([]byte(`{"repair":1,"repair":1}`), uint8(1))
	f.Add([]byte("{\"failed\":\"\xff\"}"), uint8(0))
	f.Add([]byte(`null`), uint8(3))
	pages, err := template.New("").Funcs(funcs).ParseFS(embedded, "templates/*.html")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		r, why := decodeRepair(int(n), data)
		var want builder.RepairRecord
		err := workorder.DecodeStrict(data, &want)
		ok := err == nil && want.Repair == int(n) &&
			(want.Outcome == builder.RepairApplied || want.Outcome == builder.RepairGaveUp || want.Outcome == builder.RepairRejected)
		if (r != nil) != ok || (r == nil) == (why == "") {
			t.Fatalf("decodeRepair = %+v, %q; the strict decoder says %v", r, why, err)
		}
		v := RepairView{N: int(n), Outcome: repairUnreadable, Error: why, Files: []RepairFile{{Label: "record", Name: "builds/x/repairs/1/repair.json"}}}
		if r != nil {
			v.Outcome, v.Record = r.Outcome, r
			for _, c := range []struct {
				got, full string
				max       int
			}{{r.Failed, want.Failed, 100}, {r.Title, want.Title, maxDepsField}, {r.Stage, want.Stage, 100}, {r.Reason, want.Reason, maxRepairReason}, {r.Dir, want.Dir, maxDepsField}} {
				if !cutOf(c.got, c.full, c.max) {
					t.Fatalf("%q shown for %q (bound %d runes)", c.got, c.full, c.max)
				}
			}
			for _, l := range []struct{ got, full []string }{{r.Removed, want.Removed}, {r.Added, want.Added}, {r.Revised, want.Revised}} {
				if len(l.got) > maxRepairIDs+1 || len(l.full) <= maxRepairIDs && len(l.got) != len(l.full) {
					t.Fatalf("%d ids listed of %d", len(l.got), len(l.full))
				}
			}
		}
		var b strings.Builder
		if err := pages.ExecuteTemplate(&b, "repairs", map[string]any{"Repairs": []RepairView{v}, "R": linker{}, "Src": "/files/out/0"}); err != nil {
			t.Fatal(err)
		}
		html := b.String()
		lower := strings.ToLower(html)
		if strings.Contains(lower, "<script") || strings.Contains(lower, "<img") || strings.Count(lower, "<a ") != 1 || !utf8.ValidString(html) {
			t.Fatalf("the section holds markup from the input:\n%s", html)
		}
		if r == nil && !strings.Contains(html, "Partial view: ") {
			t.Fatalf("an unreadable record (%s) is not named:\n%s", why, html)
		}
	})
}

// FuzzPRRecord decodes a pr.json from the input as the build page does
// and renders the page's pull request section, in memory. Properties: a
// record decodes exactly when the strict decoder takes it (else the
// section says why, as a partial view); it links to its URL only when that
// is an absolute http or https URL within its bound, and to nothing else;
// every string shown is the record's, cut; the section holds no markup
// from the input and is valid UTF-8.
func FuzzPRRecord(f *testing.F) {
	f.Add([]byte(`{"forge":"github","repo":"acme/calc","number":7,"url":"https://github.com/acme/calc/pull/7","state":"open","draft":true,"head":"factory/x","base":"main","commit":"0123456789abcdef","action":"created","pushed":true}`))
	f.Add([]byte(`{"url":"javascript:alert(1)","repo":"<script>x</script>"}`))
	f.Add([]byte(`{"url":"https://a/\"><img src=x onerror=alert(1)>"}`))
	f.Add([]byte(`{"url":"HTTPS://A/b","head":"\u00e9"}`))
	f.Add([]byte(`{"number":1,"number":2}`))
	f.Add([]byte("{\"repo\":\"\xff\"}"))
	f.Add([]byte(`null`))
	pages, err := template.New("").Funcs(funcs).ParseFS(embedded, "templates/*.html")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := decodePR(data)
		var full forge.Record
		strictErr := workorder.DecodeStrict(data, &full)
		if len(data) > forge.MaxRecordBytes {
			strictErr = errors.New("too large")
		}
		if (v.Record != nil) != (strictErr == nil) || (v.Record == nil) == (v.Error == "") {
			t.Fatalf("decodePR = %+v; the strict decoder says %v", v, strictErr)
		}
		if v.Record != nil {
			if !cutOf(v.Record.URL, full.URL, maxDepsField) || !cutOf(v.Record.Repo, full.Repo, maxDepsField) || !cutOf(v.Record.Head, full.Head, maxDepsField) ||
				!cutOf(v.Record.Base, full.Base, maxDepsField) || !cutOf(v.Record.Commit, full.Commit, 100) || !cutOf(string(v.Record.State), string(full.State), 100) {
				t.Fatalf("shown as %+v, reads %+v", v.Record, full)
			}
		}
		if v.Link != "" {
			u, err := url.Parse(v.Link)
			if v.Link != full.URL || err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				t.Fatalf("links to %q (the record's URL %q)", v.Link, full.URL)
			}
		}
		var b bytes.Buffer
		if err := pages.ExecuteTemplate(&b, "pr", map[string]any{"P": v, "R": linker{report: true}, "Src": "/files/out/0", "Hash": "x"}); err != nil {
			t.Fatal(err)
		}
		html := b.String()
		lower := strings.ToLower(html)
		links := strings.Count(lower, "<a ")
		if strings.Contains(lower, "<script") || strings.Contains(lower, "<img") || !utf8.ValidString(html) || links != 0 && v.Link == "" || links > 1 {
			t.Fatalf("the section holds markup from the input:\n%s", html)
		}
		if v.Record == nil && !strings.Contains(html, "Partial view: ") {
			t.Fatalf("an unreadable record (%s) is not named:\n%s", v.Error, html)
		}
	})
}
