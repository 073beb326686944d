package cli

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/eval"
	"github.com/factory-harness/factory/internal/temporal"
)

// startEvalWorkers starts two workers answered by srv. They share this
// machine with the suite, so they hide it (and the eval's output) from
// their commands, as workers on a shared file system should.
func startEvalWorkers(t *testing.T, addr string, f *evalFixture, url string, extra ...string) []*worker {
	t.Helper()
	var ws []*worker
	for _, id := range []string{"worker-a", "worker-b"} {
		ws = append(ws, startWorker(t, addr, id, []string{"OPENAI_API_KEY=test-key"}, append([]string{"--llm-base-url", url, "--python", "python3",
			"--sandbox-hide", f.suite, "--sandbox-hide", f.out}, extra...)...))
	}
	return ws
}

// temporalArgs are f's eval on the workers.
func (f *evalFixture) temporalArgs(addr, root, out string, extra ...string) []string {
	return append([]string{"eval", "--suite", f.suite, "--out", out, "--llm-model", "m1", "--llm-model", "m2",
		"--no-review", "--verify-command", "python3 -m compileall -q .", "--temporal", addr, "--remote-root", root,
		"--heartbeat-timeout", "30s"}, extra...)
}

// TestEvalTemporal runs the eval suite (3 cases × 2 models; sign with m2
// passes its build but not the hidden tests, upper with m1 fails to
// build) as Build workflows on two real workers, and checks that
// results.jsonl is what a local eval of the same suite gives; that the
// bare repositories, one per run at its deterministic path, hold no
// hidden file; that a second invocation resumes without a model call; and
// that an invocation that lost its results.jsonl collects the finished
// workflows instead of building again.
func TestEvalTemporal(t *testing.T) {
	addr := startTemporal(t)
	f := newEvalFixture(t)
	srv := f.serve(t, nil)
	root := filepath.Join(filepath.Dir(f.out), "remotes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	startEvalWorkers(t, addr, f, srv.url)
	args := f.temporalArgs(addr, root, f.out, "-j", "4")
	res := runFactory(t, gitEnv(t.TempDir()), args...)
	if res.code != ExitPass {
		t.Fatalf("eval --temporal exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	remote := srv.requests()
	remoteCalls := len(remote)
	got := readEvalResults(t, f.out)

	local := filepath.Join(filepath.Dir(f.out), "out-local")
	if res := runFactory(t, evalEnv(t), f.args(srv.url, local, "-j", "2")...); res.code != ExitPass {
		t.Fatalf("local eval exit %d\n%s", res.code, res.stderr)
	}
	// The same but for the eval id (--temporal is part of it) in the paths.
	want := readEvalResults(t, local)
	id := filepath.Base(evalDir(t, f.out))
	for i := range want {
		for _, p := range []*string{&want[i].BuildDir, &want[i].Repo} {
			*p = strings.Replace(*p, filepath.Base(evalDir(t, local)), id, 1)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results.jsonl on the workers differs from a local eval's (-local +temporal):\n%s\nstderr:\n%s", diff, res.stderr)
	}
	if n := len(srv.requests()) - remoteCalls; n != remoteCalls {
		t.Errorf("the workers made %d model calls, the local eval %d", remoteCalls, n)
	}
	var statuses []string
	for _, r := range got {
		statuses = append(statuses, r.Case+"/"+r.Model+"="+r.Status+"/"+r.BuildVerdict)
	}
	if s := strings.Join(statuses, " "); s != "add/m1=solved/PASS add/m2=solved/PASS sign/m1=solved/PASS sign/m2=unsolved/PASS upper/m1=unsolved/FAIL upper/m2=solved/PASS" {
		t.Errorf("runs: %s", s)
	}
	for _, want := range []string{"[6/6] ", "sign  m2  run 1: unsolved (build PASS, checks 0/1"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, res.stderr)
		}
	}

	// One bare repository per run at its deterministic path, with the
	// start commit and the built branch and nothing hidden; each run's
	// workflow has its deterministic id.
	for _, r := range got {
		k := eval.RunKey{Case: r.Case, Model: r.Model, Run: r.Run}
		bare := eval.RemoteRepo(root, id, k)
		objects := git(t, bare, "cat-file", "--batch-all-objects", "--batch")
		if strings.Contains(objects, hiddenMarker) || strings.Contains(objects, "test_zero") {
			t.Errorf("%s holds hidden content", bare)
		}
		if !strings.Contains(git(t, bare, "branch", "--list"), temporal.StartBranch) {
			t.Errorf("%s has no start branch", bare)
		}
		st := temporalStatus(t, addr, eval.WorkflowID(id, k))
		if st.Verdict != r.BuildVerdict || st.Tokens != r.Tokens {
			t.Errorf("workflow of %s: verdict %s, %d tokens; results.jsonl %s, %d", k, st.Verdict, st.Tokens, r.BuildVerdict, r.Tokens)
		}
		log, _ := os.ReadFile(filepath.Join(evalDir(t, f.out), "runs", k.Path(), "build.log"))
		if !strings.Contains(string(log), "workflow "+eval.WorkflowID(id, k)+" on "+addr+": building") {
			t.Errorf("%s's build.log does not name its workflow:\n%s", k, log)
		}
		if r.BuildVerdict == builder.VerdictPass {
			var sum builder.Summary
			readJSON(t, filepath.Join(f.out, r.BuildDir, "build_summary.json"), &sum)
			if sum.Verdict != builder.VerdictPass || !exists(filepath.Join(f.out, r.BuildDir, "workflow.json")) {
				t.Errorf("%s: build_summary.json %+v", k, sum)
			}
		}
	}
	for _, body := range srv.requests() {
		if strings.Contains(body, hiddenMarker) || strings.Contains(body, "test_zero") {
			t.Fatalf("a prompt holds hidden content: %.300s", body)
		}
	}
	// The workers' requests carry each run's own prompt cache key, as a
	// local eval's do: not the plan's, which runs of a case share.
	keys := map[string]bool{}
	for _, body := range remote {
		var req struct {
			Key string `json:"prompt_cache_key"`
		}
		if err := json.Unmarshal([]byte(body), &req); err != nil || !strings.HasPrefix(req.Key, "factory-eval-"+id+"-") {
			t.Errorf("a worker's request has prompt_cache_key %q (%v), want factory-eval-%s-<run>", req.Key, err, id)
		}
		keys[req.Key] = true
	}
	if len(keys) != len(got) {
		t.Errorf("%d prompt cache keys for %d runs", len(keys), len(got))
	}

	t.Run("resume", func(t *testing.T) {
		before := len(srv.requests())
		res := runFactory(t, gitEnv(t.TempDir()), args...)
		if res.code != ExitPass || !strings.Contains(res.stderr, "6 already finished, 0 to do") {
			t.Fatalf("second invocation: exit %d\n%s", res.code, res.stderr)
		}
		// results.jsonl lost: the finished workflows are collected, not built again.
		results := filepath.Join(evalDir(t, f.out), eval.ResultsFile)
		if err := os.WriteFile(results, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res = runFactory(t, gitEnv(t.TempDir()), args...)
		if res.code != ExitPass || !strings.Contains(res.stderr, "0 already finished, 6 to do") {
			t.Fatalf("third invocation: exit %d\n%s", res.code, res.stderr)
		}
		if n := len(srv.requests()) - before; n != 0 {
			t.Errorf("resuming asked the model %d times", n)
		}
		if diff := cmp.Diff(got, readEvalResults(t, f.out)); diff != "" {
			t.Errorf("the collected workflows give other results (-first +collected):\n%s", diff)
		}
		log, _ := os.ReadFile(filepath.Join(evalDir(t, f.out), "runs", "upper", "m1", "1", "build.log"))
		if !strings.Contains(string(log), "ended already (FAIL): its result is used") {
			t.Errorf("upper/m1's build.log:\n%s", log)
		}
	})
}

// What cannot work with --temporal is refused before anything is created
// or any server asked.
func TestEvalTemporalRefusals(t *testing.T) {
	f := newEvalFixture(t)
	root := t.TempDir()
	base := func(extra ...string) []string {
		return append([]string{"eval", "--suite", f.suite, "--out", f.out, "--llm-model", "m1"}, extra...)
	}
	tp := []string{"--temporal", "127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no remote root", base(tp...), "--temporal needs --remote-root DIR"},
		{"remote root alone", base("--remote-root", root), "--remote-root applies only with --temporal"},
		{"replay", base(append(tp, "--remote-root", root, "--replay", root)...), "--replay belong on 'factory worker'"},
		{"python and base url", base(append(tp, "--remote-root", root, "--python", "python3", "--llm-base-url", "http://x")...), "--llm-base-url, --python belong on 'factory worker'"},
		{"budget", base(append(tp, "--remote-root", root, "--max-tokens", "10")...), "cannot be enforced across the workers"},
		{"ssh root", base(append(tp, "--remote-root", "ssh://git.example/evals")...), "a ssh:// remote cannot be used"},
		{"missing root", base(append(tp, "--remote-root", filepath.Join(root, "nope"))...), "is not a directory here"},
		{"root in the suite", base(append(tp, "--remote-root", filepath.Join(f.suite, "add"))...), "is inside the suite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runFactory(t, gitEnv(t.TempDir()), tc.args...)
			if res.code != ExitUsage || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q\n%s", res.code, ExitUsage, tc.want, res.stderr)
			}
			if exists(f.out) {
				t.Errorf("--out was created")
			}
		})
	}
	// No server there: exit 3 before any run.
	res := runFactory(t, gitEnv(t.TempDir()), base(append(tp, "--remote-root", root)...)...)
	if res.code != ExitInternal || !strings.Contains(res.stderr, "127.0.0.1:1") || exists(f.out) {
		t.Errorf("unreachable server: exit %d, want %d\n%s", res.code, ExitInternal, res.stderr)
	}
}

