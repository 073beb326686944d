package serve

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/factory-harness/factory/internal/factory"
)

// FuzzAttemptArtifacts writes an attempt's write_result.json,
// verify_result.json, acceptance_result.json and failure_brief.json from
// the input (the rest as a finished build leaves it, with its
// run_summary.json holding no record of the attempt, a failed one or a
// passed one) and serves the attempt page, HTML and JSON, through the real
// handler. Properties: 200, the same again (caches) and from a second
// server, no <script but the layout's; a file that does not decode is named
// on the page ("Partial view: NAME could not be read") and shows nothing of
// itself, a file that decodes is not named and is shown as it reads:
// written back by the API, each value reads the same (the commands are the
// files' or, with neither file readable, the record's); the verdict is the
// record's, and without one never PASS: FAIL for a readable brief, unknown
// when a file is damaged, else running; a command's log link is under the
// run directory or absent.
// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzAttemptArtifacts(f *testing.F) {
	exit1 := 1
	cmd := "python3 -c 'import calc'"
	// Short seeds (see FuzzBuildPage): compact JSON, short values.
	real := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	wr := real(factory.WriteResult{WriteOK: true, TouchedFiles: []string{"calc.py"}, Errors: []string{},
		Files: []factory.WrittenFile{{Path: "calc.py", Created: true, SHA256Before: "", SHA256After: "2c26b4", Bytes: 42}}})
	verify := real([]factory.CmdResult{{Command: []string{"python", "-m", "compileall", "-q", "."}, StdoutPath: "attempt_1/logs/verify_1.stdout.txt", StderrPath: "attempt_1/logs/verify_1.stderr.txt", DurationSeconds: 0.2}})
	accept := real([]factory.CmdResult{{Command: []string{"python3", "-c", "import calc"}, ExitCode: 1, StderrTrunc: "Traceback <script>", StdoutPath: "attempt_1/logs/acceptance_1.stdout.txt", StderrPath: "attempt_1/logs/acceptance_1.stderr.txt", DurationSeconds: 0.5}})
	brief := real(factory.FailureBrief{Stage: "acceptance_failed", Command: &cmd, ExitCode: &exit1, PrimaryErrorExcerpt: "Traceback", ConstraintsReminder: "x"})
	for mode := uint8(0); mode < 3; mode++ {
		f.Add(wr, verify, accept, brief, mode)
	}
	f.Add(wr[:len(wr)/2], verify[:len(verify)-2], accept, brief[:3], uint8(0))
	f.Add([]byte(`{"write_ok":"yes"}`), []byte(`[{"exit_code":0,"command":["true"]},{"exit_code":"1"}]`), []byte(`[]`), []byte(`{"stage":5}`), uint8(0)) // half-decoded commands
	f.Add([]byte(`null`), []byte(`null`), []byte(`[{"exit_code":0,"stdout_path":"../../../etc/passwd","stderr_path":"/etc/shadow"}]`), []byte(`null`), uint8(1))
	f.Add([]byte(`{}`), []byte(`[{"command":["a"],"exit_code":0}]`), []byte(`{"exit_code":0}`), []byte(`{"stage":""}`), uint8(2))
	f.Add([]byte(""), []byte("\xff"), []byte(`[{"exit_code":1e400}]`), []byte(`{"exit_code":"0"}`), uint8(0))

	dir := f.TempDir()
	fixtureBuild(f, dir, fuzzHash, true)
	fx := attemptFixture{tree: memTree(f, dir)} // an input's tree: the fixture, its files from the input put over it
	fx.recordFailed = fx.tree[attemptRun+"run_summary.json"].Data
	fx.passed = factory.AttemptRecord{AttemptIndex: 1, WriteOK: true, Verify: []factory.CmdResult{{Command: []string{"true"}}}, Acceptance: []factory.CmdResult{{Command: []string{"python3", "-c", "import calc"}, StderrPath: "attempt_1/logs/acceptance_1.stderr.txt"}}}
	fx.recordPassed = real(factory.RunSummary{RunID: "r1", WorkOrderID: "WO-01", Verdict: "PASS", TotalAttempts: 1, MaxAttempts: 1, Attempts: []factory.AttemptRecord{fx.passed}})
	f.Fuzz(func(t *testing.T, wr, verify, accept, brief []byte, mode uint8) {
		fx.check(t, wr, verify, accept, brief, mode)
	})
}

// attemptRun is the fixture's run directory FuzzAttemptArtifacts writes in.
const attemptRun = "builds/" + fuzzHash + "/WO-01/r1/"

