package serve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
)

// The payloads a hostile model reply may carry.
const (
	xssScript = `<script>document.title="pwned"</script>`
	xssImg    = `<img src=x onerror="document.title='pwned'">`
	xssLink   = `<a href="javascript:alert(1)">click</a>`
	fakeKey   = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
)

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func jsonLine(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// fixtureBuild writes a finished build with one failed work order whose
// reply and logs carry hostile payloads and a key, into out/builds/hash.
func fixtureBuild(t testing.TB, out, hash string, ended bool) {
	t.Helper()
	dir := filepath.Join(out, "builds", hash)
	ts := func(s int) string { return time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC).Format(time.RFC3339Nano) }
	ev := jsonLine(t, map[string]any{"event": "build_start", "plan_hash": hash, "branch": "factory/" + hash, "ts": ts(0)}) +
		jsonLine(t, map[string]any{"event": "plan", "source": "given", "work_orders": 1, "ts": ts(1)}) +
		jsonLine(t, map[string]any{"event": "wo_start", "wo": "WO-01", "ts": ts(2)}) +
		jsonLine(t, map[string]any{"event": "node", "wo": "WO-01", "attempt": 1, "node": "se", "tokens": 50, "duration_ms": 20, "ts": ts(3)}) +
		jsonLine(t, map[string]any{"event": "node", "wo": "WO-01", "attempt": 1, "node": "tr", "duration_ms": 5, "ts": ts(4)}) +
		jsonLine(t, map[string]any{"event": "node", "wo": "WO-01", "attempt": 1, "node": "po", "duration_ms": 700, "ts": ts(5)}) +
		jsonLine(t, map[string]any{"event": "node", "wo": "WO-01", "attempt": 1, "node": "finalize", "verdict": "FAIL", "stage": "acceptance_failed", "duration_ms": 3, "ts": ts(6)})
	if ended {
		ev += jsonLine(t, map[string]any{"event": "wo_end", "wo": "WO-01", "verdict": "FAIL", "stage": "acceptance_failed", "ts": ts(7)}) +
			jsonLine(t, map[string]any{"event": "build_end", "verdict": "FAIL", "ts": ts(8)})
		write(t, filepath.Join(dir, "build_summary.json"), jsonLine(t, map[string]any{"verdict": "FAIL", "plan_hash": hash, "branch": "factory/" + hash,
			"repo": filepath.Join(out, "no-such-repo"), "tokens": 50, "cost_usd": nil, "failed": "WO-01",
			"work_orders": []any{map[string]any{"id": "WO-01", "title": "Add " + xssScript, "outcome": "failed", "stage": "acceptance_failed", "attempts": 1}}}))
	}
	write(t, filepath.Join(dir, "events.jsonl"), ev)
	run := filepath.Join(dir, "WO-01", "r1")
	write(t, filepath.Join(run, "work_order.json"), jsonLine(t, map[string]any{"id": "WO-01", "title": "Add " + xssScript, "intent": "intent " + xssImg,
		"allowed_files": []string{"calc.py"}, "forbidden": []string{}, "acceptance_commands": []string{"python3 -c 'import calc'"}, "context_files": []string{}}))
	reply := "Here you go " + xssScript + xssImg + xssLink + " key " + fakeKey
	write(t, filepath.Join(run, "attempt_1", "llm_response_raw.txt"), reply)
	write(t, filepath.Join(run, "attempt_1", "se_prompt.txt"), "prompt with OPENAI key sk-proj-ABCDEFGHIJKLMNOPQRSTUV and env secret hunter2hunter2\n")
	write(t, filepath.Join(run, "attempt_1", "proposed_writes.json"), jsonLine(t, map[string]any{"summary": "sum " + xssImg,
		"writes": []any{map[string]any{"path": "calc.py", "base_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "content": "print('" + xssScript + "')\n"}}}))
	write(t, filepath.Join(run, "attempt_1", "logs", "acceptance_1.stderr.txt"), "Traceback "+xssScript+"\n")
	brief := map[string]any{"stage": "acceptance_failed", "command": "python3 -c 'import calc'", "exit_code": 1, "primary_error_excerpt": "Traceback " + xssImg, "constraints_reminder": "x"}
	write(t, filepath.Join(run, "attempt_1", "failure_brief.json"), jsonLine(t, brief))
	if ended {
		write(t, filepath.Join(run, "run_summary.json"), jsonLine(t, map[string]any{"run_id": "r1", "work_order_id": "WO-01", "verdict": "FAIL", "total_attempts": 1, "max_attempts": 1,
			"env_passed": []string{"HOME", "PATH"},
			"attempts": []any{map[string]any{"attempt_index": 1, "failure_brief": brief, "acceptance": []any{map[string]any{"command": []string{"python3", "-c", "import calc"},
				"exit_code": 1, "stderr_trunc": "Traceback " + xssScript, "stderr_path": "attempt_1/logs/acceptance_1.stderr.txt", "stdout_path": "attempt_1/logs/acceptance_1.stdout.txt", "duration_seconds": 0.5}}}}}))
	}
}

func newTestServer(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	if o.Environ == nil {
		o.Environ = []string{"MY_SERVICE_TOKEN=hunter2hunter2", "PATH=/usr/bin"}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestPagesEscapeAndRedact(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", true)
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	for _, p := range []string{"/", "/builds/0/aaaa000000000001", "/builds/0/aaaa000000000001/WO-01/r1/1",
		"/api/index", "/api/builds/0/aaaa000000000001", "/api/builds/0/aaaa000000000001/WO-01/r1/1",
		"/files/out/0/builds/aaaa000000000001/WO-01/r1/attempt_1/llm_response_raw.txt"} {
		t.Run(p, func(t *testing.T) {
			code, body, h := get(t, ts.URL+p)
			if code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") && !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("CSP %q", h.Get("Content-Security-Policy"))
			}
			for _, bad := range []string{xssScript, xssImg, "<img src=x", fakeKey, "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "hunter2hunter2"} {
				if strings.HasPrefix(p, "/files/") && strings.HasPrefix(bad, "<") {
					continue // plain text, sandboxed: shown as written
				}
				if strings.Contains(body, bad) {
					t.Errorf("body holds %q", bad)
				}
			}
		})
	}
	_, body, _ := get(t, ts.URL+"/builds/0/aaaa000000000001/WO-01/r1/1")
	for _, want := range []string{"&lt;script&gt;", "acceptance_failed", Redacted, "calc.py", "new file"} {
		if !strings.Contains(body, want) {
			t.Errorf("attempt page lacks %q", want)
		}
	}
	_, raw, h := get(t, ts.URL+"/files/out/0/builds/aaaa000000000001/WO-01/r1/attempt_1/llm_response_raw.txt")
	if ct := h.Get("Content-Type"); ct != "text/plain; charset=utf-8" || !strings.Contains(raw, Redacted) {
		t.Errorf("raw file: %s %q", ct, raw)
	}
}

func TestTraversalIs404(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", true)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	write(t, secret, "outside\n")
	if err := os.Symlink(secret, filepath.Join(out, "builds", "aaaa000000000001", "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(out, "dirlink")); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, p := range []string{
		"/files/out/0/../../../etc/passwd",
		"/files/out/0/%2e%2e/%2e%2e/etc/passwd",
		"/files/out/0/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
		"/files/out/0//etc/passwd",
		"/files/out/0/%2fetc%2fpasswd",
		"/files/out/0/builds/aaaa000000000001/link.txt",
		"/files/out/0/dirlink/secret.txt",
		"/files/out/1/events.jsonl",
		"/builds/0/..%2f..%2fetc",
		"/builds/0/aaaa000000000001/WO-01/..%2f..%2f/1",
		"/static/..%2fserve.go",
		"/files/out/0/builds/aaaa000000000001/WO-01/r1/attempt_1/./llm_response_raw.txt",
	} {
		// A raw request line: clients would clean the path first.
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", p, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 404 || strings.Contains(string(body), "outside") || strings.Contains(string(body), "root:") {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
}

func TestTokenRequired(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", true)
	_, ts := newTestServer(t, Options{Outs: []string{out}, Token: "s3cret-token"})
	for _, p := range []string{"/", "/api/index", "/api/stream/index", "/api/stream/builds/0/aaaa000000000001", "/static/app.js",
		"/files/out/0/builds/aaaa000000000001/events.jsonl", "/?token=wrong", "/nope"} {
		if code, _, _ := get(t, ts.URL+p); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", p, code)
		}
	}
	if code, _, _ := get(t, ts.URL+"/api/index?token=s3cret-token"); code != 200 {
		t.Errorf("with ?token: %d", code)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/api/index", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with a bearer token: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", ts.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: tokenCookie, Value: "s3cret-token"})
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with the cookie: %d", resp.StatusCode)
	}
}

func TestLoopbackOnlyRefusesOtherHosts(t *testing.T) {
	_, ts := newTestServer(t, Options{Outs: []string{t.TempDir()}, LoopbackOnly: true})
	req, _ := http.NewRequest("GET", ts.URL+"/", nil)
	req.Host = "evil.example:7070"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebound host name: %d, want 403", resp.StatusCode)
	}
	if code, _, _ := get(t, ts.URL+"/"); code != 200 {
		t.Errorf("127.0.0.1: %d", code)
	}
}

func TestStatusOfUnfinishedBuild(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", false) // no build_end, no repository
	now := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	s, _ := newTestServer(t, Options{Outs: []string{out}, Now: func() time.Time { return now }})
	rows := s.st.rows(t.Context())
	if len(rows) != 1 || rows[0].Status != StatusRunning {
		t.Fatalf("rows %+v, want one running build", rows)
	}
	now = now.Add(time.Hour)
	if rows := s.st.rows(t.Context()); rows[0].Status != StatusInterrupted {
		t.Errorf("an hour later: %s, want interrupted", rows[0].Status)
	}
	v, err := s.buildView(t.Context(), 0, "aaaa000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.WOs) != 1 || v.WOs[0].Outcome != "running" || len(v.WOs[0].Timeline) != 1 || len(v.WOs[0].Timeline[0].Nodes) != 4 {
		t.Errorf("work orders %+v", v.WOs)
	}
}

func TestVerdictStatus(t *testing.T) {
	for _, c := range []struct{ verdict, err, want string }{
		{"PASS", "", StatusPass}, {"FAIL", "", StatusFail}, {"ERROR", "run WO-01: interrupted by interrupt", StatusInterrupted},
		{"ERROR", "provider refused", StatusFail}, {"BUDGET", "", StatusFail}, {"PLAN_INVALID", "", StatusFail},
	} {
		sum := &builder.Summary{Error: c.err}
		if got, _ := verdictStatus(c.verdict, sum); got != c.want {
			t.Errorf("%s %q: %s, want %s", c.verdict, c.err, got, c.want)
		}
	}
}

func TestLiveStreamSendsAppendedLines(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", false)
	_, ts := newTestServer(t, Options{Outs: []string{out}, Poll: 50 * time.Millisecond})
	events := filepath.Join(out, "builds", "aaaa000000000001", "events.jsonl")
	info, _ := os.Stat(events)
	resp, err := http.Get(fmt.Sprintf("%s/api/stream/builds/0/aaaa000000000001?from=%d", ts.URL, info.Size()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	f, _ := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	// A CR between JSON tokens is valid JSON but ends an SSE line: sent compacted.
	fmt.Fprint(f, "{\"event\":\"plan\",\r\"source\":\"cr\"}\n")
	fmt.Fprint(f, `{"event":"wo_start","wo":"WO-02","ts":"2026-01-02T03:05:00Z"}`+"\n"+`{"event":"node","wo":"WO-02"`) // the second line is incomplete
	f.Close()
	got := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				got <- d
			}
		}
		close(got)
	}()
	deadline := time.After(2 * time.Second)
	var lines []string
	for {
		select {
		case d := <-got:
			lines = append(lines, d)
			if strings.Contains(d, `"wo":"WO-02"`) && strings.Contains(d, "wo_start") {
				if !slices.Contains(lines, `{"event":"plan","source":"cr"}`) {
					t.Errorf("the line with a CR did not arrive compacted: %q", lines)
				}
				for _, l := range lines {
					if strings.Contains(l, `"event":"node","wo":"WO-02"`) {
						t.Errorf("an incomplete line was sent: %s", l)
					}
				}
				return
			}
		case <-deadline:
			t.Fatalf("the appended event did not arrive within 2 s; got %q", lines)
		}
	}
}

func TestScanLinesKeepsIncompleteLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.jsonl")
	long := strings.Repeat("x", maxEventLine+10)
	// Longer than the read buffer, within the bound: read whole, as are
	// the lines after it; and one of exactly the bound, newline included.
	wide := `{"w":"` + strings.Repeat("y", 100<<10) + `"}`
	edge := strings.Repeat("z", maxEventLine-2) + "\r"
	write(t, p, "{\"a\":1}\n"+long+"\n"+wide+"\r\n"+edge+"\n"+long+"x\n{\"b\":2}\n{\"c\":")
	var got []string
	var ends []int64
	off, err := scanLines(p, 0, func(line []byte, end int64) bool {
		if line == nil {
			line = []byte("<too long>")
		}
		got, ends = append(got, string(line)), append(ends, end)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`{"a":1}`, "<too long>", wide, edge[:len(edge)-1], "<too long>", `{"b":2}`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%d lines (second length %d), want %d (the over-long lines not held)", len(got), len(got[min(1, len(got)-1)]), len(want))
	}
	if want := fmt.Sprint([]int{8, 8 + len(long) + 1, 8 + len(long) + 1 + len(wide) + 2, 8 + len(long) + 1 + len(wide) + 2 + len(edge) + 1,
		8 + 2*len(long) + 1 + len(wide) + 2 + len(edge) + 1 + 2, 8 + 2*len(long) + 1 + len(wide) + 2 + len(edge) + 1 + 2 + 8}); fmt.Sprint(ends) != want {
		t.Errorf("line ends %v, want %s", ends, want)
	}
	if info, _ := os.Stat(p); off != info.Size()-int64(len(`{"c":`)) {
		t.Errorf("offset %d: should stop before the incomplete line", off)
	}
}

func TestDiffLineNumbers(t *testing.T) {
	d := textDiff("a.py", "one\ntwo\nthree\n", "one\n2\nthree\nfour\n")
	var got []string
	for _, l := range d.Lines {
		got = append(got, fmt.Sprintf("%s%d,%d:%s", l.Kind, l.Old, l.New, l.Text))
	}
	want := []string{"@0,0:@@ -1,3 +1,4 @@", " 1,1:one", "-2,0:two", "+0,2:2", " 3,3:three", "+0,4:four"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("diff\n got %q\nwant %q", got, want)
	}
	n := textDiff("new.py", "", "x\ny\n")
	if !n.New || len(n.Lines) != 3 || n.Lines[2].New != 2 {
		t.Errorf("new file diff %+v", n)
	}
	files := parsePatch("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+hi\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -2,2 +2,2 @@\n a\n--- b\n+++ c\n")
	if len(files) != 2 || files[0].Path != "x" || !files[0].New || files[1].Path != "y" || len(files[1].Lines) != 4 || files[1].Lines[2].Text != "-- b" {
		t.Errorf("patch %+v", files)
	}
}

func TestTranscript(t *testing.T) {
	codex := `{"type":"thread.started"}
{"type":"item.completed","item":{"type":"agent_message","text":"I will add mul"}}
{"type":"item.completed","item":{"type":"command_execution","command":"pytest -q","aggregated_output":"1 passed","exit_code":0}}
`
	claude := `{"type":"assistant","message":{"content":[{"type":"text","text":"Adding mul"},{"type":"tool_use","name":"Bash","input":{"command":"pytest -q"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","content":"1 passed","is_error":false}]}}
{"type":"result","result":"done"}
`
	for name, c := range map[string]struct {
		log  string
		want string
	}{
		"codex":  {codex, "message:I will add mul|command:pytest -q:1 passed|"},
		"claude": {claude, "message:Adding mul|tool:Bash: pytest -q|result:tool result:1 passed|result:done|"},
		"plain":  {"just text\n", ""},
	} {
		var got strings.Builder
		for _, e := range transcript(c.log) {
			got.WriteString(e.Kind + ":" + e.Text)
			if e.Output != "" {
				got.WriteString(":" + e.Output)
			}
			got.WriteString("|")
		}
		if got.String() != c.want {
			t.Errorf("%s: %q, want %q", name, got.String(), c.want)
		}
	}
}

func TestSingleRunPages(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", true)
	// A `factory run` out dir holds run directories directly.
	run := filepath.Join(out, "r1")
	src := filepath.Join(out, "builds", "aaaa000000000001", "WO-01", "r1")
	for _, name := range []string{"work_order.json", "run_summary.json", "attempt_1/llm_response_raw.txt", "attempt_1/failure_brief.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(run, name), string(data))
	}
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	_, index, _ := get(t, ts.URL+"/api/index")
	if !strings.Contains(index, `"kind": "run"`) || !strings.Contains(index, `"url": "/runs/0/r1"`) {
		t.Errorf("the index lacks the run:\n%s", index)
	}
	for p, want := range map[string]string{"/runs/0/r1": "attempt 1", "/runs/0/r1/1": "acceptance_failed", "/api/runs/0/r1": `"verdict": "FAIL"`} {
		code, body, _ := get(t, ts.URL+p)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, lacks %q", p, code, want)
		}
	}
	var buf strings.Builder
	if err := Report(t.Context(), &buf, ReportOptions{Out: out, Run: "r1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "acceptance_failed") || strings.Contains(buf.String(), "<script") {
		t.Errorf("run report:\n%.2000s", buf.String())
	}
	if err := Report(t.Context(), &buf, ReportOptions{Out: out, Run: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("report of a missing run: %v", err)
	}
}

func TestActivityNamesTheRunningCommand(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", false)
	events := filepath.Join(out, "builds", "aaaa000000000001", "events.jsonl")
	f, _ := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprint(f, `{"event":"command_start","wo":"WO-01","attempt":2,"node":"po","name":"acceptance_1","argv":["python3","-c","import calc"],"ts":"2026-01-02T03:04:30Z"}`+"\n")
	f.Close()
	now := time.Date(2026, 1, 2, 3, 4, 42, 0, time.UTC)
	s, _ := newTestServer(t, Options{Outs: []string{out}, Now: func() time.Time { return now }})
	v, err := s.buildView(t.Context(), 0, "aaaa000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if v.Activity == nil || v.Activity.What != "WO-01 attempt 2: PO running acceptance_1: python3 -c 'import calc'" || !v.Activity.Since.Equal(time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)) {
		t.Errorf("activity %+v", v.Activity)
	}
}
