package serve

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
)

// fuzzHash is the build of the fuzzing fixture.
const fuzzHash = "aaaa000000000001"

// fuzzPages are what a browser asks for about the build.
var fuzzPages = []string{"/", "/builds/0/" + fuzzHash, "/builds/0/" + fuzzHash + "/WO-01/r1/1", "/api/index", "/api/builds/0/" + fuzzHash}

// servePages answers fuzzPages from a fresh server over out, through the
// real handler, twice: the second time from the server's caches.
func servePages(t *testing.T, out string) map[string]string {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
	s, err := New(Options{Outs: []string{out}, Now: func() time.Time { return now }, Environ: []string{"PATH=/usr/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	got := map[string]string{}
	for round := 0; round < 2; round++ {
		for _, p := range fuzzPages {
			req := httptest.NewRequest("GET", p, nil)
			req.Host = "127.0.0.1:8080"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", p, rec.Code, rec.Body.Bytes())
			}
			body := rec.Body.String()
			if round == 1 && body != got[p] {
				t.Fatalf("%s differs when served again:\n%s\nthen\n%s", p, got[p], body)
			}
			got[p] = body
		}
	}
	return got
}

// FuzzBuildPage writes a build's events.jsonl, build_summary.json, a run's
// run_summary.json and an attempt's model reply from the input into an out
// directory (the rest as a real build leaves it) and serves the index, the
// build page and the attempt page, as HTML and JSON, through the real
// handler. Properties: every page answers 200, the same when served again
// (from the caches) and by a second server; no page holds a <script but
// the layout's own; a build_summary.json or run_summary.json that does not
// decode is named on the page as a partial view, as are unreadable lines
// of events.jsonl; and with damage set, an unreadable line and a line over
// the 1 MiB bound put before the events change nothing but the count of
// skipped lines: the lines after them are read as before.
func FuzzBuildPage(f *testing.F) {
	seedOut := f.TempDir()
	fixtureBuild(f, seedOut, fuzzHash, true)
	dir := filepath.Join(seedOut, "builds", fuzzHash)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	events, summary := read("events.jsonl"), read("build_summary.json")
	runSum, reply := read("WO-01/r1/run_summary.json"), read("WO-01/r1/attempt_1/llm_response_raw.txt")
	f.Add(events, summary, runSum, reply, false)
	f.Add(events, summary, runSum, reply, true)
	f.Add(events[:len(events)/2], summary[:len(summary)/2], runSum[:len(runSum)/2], reply[:len(reply)/2], false)
	f.Add(events[:len(events)-1], []byte("null"), []byte("{}"), []byte(""), true)
	lines := bytes.SplitAfter(events, []byte("\n"))
	f.Add(bytes.Join(lines[:len(lines)-2], nil), []byte(""), []byte("[]"), []byte(xssScript), false) // no build_end
	f.Add([]byte("{\"event\":\"build_start\",\"ts\":\"x\"}\n\n{\"event\":\"node\",\"wo\":\"<script>x</script>\",\"attempt\":-1}\n\xff\n"),
		[]byte(`{"verdict":"PASS","work_orders":[{"id":"<script>","outcome":"passed","commit":"<script>"}]}`),
		[]byte(`{"verdict":"<script>alert(1)</script>","attempts":[{"failure_brief":{"stage":"<ScRiPt>"}}]}`), []byte("<SCRIPT>"), false)
	f.Add([]byte(`{"event":"wo_start","wo":"WO-01"}`+"\n"+`{"event":"build_end","verdict":"</pre><script>"}`+"\n"), []byte(`{"work_orders":[{"id":"a/../b"}]}`),
		[]byte(`{"attempts":null}`), []byte("\x00"), false)
	f.Add([]byte(`{"event":"node","tokens":9223372036854775807}`+"\n"+`{"event":"node","tokens":1}`+"\n"), []byte(`{"tokens":1e400}`), []byte(`{"verdict":1}`), []byte{}, true)

	out := f.TempDir()
	fixtureBuild(f, out, fuzzHash, true)
	damagedOut := f.TempDir()
	fixtureBuild(f, damagedOut, fuzzHash, true)
	long := append(bytes.Repeat([]byte("x"), maxEventLine+1), '\n')
	put := func(t *testing.T, out, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(out, "builds", fuzzHash, filepath.FromSlash(name)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, events, summary, runSum, reply []byte, damage bool) {
		put(t, out, "events.jsonl", events)
		put(t, out, "build_summary.json", summary)
		put(t, out, "WO-01/r1/run_summary.json", runSum)
		put(t, out, "WO-01/r1/attempt_1/llm_response_raw.txt", reply)
		pages := servePages(t, out)
		if again := servePages(t, out); !maps.Equal(pages, again) {
			t.Fatal("a second server serves other pages")
		}
		for p, body := range pages {
			if strings.HasPrefix(p, "/api/") {
				if !json.Valid([]byte(body)) {
					t.Fatalf("%s is not JSON: %s", p, body)
				}
				continue
			}
			if n := strings.Count(strings.ToLower(body), "<script"); n != 1 {
				t.Fatalf("%s holds %d <script tags, want only the layout's:\n%s", p, n, body)
			}
		}
		buildPage := pages["/builds/0/"+fuzzHash]
		var view BuildView
		if err := json.Unmarshal([]byte(pages["/api/builds/0/"+fuzzHash]), &view); err != nil {
			t.Fatal(err)
		}
		var sum builder.Summary
		if err := json.Unmarshal(summary, &sum); err != nil {
			if !strings.Contains(view.SummaryError, "build_summary.json") || !strings.Contains(buildPage, "Partial view: build_summary.json could not be read") {
				t.Fatalf("an unreadable build_summary.json (%v) is not named: %q", err, view.SummaryError)
			}
		} else if view.SummaryError != "" {
			t.Fatalf("a readable build_summary.json is called unreadable: %s", view.SummaryError)
		}
		var rsum factory.RunSummary
		if err := json.Unmarshal(runSum, &rsum); err != nil && !strings.Contains(buildPage, "run_summary.json could not be read") {
			t.Fatalf("an unreadable run_summary.json (%v) is not named on the build page", err)
		}
		if (view.EventsSkipped > 0) != strings.Contains(buildPage, "could not be read and were skipped") {
			t.Fatalf("%d skipped lines, and the page says otherwise", view.EventsSkipped)
		}
		if !damage {
			return
		}
		put(t, damagedOut, "events.jsonl", append(append([]byte("not json\n"), long...), events...))
		put(t, damagedOut, "build_summary.json", summary)
		put(t, damagedOut, "WO-01/r1/run_summary.json", runSum)
		put(t, damagedOut, "WO-01/r1/attempt_1/llm_response_raw.txt", reply)
		var damaged BuildView
		if err := json.Unmarshal([]byte(servePages(t, damagedOut)["/api/builds/0/"+fuzzHash]), &damaged); err != nil {
			t.Fatal(err)
		}
		if damaged.EventsSkipped != view.EventsSkipped+2 {
			t.Fatalf("two damaged lines more gave %d skipped lines, not %d+2", damaged.EventsSkipped, view.EventsSkipped)
		}
		if damaged.EventsFrom != view.EventsFrom+int64(len("not json\n")+len(long)) {
			t.Fatalf("events offset %d, want %d + the damaged lines", damaged.EventsFrom, view.EventsFrom)
		}
		damaged.EventsSkipped, damaged.EventsFrom = view.EventsSkipped, view.EventsFrom
		a, _ := json.Marshal(view)
		b, _ := json.Marshal(damaged)
		if !bytes.Equal(a, b) {
			t.Fatalf("damaged lines before the events changed the view:\n%s\nthen\n%s", a, b)
		}
	})
}
