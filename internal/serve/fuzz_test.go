package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/workorder"
)

// fuzzHash is the build of the fuzzing fixture.
const fuzzHash = "aaaa000000000001"

// fuzzOut and fuzzRepo are the directories the fuzz targets' servers read:
// in memory (memFS), so that an input costs no file and no git process.
const (
	fuzzOut  = "/fuzz/out"
	fuzzRepo = "/fuzz/repo"
)

// fuzzPages are what a browser asks for about the build.
var fuzzPages = []string{"/", "/builds/0/" + fuzzHash, "/builds/0/" + fuzzHash + "/WO-01/r1/1", "/api/index", "/api/builds/0/" + fuzzHash,
	"/api/builds/0/" + fuzzHash + "/WO-01/r1/1"}

// memTree reads the tree under dir into memory, once, for the servers of
// every input.
func memTree(t testing.TB, dir string) fstest.MapFS {
	t.Helper()
	tree := fstest.MapFS{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			tree[filepath.ToSlash(rel)] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
			return nil
		}
		data, err := os.ReadFile(path)
		tree[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// memServer is a server whose out dir fuzzOut, or whose repository
// fuzzRepo (its .runner), is tree, and that finds no git repository
// anywhere (an input may name any directory as a build's repository).
func memServer(t testing.TB, tree fstest.MapFS, loops bool) *Server {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
	o := Options{Outs: []string{fuzzOut}, Now: func() time.Time { return now }, Environ: []string{"PATH=/usr/bin"},
		FS: func(dir string) (fs.FS, error) {
			if dir == fuzzOut && !loops || dir == filepath.Join(fuzzRepo, loop.RunnerDir) && loops {
				return tree, nil
			}
			return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
		},
		Git: func(context.Context, string) (*gitws.Repo, error) {
			return nil, errors.New("no git repository in a fuzz test")
		},
	}
	if loops {
		o.Outs, o.Repos = nil, []string{fuzzRepo}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// put writes data as the file name of tree.
func put(tree fstest.MapFS, name string, data []byte) {
	tree[name] = &fstest.MapFile{Data: data, Mode: 0o644}
}

// servePages answers pages from a fresh server over tree (see memServer),
// rounds times (see serveRounds).
func servePages(t testing.TB, tree fstest.MapFS, loops bool, pages []string, rounds int) map[string]string {
	t.Helper()
	s := memServer(t, tree, loops)
	defer s.Close()
	return serveRounds(t, s.Handler(), pages, rounds)
}

// serveAll answers pages through h, twice: the second time from the
// server's caches, which must give the same.
func serveAll(t testing.TB, h http.Handler, pages []string) map[string]string {
	t.Helper()
	return serveRounds(t, h, pages, 2)
}

// serveRounds answers pages through h rounds times: after the first, from
// the server's caches, which must give the same.
func serveRounds(t testing.TB, h http.Handler, pages []string, rounds int) map[string]string {
	t.Helper()
	got := map[string]string{}
	for round := 0; round < rounds; round++ {
		for _, p := range pages {
			req, err := http.NewRequest("GET", "http://127.0.0.1:8080"+p, nil) // not httptest's, which parses a request line
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", p, rec.Code, rec.Body.Bytes())
			}
			body := rec.Body.String()
			if round > 0 && body != got[p] {
				t.Fatalf("%s differs when served again:\n%s\nthen\n%s", p, got[p], body)
			}
			got[p] = body
		}
	}
	return got
}

// checkPages: the API answers JSON; a page holds no <script but the
// layout's own.
func checkPages(t testing.TB, pages map[string]string) {
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
// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzBuildPage(f *testing.F) {
	dir := f.TempDir()
	fixtureBuild(f, dir, fuzzHash, true)
	fixture := memTree(f, dir) // an input's tree: the fixture, its files from the input put over it
	// Seeds are the fixture's files in short: an input that finds new code
	// is minimized before fuzzing goes on, in time that grows with the
	// square of its length (the fixture's, a few kilobytes, took all of a
	// run).
	events := []byte(`{"event":"build_start","plan_hash":"` + fuzzHash + `","ts":"2026-01-02T03:04:00Z"}` + "\n" + `{"event":"wo_start","wo":"WO-01"}` + "\n" +
		`{"event":"node","wo":"WO-01","attempt":1,"node":"se","tokens":5,"duration_ms":2}` + "\n" + `{"event":"wo_end","wo":"WO-01","verdict":"FAIL"}` + "\n" +
		`{"event":"build_end","verdict":"FAIL"}` + "\n")
	summary := []byte(`{"verdict":"FAIL","failed":"WO-01","work_orders":[{"id":"WO-01","outcome":"failed","attempts":1}]}`)
	runSum := []byte(`{"verdict":"FAIL","attempts":[{"attempt_index":1,"failure_brief":{"stage":"acceptance_failed"}}]}`)
	reply := []byte("Here <script>x</script>")
	prop := []byte(`{"writes":[{"path":"calc.py","content":"x\n"}]}`)
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

	fx := newBuildFixture(fixture)
	f.Fuzz(func(t *testing.T, events, summary, runSum, reply, prop []byte, damage bool) {
		fx.check(t, events, summary, runSum, reply, prop, damage)
	})
}

// buildFixture is what FuzzBuildPage puts its inputs over: the fixture's
// tree, and the damage put before the events (an unreadable line, then one
// over the 1 MiB bound), made once: an input's events are appended to it
// in place, one input at a time.
type buildFixture struct {
	tree   fstest.MapFS
	damage []byte // the damage, with room for an input's events after it
	long   int    // the length of the over-long line, newline included
}

func newBuildFixture(tree fstest.MapFS) *buildFixture {
	fx := &buildFixture{tree: tree, long: maxEventLine + 2}
	fx.damage = make([]byte, 0, len("not json\n")+fx.long+64<<10)
	fx.damage = append(fx.damage, "not json\n"...)
	fx.damage = append(fx.damage, bytes.Repeat([]byte("x"), fx.long-1)...)
	fx.damage = append(fx.damage, '\n')
	return fx
}

// check is FuzzBuildPage's check of one input.
func (fx *buildFixture) check(t testing.TB, events, summary, runSum, reply, prop []byte, damage bool) {
	tree := maps.Clone(fx.tree)
	files := map[string][]byte{"events.jsonl": events, "build_summary.json": summary, "WO-01/r1/run_summary.json": runSum,
		"WO-01/r1/attempt_1/llm_response_raw.txt": reply, "WO-01/r1/attempt_1/proposed_writes.json": prop}
	for name, data := range files {
		put(tree, "builds/"+fuzzHash+"/"+name, data)
	}
	pages := servePages(t, tree, false, fuzzPages, 2)
	if again := servePages(t, tree, false, fuzzPages, 1); !maps.Equal(pages, again) { // the caches served the same above
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
	fx.damage = append(fx.damage[:len("not json\n")+fx.long], events...)
	put(tree, "builds/"+fuzzHash+"/events.jsonl", fx.damage)
	var damaged BuildView
	// The pages that read the events, not the attempt's.
	damagedPages := servePages(t, tree, false, []string{"/", "/builds/0/" + fuzzHash, "/api/builds/0/" + fuzzHash}, 2)
	checkPages(t, damagedPages)
	if err := json.Unmarshal([]byte(damagedPages["/api/builds/0/"+fuzzHash]), &damaged); err != nil {
		t.Fatal(err)
	}
	if damaged.EventsSkipped != view.EventsSkipped+2 {
		t.Fatalf("two damaged lines more gave %d skipped lines, not %d+2", damaged.EventsSkipped, view.EventsSkipped)
	}
	if damaged.EventsFrom != view.EventsFrom+int64(len("not json\n")+fx.long) {
		t.Fatalf("events offset %d, want %d + the damaged lines", damaged.EventsFrom, view.EventsFrom)
	}
	damaged.EventsSkipped, damaged.EventsFrom = view.EventsSkipped, view.EventsFrom
	a, _ := json.Marshal(view)
	b, _ := json.Marshal(damaged)
	if !bytes.Equal(a, b) {
		t.Fatalf("damaged lines before the events changed the view:\n%s\nthen\n%s", a, b)
	}
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
// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzLoopPage(f *testing.F) {
	repo := f.TempDir()
	fixtureLoop(f, repo)
	fixture := memTree(f, filepath.Join(repo, loop.RunnerDir)) // an input's .runner: the fixture, its files from the input put over it
	files := []string{"iterations/t1/events.jsonl", "run.json", "tree.json", "iterations/t1/1/meta.json", "iterations/t1/1/executor.log", "iterations/t1/1/diff.patch"}
	// Seeds are the fixture's files in short (see FuzzBuildPage).
	real := [][]byte{
		[]byte(`{"time":"2026-01-02T03:04:00Z","run_id":"t1","event":"run_started"}` + "\n" + `{"run_id":"t1","iteration":1,"event":"iteration_committed","node":"a"}` + "\n" +
			`{"run_id":"t1","iteration":2,"event":"iteration_started","node":"b"}` + "\n"),
		[]byte(`{"run_id":"t1","branch":"loop/t1","iteration":1}`),
		[]byte(`{"id":"r","order":0,"title":"r","goal":"g","acceptance":[],"passes":false,"attempts":0,"max_attempts":1,"children":[` +
			`{"id":"a","order":0,"title":"a","goal":"g","acceptance":["true"],"passes":true,"attempts":0,"max_attempts":1,"children":[]},` +
			`{"id":"b","order":1,"title":"<script>","goal":"g","acceptance":["true"],"passes":false,"attempts":0,"max_attempts":1,"children":[]}]}`),
		[]byte(`{"run_id":"t1","iteration":1,"mode":"IMPLEMENT","node":"a","guard":"PASS","guard_exit_code":0,"changed_paths":["a.py"]}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"<script>"}]}}` + "\n"),
		[]byte("diff --git a/a.py b/a.py\n--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+x\n"),
	}
	if _, err := tree.Decode(real[2]); err != nil {
		f.Fatalf("the seed's tree: %v", err)
	}
	half := func(b []byte) []byte { return b[:len(b)/2] }
	f.Add(real[0], real[1], real[2], real[3], real[4], real[5])
	f.Add(half(real[0]), half(real[1]), half(real[2]), half(real[3]), half(real[4]), half(real[5]))
	f.Add(append(bytes.Clone(real[0]), "\n{\nnull\n"...), []byte(`{"run_id":"t2"}`), []byte(`{}`), []byte(`null`), []byte("{\"type\":\"result\",\"result\":\"<script>\"}\n"),
		[]byte("diff --git a/<script> b/<script>\n+++ b/x\n@@ -1 +1 @@\n-<script>\n+</pre><script>alert(1)</script>\n"))
	f.Add([]byte(`{"time":"x","event":"complete"}`+"\n"), []byte(`{"run_id":"t1","iteration":-1}`), bytes.Replace(real[2], []byte(`"passes":false`), []byte(`"passes":true`), -1),
		[]byte(`{"guard":"<ScRiPt>","iteration":"1"}`), []byte("\xff\xfe<script"), []byte("@@ -0,0 +1 @@\n+\x00\n"))
	f.Fuzz(func(t *testing.T, events, runState, treeJSON, meta, executorLog, patch []byte) {
		checkLoopPage(t, fixture, files, events, runState, treeJSON, meta, executorLog, patch)
	})
}

// checkLoopPage is FuzzLoopPage's check of one input, over the fixture
// .runner; files are where the inputs go.
func checkLoopPage(t testing.TB, fixture fstest.MapFS, files []string, events, runState, treeJSON, meta, executorLog, patch []byte) {
	pages := []string{"/", "/loops/0/t1", "/loops/0/t1/1", "/api/index", "/api/loops/0/t1", "/api/loops/0/t1/1"}
	runner := maps.Clone(fixture)
	for i, data := range [][]byte{events, runState, treeJSON, meta, executorLog, patch} {
		put(runner, files[i], data)
	}
	got := servePages(t, runner, true, pages, 2)
	if again := servePages(t, runner, true, pages, 1); !maps.Equal(got, again) { // the caches served the same above
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
}

// TestMemoryServesAsDisk: the fuzz targets' servers, over the fixtures read
// into memory with no git, serve what a server over the directories
// serves, page for page.
func TestMemoryServesAsDisk(t *testing.T) {
	out, repo := t.TempDir(), t.TempDir()
	fixtureBuild(t, out, fuzzHash, true)
	fixtureRepairs(t, out)
	fixtureLoop(t, repo)
	buildPages := slices.Concat(fuzzPages, []string{"/builds/0/" + repairHash, "/api/builds/0/" + repairHash})
	loopPages := []string{"/", "/loops/0/t1", "/loops/0/t1/1", "/api/index", "/api/loops/0/t1", "/api/loops/0/t1/1"}
	for _, c := range []struct {
		name  string
		o     Options
		tree  fstest.MapFS
		loops bool
		pages []string
		dir   string
	}{
		{"build", Options{Outs: []string{out}}, memTree(t, out), false, buildPages, out},
		{"loop", Options{Repos: []string{repo}}, memTree(t, filepath.Join(repo, loop.RunnerDir)), true, loopPages, repo},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
			c.o.Now, c.o.Environ = func() time.Time { return now }, []string{"PATH=/usr/bin"}
			s, err := New(c.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			disk := serveAll(t, s.Handler(), c.pages)
			mem := servePages(t, c.tree, c.loops, c.pages, 2)
			for _, p := range c.pages {
				want := disk[p]
				if c.loops { // the loop pages name the repository
					want = strings.ReplaceAll(want, c.dir, fuzzRepo)
				}
				if mem[p] != want {
					t.Errorf("%s from memory:\n%s\nfrom disk:\n%s", p, mem[p], want)
				}
			}
		})
	}
}

// TestLoopTreeDecodedOnce: a loop's tree.json is decoded (and checked
// against the schema) once for the same bytes, and again when they
// change.
func TestLoopTreeDecodedOnce(t *testing.T) {
	repo := t.TempDir()
	fixtureLoop(t, repo)
	runner := memTree(t, filepath.Join(repo, loop.RunnerDir))
	s := memServer(t, runner, true)
	defer s.Close()
	first, again := s.st.loopState(0, "t1"), s.st.loopState(0, "t1")
	if first.Tree == nil || first.Tree != again.Tree {
		t.Fatalf("the same tree.json decoded twice: %p, %p (%s)", first.Tree, again.Tree, first.TreeErr)
	}
	n, err := tree.Decode(runner["tree.json"].Data)
	if err != nil {
		t.Fatal(err)
	}
	n.Children[0].Passes = false
	put(runner, "tree.json", tree.Canonical(n))
	if changed := s.st.loopState(0, "t1"); changed.Tree == first.Tree || changed.Tree.Children[0].Passes {
		t.Fatal("a changed tree.json was not read again")
	}
	put(runner, "tree.json", []byte("{"))
	if damaged := s.st.loopState(0, "t1"); damaged.Tree != nil || damaged.TreeErr == "" {
		t.Fatalf("a damaged tree.json: %+v", damaged)
	}
}