// gate holds every model request until opened, then passes it to target.
type gate struct {
	url      string
	held     atomic.Int32
	open     chan struct{}
	openOnce sync.Once
}

func newGate(t *testing.T, target string) *gate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{open: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.ErrorLog = log.New(io.Discard, "", 0) // requests of killed workers
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.held.Add(1)
		<-g.open
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(g.release) // first: the server cannot close with requests held
	g.url = ts.URL + "/v1"
	return g
}

func (g *gate) release() { g.openOnce.Do(func() { close(g.open) }) }

// Ctrl-C while the workflows run: the eval exits 3 with nothing recorded
// and says the workflows go on; they do, and the next invocation follows
// them to their end instead of submitting again, with no new model call.
func TestEvalTemporalInterrupt(t *testing.T) {
	addr := startTemporal(t)
	f := newEvalFixture(t)
	srv := f.serve(t, nil)
	g := newGate(t, srv.url)
	root := filepath.Join(filepath.Dir(f.out), "remotes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	startEvalWorkers(t, addr, f, g.url)
	// upper has a given plan: one model call per attempt, held by the gate.
	args := f.temporalArgs(addr, root, f.out, "--case", "upper", "-j", "2")
	s := submit(t, nil, args...)
	waitUntil(t, 90*time.Second, "both runs' first model call", func() bool { return g.held.Load() == 2 })
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t, 30*time.Second); code != ExitInternal {
		t.Fatalf("interrupted eval: exit %d, want %d\n%s", code, ExitInternal, s.stderr.String())
	}
	for _, want := range []string{"stopped following workflow factory-eval-", "it goes on on the workers", "run the same command again to resume"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, s.stderr.String())
		}
	}
	if got := readEvalResults(t, f.out); len(got) != 0 {
		t.Fatalf("interrupted runs were recorded: %+v", lines(got))
	}
	id := filepath.Base(evalDir(t, f.out))
	k := eval.RunKey{Case: "upper", Model: "m2", Run: 1}
	if st := temporalStatus(t, addr, eval.WorkflowID(id, k)); st.Verdict != temporal.VerdictRunning {
		t.Errorf("after Ctrl-C the workflow of %s is %s, want it still running", k, st.Verdict)
	}
	g.release()
	res := runFactory(t, gitEnv(t.TempDir()), args...)
	if res.code != ExitPass || !strings.Contains(res.stderr, "0 already finished, 2 to do") {
		t.Fatalf("resumed eval: exit %d\n%s", res.code, res.stderr)
	}
	got := lines(readEvalResults(t, f.out))
	if len(got) != 2 || got[0].Verdict != "FAIL" || got[1].Status != eval.StatusSolved {
		t.Errorf("results %+v, want upper/m1 FAIL and upper/m2 solved", got)
	}
	// m1's two attempts and m2's one: each asked once, over both invocations.
	if n := len(srv.se.Requests()); n != 3 {
		t.Errorf("%d model calls, want 3: the resumed eval submitted again", n)
	}
	log, _ := os.ReadFile(filepath.Join(evalDir(t, f.out), "runs", k.Path(), "build.log"))
	if !strings.Contains(string(log), "runs already: following it") && !strings.Contains(string(log), "ended already (PASS)") {
		t.Errorf("%s's build.log does not say it followed the running workflow:\n%s", k, log)
	}
}