// attemptFixture is what FuzzAttemptArtifacts puts its inputs over: the
// fixture's tree, and the run summaries of modes 1 (the fixture's, a
// failed attempt) and 2 (a passed attempt, passed).
type attemptFixture struct {
	tree                       fstest.MapFS
	recordFailed, recordPassed []byte
	passed                     factory.AttemptRecord
}

// check is FuzzAttemptArtifacts' check of one input.
func (fx *attemptFixture) check(t testing.TB, wr, verify, accept, brief []byte, mode uint8) {
	page := "/builds/0/" + fuzzHash + "/WO-01/r1/1"
	pages := []string{page, "/api" + page}
	tree := maps.Clone(fx.tree)
	var record *factory.AttemptRecord
	switch mode % 3 {
	case 0:
		delete(tree, attemptRun+"run_summary.json")
	case 1:
		put(tree, attemptRun+"run_summary.json", fx.recordFailed)
		var sum factory.RunSummary
		if err := json.Unmarshal(fx.recordFailed, &sum); err != nil {
			t.Fatal(err)
		}
		record = &sum.Attempts[0]
	case 2:
		put(tree, attemptRun+"run_summary.json", fx.recordPassed)
		passed := fx.passed
		record = &passed
	}
	files := map[string][]byte{"write_result.json": wr, "verify_result.json": verify, "acceptance_result.json": accept, "failure_brief.json": brief}
	for name, data := range files {
		put(tree, attemptRun+"attempt_1/"+name, data)
	}
	got := servePages(t, tree, false, pages, 2)
	if again := servePages(t, tree, false, pages, 1); !maps.Equal(got, again) { // the caches served the same above
		t.Fatal("a second server serves other pages")
	}
	checkPages(t, got)
	var view AttemptView
	if err := json.Unmarshal([]byte(got["/api"+page]), &view); err != nil {
		t.Fatal(err)
	}

	// Each file as it reads on its own.
	var w factory.WriteResult
	var v, a []factory.CmdResult
	var b factory.FailureBrief
	ok := map[string]bool{}
	for name, x := range map[string]any{"write_result.json": &w, "verify_result.json": &v, "acceptance_result.json": &a, "failure_brief.json": &b} {
		ok[name] = json.Unmarshal(files[name], x) == nil
		named := strings.Contains(got[page], "Partial view: "+name+" could not be read")
		listed := false
		for _, d := range view.Damaged {
			listed = listed || strings.HasPrefix(d, name+" ")
		}
		if ok[name] == named || named != listed {
			t.Fatalf("%s decodes: %v; named on the page: %v; listed as damaged: %v (%q)", name, ok[name], named, listed, view.Damaged)
		}
	}
	same := func(what string, got, want any) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Fatalf("%s shown as\n%s\nwant\n%s", what, g, w)
		}
	}
	var wantW *factory.WriteResult
	if ok["write_result.json"] {
		wantW = &w
	}
	same("write_result.json", view.Write, wantW)
	if !ok["verify_result.json"] {
		v = nil
	}
	if !ok["acceptance_result.json"] {
		a = nil
	}
	if record != nil && v == nil && a == nil {
		v, a = record.Verify, record.Acceptance
	}
	var wantCmds, gotCmds []string
	for _, c := range v {
		wantCmds = append(wantCmds, "verify "+jsonString(t, c))
	}
	for _, c := range a {
		wantCmds = append(wantCmds, "acceptance "+jsonString(t, c))
	}
	for _, c := range view.Commands {
		gotCmds = append(gotCmds, c.Kind+" "+jsonString(t, c.Res))
		for _, link := range []string{c.Out, c.Err} {
			if link != "" && (!strings.HasPrefix(link, view.Files+"/") || !safeRel(strings.TrimPrefix(link, view.Files+"/"))) {
				t.Fatalf("a log link %q outside the run directory %s", link, view.Files)
			}
		}
	}
	same("the commands", gotCmds, wantCmds)
	var wantB *factory.FailureBrief
	switch {
	case ok["failure_brief.json"]:
		wantB = &b
	case record != nil:
		wantB = record.FailureBrief
	}
	same("failure_brief.json", view.Brief, wantB)

	damaged := len(view.Damaged) > 0
	want := "running"
	switch {
	case record != nil && record.FailureBrief == nil:
		want = "PASS"
	case wantB != nil:
		want = "FAIL"
	case damaged:
		want = "unknown"
	}
	if view.Verdict != want {
		t.Fatalf("verdict %s, want %s (record %v, damaged %q)", view.Verdict, want, record != nil, view.Damaged)
	}
	if record == nil && view.Verdict == "PASS" {
		t.Fatal("PASS without a record")
	}
}

func jsonString(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
