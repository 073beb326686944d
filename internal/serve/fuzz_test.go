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
	"github.com/factory-harness/factory/internal/loop"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/workorder"
)

// fuzzHash is the build of the fuzzing fixture.
const fuzzHash = "aaaa000000000001"

// fuzzPages are what a browser asks for about the build.
var fuzzPages = []string{"/", "/builds/0/" + fuzzHash, "/builds/0/" + fuzzHash + "/WO-01/r1/1", "/api/index", "/api/builds/0/" + fuzzHash,
	"/api/builds/0/" + fuzzHash + "/WO-01/r1/1"}

// servePages answers fuzzPages from a fresh server over out.
func servePages(t *testing.T, out string) map[string]string {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
	s, err := New(Options{Outs: []string{out}, Now: func() time.Time { return now }, Environ: []string{"PATH=/usr/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return serveAll(t, s.Handler(), fuzzPages)
}

// serveAll answers pages through h, twice: the second time from the
// server's caches, which must give the same.
func serveAll(t *testing.T, h http.Handler, pages []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for round := 0; round < 2; round++ {
		for _, p := range pages {
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

// checkPages: the API answers JSON; a page holds no <script but the
// layout's own.
func checkPages(t *testing.T, pages map[string]string) {
	t.Helper()
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
}

// FuzzBuildPage writes a build's events.jsonl, build_summary.json, a run's
// run_summary.json and an attempt's model reply and proposed_writes.json
// from the input into an out directory (the rest as a real build leaves
// it) and serves the index, the build page and the attempt page, as HTML
// and JSON, through the real handler. Properties: every page answers 200,
// the same when served again (from the caches) and by a second server; no
// page holds a <script but the layout's own; a build_summary.json,
// run_summary.json or proposed_writes.json that does not decode is named
// on the page as a partial view (an attempt is then not called running or
// passed), as are unreadable lines of events.jsonl; and with damage set,
// an unreadable line and a line over the 1 MiB bound put before the events
// change nothing but the count of skipped lines: the lines after them are
// read as before.
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
	prop := read("WO-01/r1/attempt_1/proposed_writes.json")
	f.Add(events, summary, runSum, reply, prop, false)
	f.Add(events, summary, runSum, reply, prop, true)
	f.Add(events[:len(events)/2], summary[:len(summary)/2], runSum[:len(runSum)/2], reply[:len(reply)/2], prop[:len(prop)/2], false)
	f.Add(events[:len(events)-1], []byte("null"), []byte("{}"), []byte(""), []byte(`{"writes":[{"path":"../../x","content":"<script>"}]}`), true)
	lines := bytes.SplitAfter(events, []byte("\n"))
	f.Add(bytes.Join(lines[:len(lines)-2], nil), []byte(""), []byte("[]"), []byte(xssScript), []byte(`{"summary":1}`), false) // no build_end
	f.Add([]byte("{\"event\":\"build_start\",\"ts\":\"x\"}\n\n{\"event\":\"node\",\"wo\":\"<script>x</script>\",\"attempt\":-1}\n\xff\n"),
		[]byte(`{"verdict":"PASS","work_orders":[{"id":"<script>","outcome":"passed","commit":"<script>"}]}`),
		[]byte(`{"verdict":"<script>alert(1)</script>","attempts":[{"failure_brief":{"stage":"<ScRiPt>"}}]}`), []byte("<SCRIPT>"), []byte("{"), false)
	f.Add([]byte(`{"event":"wo_start","wo":"WO-01"}`+"\n"+`{"event":"build_end","verdict":"</pre><script>"}`+"\n"), []byte(`{"work_orders":[{"id":"a/../b"}]}`),
		[]byte(`{"attempts":null}`), []byte("\x00"), []byte(`{"writes":[{"path":"a.py","content":"</pre><script>x</script>","base_sha256":"<script>"}]}`), false)
	f.Add([]byte(`{"event":"node","tokens":9223372036854775807}`+"\n"+`{"event":"node","tokens":1}`+"\n"), []byte(`{"tokens":1e400}`), []byte(`{"verdict":1}`), []byte{}, []byte("null"), true)

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
	f.Fuzz(func(t *testing.T, events, summary, runSum, reply, prop []byte, damage bool) {
		put(t, out, "events.jsonl", events)
		put(t, out, "build_summary.json", summary)
		put(t, out, "WO-01/r1/run_summary.json", runSum)
		put(t, out, "WO-01/r1/attempt_1/llm_response_raw.txt", reply)
		put(t, out, "WO-01/r1/attempt_1/proposed_writes.json", prop)
		pages := servePages(t, out)
		if again := servePages(t, out); !maps.Equal(pages, again) {
			t.Fatal("a second server serves other pages")
		}
		checkPages(t, pages)
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
		attemptPage := pages["/builds/0/"+fuzzHash+"/WO-01/r1/1"]
		var attempt AttemptView
		if err := json.Unmarshal([]byte(pages["/api/builds/0/"+fuzzHash+"/WO-01/r1/1"]), &attempt); err != nil {
			t.Fatal(err)
		}
		var rsum factory.RunSummary
		if err := json.Unmarshal(runSum, &rsum); err != nil {
			if !strings.Contains(buildPage, "run_summary.json could not be read") || !strings.Contains(attemptPage, "Partial view: run_summary.json could not be read") {
				t.Fatalf("an unreadable run_summary.json (%v) is not named on the build and attempt pages", err)
			}
			if attempt.Verdict == "running" || attempt.Verdict == "PASS" {
				t.Fatalf("with its run_summary.json unreadable (%v), the attempt is called %s", err, attempt.Verdict)
			}
		}
		var wp workorder.WriteProposal
		if err := json.Unmarshal(prop, &wp); err != nil && !strings.Contains(attemptPage, "Partial view: proposed_writes.json could not be read") {
			t.Fatalf("an unreadable proposed_writes.json (%v) is not named on the attempt page", err)
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
		put(t, damagedOut, "WO-01/r1/attempt_1/proposed_writes.json", prop)
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

// fixtureLoop writes repo/.runner as a loop run t1 leaves it after two
// iterations: run.json, tree.json, GOAL.md, the events and iteration 1's
// meta.json, prompt, logs and diff.
func fixtureLoop(t testing.TB, repo string) {
	t.Helper()
	leaf := func(id string, order int, passes bool) *tree.Node {
		return &tree.Node{ID: id, Order: order, Title: "T " + id, Goal: "G " + id, Acceptance: []string{"python3 -m unittest"}, Passes: passes,
			MaxAttempts: 3, Children: []*tree.Node{}}
	}
	root := leaf("root", 0, false)
	root.Children = []*tree.Node{leaf("parse", 0, true), leaf("render", 1, false)}
	root.Children[1].Title = "render " + xssScript
	r := filepath.Join(repo, loop.RunnerDir)
	ts := func(s int) string { return time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC).Format(time.RFC3339Nano) }
	write(t, filepath.Join(r, "run.json"), jsonLine(t, loop.RunState{RunID: "t1", Branch: "loop/t1", Iteration: 2}))
	write(t, filepath.Join(r, "tree.json"), string(tree.Canonical(root)))
	write(t, filepath.Join(r, "GOAL.md"), "# Goal\nA CLI "+xssImg+"\n")
	write(t, filepath.Join(r, "iterations", "t1", "events.jsonl"),
		jsonLine(t, loop.Event{Time: ts(0), RunID: "t1", Event: "run_started"})+
			jsonLine(t, loop.Event{Time: ts(1), RunID: "t1", Iteration: 1, Event: "iteration_started", Node: "parse"})+
			jsonLine(t, loop.Event{Time: ts(9), RunID: "t1", Iteration: 1, Event: "iteration_committed", Node: "parse", Detail: map[string]any{"commit": "abc"}})+
			jsonLine(t, loop.Event{Time: ts(10), RunID: "t1", Iteration: 2, Event: "iteration_started", Node: "render"}))
	exit := 0
	it := filepath.Join(r, "iterations", "t1", "1")
	write(t, filepath.Join(it, "meta.json"), jsonLine(t, loop.Meta{RunID: "t1", Iteration: 1, Mode: "IMPLEMENT", Node: "parse", Path: "root/parse",
		Guard: "PASS", Reason: "guard passed " + xssLink, StartCommit: "1111111111111111111111111111111111111111", Commit: "2222222222222222222222222222222222222222",
		ExecutorArgv: []string{"claude", "-p"}, ExecutorSeconds: 7.5, GuardArgv: []string{"python3", "-m", "unittest"}, GuardExit: &exit, Changed: []string{"parse.py"}}))
	write(t, filepath.Join(it, "prompt.md"), "You are the executor. "+xssScript+"\n")
	write(t, filepath.Join(it, "guard.log"), "Ran 3 tests\nOK\n")
	write(t, filepath.Join(it, "executor.log"), `{"type":"assistant","message":{"content":[{"type":"text","text":"I will edit `+"<script>x</script>"+`"}]}}`+"\n"+
		`{"type":"item.completed","item":{"type":"command_execution","command":"pytest","aggregated_output":"ok","exit_code":0}}`+"\n")
	write(t, filepath.Join(it, "diff.patch"), "diff --git a/parse.py b/parse.py\nnew file mode 100644\n--- /dev/null\n+++ b/parse.py\n@@ -0,0 +1,2 @@\n+print('"+xssScript+"')\n+x = 1\n")
}

// FuzzLoopPage writes a loop run's events.jsonl, .runner/run.json,
// tree.json and an iteration's meta.json, executor log (read as an agent
// transcript) and diff.patch from the input into a repository's .runner
// (the rest as a real run leaves it) and serves the index, the run page and
// the iteration page, as HTML and JSON, through the real handler.
// Properties: every page answers 200, the same again and from a second
// server; no page holds a <script but the layout's own; a run.json or
// meta.json that does not decode is named on the page (not taken for
// "another run" or "cut off"); unreadable lines of events.jsonl are
// counted on the page.
func FuzzLoopPage(f *testing.F) {
	seedRepo := f.TempDir()
	fixtureLoop(f, seedRepo)
	r := filepath.Join(seedRepo, loop.RunnerDir)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(r, filepath.FromSlash(name)))
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	files := []string{"iterations/t1/events.jsonl", "run.json", "tree.json", "iterations/t1/1/meta.json", "iterations/t1/1/executor.log", "iterations/t1/1/diff.patch"}
	var real [][]byte
	for _, name := range files {
		real = append(real, read(name))
	}
	if _, err := tree.Decode(real[2]); err != nil {
		f.Fatalf("the fixture's tree: %v", err)
	}
	half := func(b []byte) []byte { return b[:len(b)/2] }
	f.Add(real[0], real[1], real[2], real[3], real[4], real[5])
	f.Add(half(real[0]), half(real[1]), half(real[2]), half(real[3]), half(real[4]), half(real[5]))
	f.Add(append(bytes.Clone(real[0]), "\n{\nnull\n"...), []byte(`{"run_id":"t2"}`), []byte(`{}`), []byte(`null`), []byte("{\"type\":\"result\",\"result\":\"<script>\"}\n"),
		[]byte("diff --git a/<script> b/<script>\n+++ b/x\n@@ -1 +1 @@\n-<script>\n+</pre><script>alert(1)</script>\n"))
	f.Add([]byte(`{"time":"x","event":"complete"}`+"\n"), []byte(`{"run_id":"t1","iteration":-1}`), bytes.Replace(real[2], []byte(`"passes":false`), []byte(`"passes":true`), -1),
		[]byte(`{"guard":"<ScRiPt>","iteration":"1"}`), []byte("\xff\xfe<script"), []byte("@@ -0,0 +1 @@\n+\x00\n"))
	repo := f.TempDir()
	fixtureLoop(f, repo)
	pages := []string{"/", "/loops/0/t1", "/loops/0/t1/1", "/api/index", "/api/loops/0/t1", "/api/loops/0/t1/1"}
	serve := func(t *testing.T) map[string]string {
		now := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
		s, err := New(Options{Repos: []string{repo}, Now: func() time.Time { return now }, Environ: []string{"PATH=/usr/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return serveAll(t, s.Handler(), pages)
	}
	f.Fuzz(func(t *testing.T, events, runState, treeJSON, meta, executorLog, patch []byte) {
		for i, data := range [][]byte{events, runState, treeJSON, meta, executorLog, patch} {
			if err := os.WriteFile(filepath.Join(repo, loop.RunnerDir, filepath.FromSlash(files[i])), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := serve(t)
		if again := serve(t); !maps.Equal(got, again) {
			t.Fatal("a second server serves other pages")
		}
		checkPages(t, got)
		runPage, iterPage := got["/loops/0/t1"], got["/loops/0/t1/1"]
		var view LoopView
		if err := json.Unmarshal([]byte(got["/api/loops/0/t1"]), &view); err != nil {
			t.Fatal(err)
		}
		var st loop.RunState
		if err := json.Unmarshal(runState, &st); err != nil {
			if !strings.Contains(runPage, "Partial view: .runner/run.json could not be read") || strings.Contains(runPage, "belongs to another run") {
				t.Fatalf("an unreadable run.json (%v) is not named, or taken for another run's", err)
			}
		}
		var m loop.Meta
		if err := json.Unmarshal(meta, &m); err != nil {
			if !strings.Contains(runPage, "meta.json could not be read") || !strings.Contains(iterPage, "Partial view: meta.json could not be read") ||
				strings.Contains(runPage, "no meta.json") {
				t.Fatalf("an unreadable meta.json (%v) is not named on both pages", err)
			}
		}
		if (view.EventsSkipped > 0) != strings.Contains(runPage, "could not be read and were skipped") {
			t.Fatalf("%d skipped lines, and the page says otherwise", view.EventsSkipped)
		}
	})
}