// The Temporal server dies while the workflows run: each run in flight is
// an error (counted apart, done again by the next invocation), not
// unsolved, and the eval still ends with its results and summary.
func TestEvalTemporalServerOutage(t *testing.T) {
	addr, kill := startTemporalServer(t)
	f := newEvalFixture(t)
	srv := f.serve(t, nil)
	g := newGate(t, srv.url)
	root := filepath.Join(filepath.Dir(f.out), "remotes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	workers := startEvalWorkers(t, addr, f, g.url)
	s := submit(t, nil, f.temporalArgs(addr, root, f.out, "--case", "upper", "-j", "2")...)
	waitUntil(t, 90*time.Second, "both runs' first model call", func() bool { return g.held.Load() == 2 })
	kill()
	start := time.Now()
	if code := s.wait(t, 3*time.Minute); code != ExitPass {
		t.Fatalf("eval after the outage: exit %d, want %d (the eval ran)\n%s", code, ExitPass, s.stderr.String())
	}
	t.Logf("the eval ended %v after the outage", time.Since(start).Round(time.Second))
	for _, w := range workers { // they cannot stop gracefully without the server
		_ = w.cmd.Process.Kill()
	}
	got := readEvalResults(t, f.out)
	if len(got) != 2 {
		t.Fatalf("results %+v, want both runs", lines(got))
	}
	for _, r := range got {
		t.Logf("%s/%s: %s", r.Case, r.Model, r.Error)
		if r.Status != eval.StatusError || !strings.Contains(r.Error, "(is the server up?): workflow factory-eval-") {
			t.Errorf("%s/%s: %s %q, want an error naming its workflow", r.Case, r.Model, r.Status, r.Error)
		}
	}
	var sum eval.Summary
	readJSON(t, filepath.Join(evalDir(t, f.out), eval.SummaryFile), &sum)
	if m := sum.PerModel[0]; m.Errors != 1 || m.Unsolved != 0 || sum.Complete {
		t.Errorf("summary of %s: %+v, complete %v; want 1 error, not unsolved", m.Model, m, sum.Complete)
	}
}
