package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/factory"
)

// fixtureDeps turns the fixture build's WO-01 attempt 1 into one that
// failed at the dependency step: npm ran (one request refused, a project
// .npmrc line ignored), go was skipped; deps.jsonl holds an allowed and a
// refused request, lines that are not requests and a last line cut off;
// the package manager's log is there.
func fixtureDeps(t testing.TB, out, hash string) {
	t.Helper()
	run := filepath.Join(out, "builds", hash, "WO-01", "r1")
	cmd := "npm ci --ignore-scripts"
	brief := factory.FailureBrief{Stage: factory.StageDepsFailed, Command: &cmd,
		PrimaryErrorExcerpt: "npm dependencies: " + cmd + ": 403 Forbidden " + xssImg, ConstraintsReminder: "x"}
	rep := &deps.Report{Outcomes: []deps.Outcome{
		{Ecosystem: deps.Go, Skipped: true, DurationMS: 3, Packages: -1},
		{Ecosystem: deps.NPM, DurationMS: 2500, Packages: 42, Bytes: 3 << 20, Requests: 3, Refused: 1, Lockfiles: []string{"package-lock.json"},
			Ignored: []string{".npmrc: registry=https://evil.example/ " + xssScript}, Error: "npm ERR! 403 " + xssScript},
	}}
	sum := factory.RunSummary{RunID: "r1", WorkOrderID: "WO-01", Verdict: factory.VerdictFail, TotalAttempts: 1, MaxAttempts: 1,
		Attempts: []factory.AttemptRecord{{AttemptIndex: 1, WriteOK: true, FailureBrief: &brief, Deps: rep}}}
	write(t, filepath.Join(run, "run_summary.json"), jsonLine(t, sum))
	write(t, filepath.Join(run, "attempt_1", "failure_brief.json"), jsonLine(t, brief))
	write(t, filepath.Join(run, "attempt_1", "deps.jsonl"),
		jsonLine(t, deps.Request{Method: "GET", URL: "https://registry.npmjs.org/left-pad", Status: 200, Bytes: 1234,
			SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", Decision: deps.Allowed})+
			"{not json\n"+
			`{"method":"GET","status":"200"}`+"\n"+
			jsonLine(t, deps.Request{Method: "GET", URL: "https://evil.example/x.tgz?" + xssScript, Status: 403, Decision: deps.Refused,
				Reason: "host evil.example is not the registry's " + xssImg})+
			`{"method":"GET","url":"https://registry.npmjs.org/b","status":200,"by`)
	write(t, filepath.Join(run, "attempt_1", "logs", "deps_npm_1.txt"), "npm ERR! 403 "+xssScript+"\n")
	write(t, filepath.Join(run, "attempt_1", "logs", "deps_..txt"), "not a log of the step\n")
}

func TestAttemptShowsDependencyStep(t *testing.T) {
	const hash = "aaaa000000000001"
	out := t.TempDir()
	fixtureBuild(t, out, hash, true)
	fixtureDeps(t, out, hash)
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	page := "/builds/0/" + hash + "/WO-01/r1/1"
	code, body, _ := get(t, ts.URL+page)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for _, bad := range []string{xssScript, xssImg, "<img src=x"} {
		if strings.Contains(body, bad) {
			t.Errorf("the attempt page holds %q", bad)
		}
	}
	files := "/files/out/0/builds/" + hash + "/WO-01/r1/attempt_1/"
	for _, want := range []string{
		"deps_failed", `see <a href="#p-builds-0-` + hash + `-WO-01-r1-1-deps">the dependency step</a>`, `<h2 id="p-builds-0-` + hash + `-WO-01-r1-1-deps">Dependencies</h2>`,
		">go</span> skipped: what is installed matches the manifests and lockfiles (3 ms)",
		">npm</span> ran 2.5 s · 42 packages · 3.0 MiB fetched · 3 requests · <strong class=\"refused\">1 refused</strong> · lockfiles <code>package-lock.json</code>",
		"npm ERR! 403 &lt;script&gt;", "project settings ignored", "<code>.npmrc: registry=https://evil.example/ &lt;script&gt;",
		`<a href="` + files + `logs/deps_npm_1.txt"><code>attempt_1/logs/deps_npm_1.txt</code></a>`,
		`<a href="` + files + `deps.jsonl">deps.jsonl</a>`,
		"2 requests, <strong class=\"refused\">1 refused</strong>, 1.2 KiB received",
		"3 of 5 lines of deps.jsonl could not be read: shown as unreadable",
		`<tr class="allowed"><td>1</td><td>GET</td><td class="path">https://registry.npmjs.org/left-pad</td><td>200</td><td>1234</td><td><code title="2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae">2c26b46b68ff…</code></td><td>allowed</td><td></td></tr>`,
		`<tr class="unreadable"><td>2</td><td colspan="7"><em>unreadable line: invalid character`,
		`<tr class="unreadable"><td>3</td><td colspan="7"><em>unreadable line: json: cannot unmarshal string`,
		`<tr class="refused"><td>4</td><td>GET</td><td class="path">https://evil.example/x.tgz?&lt;script&gt;`,
		`<td><strong>refused</strong></td><td>host evil.example is not the registry&#39;s &lt;img src=x`,
		`<tr class="unreadable"><td>5</td><td colspan="7"><em>unreadable line: incomplete: no end of line`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the attempt page lacks %q", want)
		}
	}
	if strings.Contains(body, "deps_..txt") {
		t.Error("a file not named like a log of the step is linked")
	}
	var v AttemptView
	_, api, _ := get(t, ts.URL+"/api"+page)
	if err := json.Unmarshal([]byte(api), &v); err != nil {
		t.Fatal(err)
	}
	d := v.Deps
	if d == nil || d.Record != depsRecorded || !d.Ran || len(d.Ecosystems) != 2 || d.Log == nil || d.Log.Requests != 2 || d.Log.Refused != 1 || d.Log.Unreadable != 3 ||
		d.Log.Lines != 5 || d.Log.Bytes != 1234 || len(d.Log.Rows) != 5 || len(d.Logs) != 1 || v.Verdict != "FAIL" || len(v.Damaged) != 0 {
		t.Errorf("the API's attempt: %s", api)
	}

	// The build page names the stage like any other.
	_, build, _ := get(t, ts.URL+"/builds/0/"+hash)
	if !strings.Contains(build, "attempt 1 failed at deps_failed</strong> — <code>npm ci --ignore-scripts</code>") {
		t.Errorf("the build page does not name the deps_failed brief:\n%s", build)
	}

	// A report shows the same, with no link out of the file.
	var buf strings.Builder
	if err := Report(t.Context(), &buf, ReportOptions{Out: out, Build: hash}); err != nil {
		t.Fatal(err)
	}
	rep := buf.String()
	for _, want := range []string{"deps_failed", "<code>attempt_1/logs/deps_npm_1.txt</code>", `<tr class="refused"><td>4</td>`,
		`see <a href="#p-builds-0-` + hash + `-WO-01-r1-1-deps">`, `id="p-builds-0-` + hash + `-WO-01-r1-1-deps"`} {
		if !strings.Contains(rep, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, bad := range []string{"/files/", xssScript, "<img src=x"} {
		if strings.Contains(rep, bad) {
			t.Errorf("the report holds %q", bad)
		}
	}
}

func TestAttemptWithoutDependencyStep(t *testing.T) {
	const hash = "aaaa000000000001"
	out := t.TempDir()
	fixtureBuild(t, out, hash, true) // a record whose deps is absent: nothing installed
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	_, body, _ := get(t, ts.URL+"/builds/0/"+hash+"/WO-01/r1/1")
	if !strings.Contains(body, "Nothing installed: no manifest of a known ecosystem") || strings.Contains(body, "Gateway requests") || strings.Contains(body, "the dependency step</a>") {
		t.Errorf("an attempt without the step:\n%s", body)
	}
	// No record yet and no log: no section at all.
	if err := os.Remove(filepath.Join(out, "builds", hash, "WO-01", "r1", "run_summary.json")); err != nil {
		t.Fatal(err)
	}
	if _, body, _ = get(t, ts.URL+"/builds/0/"+hash+"/WO-01/r1/1"); strings.Contains(body, "Dependencies</h2>") {
		t.Errorf("a running attempt with no trace of the step shows a section")
	}
	// No record yet, a log: the log, and where the report will be.
	write(t, filepath.Join(out, "builds", hash, "WO-01", "r1", "attempt_1", "deps.jsonl"), jsonLine(t, deps.Request{Method: "HEAD", URL: "https://proxy.golang.org/x", Status: 200, Decision: deps.Allowed}))
	if _, body, _ = get(t, ts.URL+"/builds/0/"+hash+"/WO-01/r1/1"); !strings.Contains(body, "written to run_summary.json when the run ends") ||
		!strings.Contains(body, "1 requests, none refused, 0 B received") {
		t.Errorf("a running attempt's log:\n%s", body)
	}
	// A summary that cannot be read, or that does not name the attempt.
	for summary, want := range map[string]string{"{": "The step's report is not known: run_summary.json could not be read.",
		`{"attempts":[]}`: "run_summary.json holds no record of this attempt"} {
		write(t, filepath.Join(out, "builds", hash, "WO-01", "r1", "run_summary.json"), summary)
		if _, body, _ = get(t, ts.URL+"/builds/0/"+hash+"/WO-01/r1/1"); !strings.Contains(body, want) || !strings.Contains(body, "1 requests, none refused") {
			t.Errorf("with run_summary.json %s, the page lacks %q:\n%s", summary, want, body)
		}
	}
}

// TestDepsLogBounds: the rows shown are bounded (allowed ones, and refused
// or unreadable ones, each up to the bound; the rest counted), strings are
// cut, a line over the line bound is unreadable and counted, and a log
// over maxDepsLogBytes is read up to it.
func TestDepsLogBounds(t *testing.T) {
	var b bytes.Buffer
	long := strings.Repeat("é", maxDepsField+10)
	for i := 0; i < 15; i++ {
		b.WriteString(jsonLine(t, deps.Request{Method: "GET", URL: fmt.Sprintf("https://r/%d/%s", i, long), Status: 200, Bytes: 1 << 62, Decision: deps.Allowed}))
	}
	for i := 0; i < 12; i++ {
		b.WriteString(jsonLine(t, deps.Request{Method: "GET", URL: "https://evil/", Status: 403, Decision: deps.Refused, Reason: long}))
	}
	b.WriteString("{\"method\":\"" + strings.Repeat("x", maxEventLine) + "\"}\n")
	b.WriteString(jsonLine(t, deps.Request{Method: "PUT", Decision: "maybe"}))
	l := readDepsLog(bytes.NewReader(b.Bytes()), int64(b.Len()), 10)
	if l.Lines != 29 || l.Requests != 28 || l.Refused != 12 || l.Unreadable != 1 || l.Hidden != 5+4 || len(l.Rows) != 20 {
		t.Fatalf("lines %d requests %d refused %d unreadable %d hidden %d rows %d", l.Lines, l.Requests, l.Refused, l.Unreadable, l.Hidden, len(l.Rows))
	}
	if l.Bytes != 1<<63-1 {
		t.Errorf("bytes %d: the sum should stop at the largest int64", l.Bytes)
	}
	allowed, other := 0, 0
	for i, r := range l.Rows {
		if i > 0 && r.Line <= l.Rows[i-1].Line {
			t.Errorf("rows out of order: %d after %d", r.Line, l.Rows[i-1].Line)
		}
		if len([]rune(r.URL)) > maxDepsField+1 || len([]rune(r.Reason)) > maxDepsField+1 {
			t.Errorf("row %d not cut: %d, %d runes", r.Line, len([]rune(r.URL)), len([]rune(r.Reason)))
		}
		if r.Flagged() || r.Unreadable != "" {
			other++
		} else {
			allowed++
		}
	}
	if allowed != 10 || other != 10 || l.Rows[9].Line != 10 || l.Rows[10].Line != 16 {
		t.Errorf("%d allowed and %d other rows shown; rows 10, 11 are lines %d, %d", allowed, other, l.Rows[9].Line, l.Rows[10].Line)
	}

	// Over the read bound: the lines before it, and a note.
	line := jsonLine(t, deps.Request{Method: "GET", URL: "https://r/" + strings.Repeat("a", 1000), Status: 200, Decision: deps.Allowed})
	big := bytes.Repeat([]byte(line), maxDepsLogBytes/len(line)+100)
	l = readDepsLog(bytes.NewReader(big), int64(len(big)), 10)
	if !l.Cut || l.Lines != maxDepsLogBytes/len(line) || l.Unreadable != 0 || l.Size != int64(len(big)) {
		t.Errorf("a log over the bound: cut %v, %d lines (want %d), %d unreadable", l.Cut, l.Lines, maxDepsLogBytes/len(line), l.Unreadable)
	}
}

func TestActivityNamesTheDependencyCommand(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", false)
	logs := filepath.Join(out, "builds", "aaaa000000000001", "WO-01", "r1", "attempt_1", "logs")
	write(t, filepath.Join(logs, "verify_1.stdout.txt"), "")
	write(t, filepath.Join(logs, "deps_npm_1.txt"), "")
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(logs, "verify_1.stdout.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	src := &source{dir: out}
	defer src.close()
	if got := runningLog(src, "aaaa000000000001", "WO-01", 1); got != "deps_npm_1" {
		t.Errorf("running log %q, want deps_npm_1", got)
	}
}
