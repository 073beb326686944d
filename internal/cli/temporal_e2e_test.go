package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/temporal"
)

// The Temporal tests run a real dev server (the Temporal CLI), real git
// remotes (bare repositories) and workers that are the real factory
// binary, so a SIGKILL is a real one.

// startTemporal starts a dev server with its own SQLite file on free
// ports and returns its frontend address; it stops with the test.
func startTemporal(t *testing.T) string {
	t.Helper()
	addr, _ := startTemporalServer(t)
	return addr
}

// startTemporalServer is startTemporal that also returns a function
// stopping the server before the test ends (SIGKILL: an outage).
func startTemporalServer(t *testing.T) (addr string, kill func()) {
	t.Helper()
	bin, err := exec.LookPath("temporal")
	if err != nil {
		t.Skip("the Temporal CLI is not on PATH; install it with 'go install github.com/temporalio/cli/cmd/temporal@v1.5.1' (see docs/temporal.md)")
	}
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", fmt.Sprint(port),
		"--db-filename", filepath.Join(dir, "temporal.db"), "--log-level", "error")
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	kill = func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger{}})
		if err == nil {
			c.Close()
			return addr, kill
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Temporal dev server did not answer at %s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bareRemote makes a bare clone of repo, the build's git remote, and
// returns its file:// URL.
func bareRemote(t *testing.T, repo string) (url, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "remote.git")
	git(t, repo, "clone", "-q", "--bare", repo, dir)
	return "file://" + dir, dir
}

// worker is a running `factory worker`.
type worker struct {
	cmd     *exec.Cmd
	workDir string
	out     syncBuffer
	done    chan struct{}
}

// startWorker starts a worker; it is stopped (SIGTERM) when the test ends.
func startWorker(t *testing.T, addr, identity string, env []string, args ...string) *worker {
	t.Helper()
	w := &worker{workDir: filepath.Join(t.TempDir(), "work"), done: make(chan struct{})}
	w.cmd = factoryCmd(t, append(gitEnv(t.TempDir()), env...), append([]string{"worker", "--temporal", addr,
		"--work-dir", w.workDir, "--identity", identity}, args...)...)
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %s:\n%s", identity, w.out.String())
		}
	})
	return w
}

// cache is the worker's copy of the build's remote.
func (w *worker) cache(id string) string { return filepath.Join(w.workDir, "repos", id) }

// submitter is a running `factory build --temporal`.
type submitter struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	code           int
}

func submit(t *testing.T, env []string, args ...string) *submitter {
	t.Helper()
	s := &submitter{done: make(chan struct{})}
	s.cmd = factoryCmd(t, append(gitEnv(t.TempDir()), env...), args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			s.code = exit.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

// wait waits for the submitter's exit and returns its code.
func (s *submitter) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(limit):
		t.Fatalf("factory build --temporal did not end within %v\nstdout:\n%s\nstderr:\n%s", limit, s.stdout.String(), s.stderr.String())
		return -1
	}
}

// workflowID reads the workflow id from the submitter's first line.
func (s *submitter) workflowID(t *testing.T) string {
	t.Helper()
	var id string
	waitUntil(t, time.Minute, "the submitter's workflow line", func() bool {
		line, _, _ := strings.Cut(s.stderr.String(), "\n")
		rest, ok := strings.CutPrefix(line, "workflow ")
		id, _, _ = strings.Cut(rest, " ")
		return ok && strings.Contains(line, " on ")
	})
	return id
}

// temporalBuildArgs are the submitter's arguments for f's plan.
func temporalBuildArgs(addr, url string, f *buildFixture, extra ...string) []string {
	return append([]string{"build", "--temporal", addr, "--repo-url", url, "--base", "main", "--plan", f.plan,
		"--llm-model", "test-model", "--timeout-seconds", "60", "--max-attempts", "2", "--heartbeat-timeout", "10s"}, extra...)
}

// routeWorkOrders answers each work order's prompt with its reply and
// counts the prompts per work order.
type routeWorkOrders struct {
	mu      sync.Mutex
	replies map[string][]llmtest.Reply // a work order's replies, in order; the last repeats
	asked   map[string]int
}

func (r *routeWorkOrders) route(prompt string) llmtest.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, replies := range r.replies {
		if strings.Contains(prompt, "# Work order "+id+":") {
			n := r.asked[id]
			r.asked[id]++
			return replies[min(n, len(replies)-1)]
		}
	}
	return llmtest.Reply{Status: 500, Body: `{"error":{"message":"no route for this prompt"}}`}
}

func (r *routeWorkOrders) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[id]
}

func newRoutes(replies map[string][]llmtest.Reply) *routeWorkOrders {
	return &routeWorkOrders{replies: replies, asked: map[string]int{}}
}

var passingReplies = map[string][]llmtest.Reply{"WO-01": {replyWO01}, "WO-02": {replyWO02}, "WO-03": {replyWO03}}

// remoteBranch clones the remote and checks out branch, to look at it.
func remoteBranch(t *testing.T, remote, branch string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	git(t, t.TempDir(), "clone", "-q", "--branch", branch, remote, dir)
	return dir
}

func planHashOf(t *testing.T, f *buildFixture) string {
	t.Helper()
	hash, err := builder.PlanHash(builder.Options{PlanDir: f.plan})
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

const secretKey = "sk-test-5ecret-never-in-history"

// Two workers, a build submitted twice at once from two more processes:
// one workflow, one commit per work order on the remote's build branch
// with the local build's trailers, each model prompt once, both
// submitters print the progress and exit 0; a third submission reports
// the finished build. The history holds no key.
func TestTemporalBuildTwoWorkers(t *testing.T) {
	addr := startTemporal(t)
	f := newBuildFixture(t, buildPlan(""))
	url, remote := bareRemote(t, f.repo)
	routes := newRoutes(passingReplies)
	srv := llmtest.StartRouted(t, routes.route)
	for _, id := range []string{"worker-a", "worker-b"} {
		startWorker(t, addr, id, []string{"OPENAI_API_KEY=" + secretKey}, "--llm-base-url", srv.URL)
	}
	args := temporalBuildArgs(addr, url, f, "--json")
	first, second := submit(t, nil, args...), submit(t, nil, args...)
	for i, s := range []*submitter{first, second} {
		if code := s.wait(t, 90*time.Second); code != ExitPass {
			t.Fatalf("submitter %d: exit %d\n%s%s", i+1, code, s.stdout.String(), s.stderr.String())
		}
	}
	var res temporal.BuildResult
	if err := json.Unmarshal([]byte(first.stdout.String()), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, first.stdout.String())
	}
	if second.workflowID(t) != res.WorkflowID {
		t.Errorf("two submissions, two workflows: %s and %s", res.WorkflowID, second.workflowID(t))
	}
	hash := planHashOf(t, f)
	if res.Verdict != builder.VerdictPass || res.Branch != "factory/"+hash || len(res.WorkOrders) != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, wo := range res.WorkOrders {
		if wo.Outcome != builder.OutcomePassed || wo.Worker == "" || wo.RunDir == "" || wo.Attempts != 1 || wo.Tokens != 120 {
			t.Errorf("%s: %+v", wo.ID, wo)
		}
	}
	for _, id := range []string{"WO-01", "WO-02", "WO-03"} {
		if n := routes.count(id); n != 1 {
			t.Errorf("the model was asked for %s %d times, want 1", id, n)
		}
	}
	for _, line := range []string{"plan: 3 work orders from", "WO-01: Skeleton and add()", "WO-02: PASS, committed", "build " + hash + ": PASS, 3 work orders committed on factory/" + hash} {
		if !strings.Contains(first.stderr.String(), line) {
			t.Errorf("the submitter's progress lacks %q:\n%s", line, first.stderr.String())
		}
	}
	base := git(t, f.repo, "rev-parse", "HEAD")
	clone := remoteBranch(t, remote, res.Branch)
	checkCommits(t, clone, base, committed)
	if head := git(t, clone, "rev-parse", "HEAD"); head != res.Head {
		t.Errorf("result head %s, branch at %s", res.Head, head)
	}
	// Each work order's prompt is the one a local build of the plan sends,
	// byte for byte: laid out from the whole plan (its shared context
	// first), with the build's cache key.
	local := newBuildFixture(t, buildPlan(""))
	localSrv := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	if res := local.build(t, localSrv.URL); res.code != ExitPass {
		t.Fatalf("local build: exit %d\n%s", res.code, res.stderr)
	}
	sent := map[string]bool{}
	for _, r := range srv.Requests() {
		sent[canonicalJSON(t, []any{r["messages"], r["prompt_cache_key"]})] = true
	}
	for i, r := range localSrv.Requests() {
		if !sent[canonicalJSON(t, []any{r["messages"], r["prompt_cache_key"]})] {
			t.Errorf("the local build's request %d (WO-0%d) was not sent by the workers: their prompt differs", i, i+1)
		}
	}
	// Submitted again after the end: the finished build, no new work.
	again := runFactory(t, gitEnv(t.TempDir()), args...)
	if again.code != ExitPass || !strings.Contains(again.stdout, `"verdict": "PASS"`) || routes.count("WO-01") != 1 {
		t.Errorf("third submission: exit %d, WO-01 asked %d times\n%s%s", again.code, routes.count("WO-01"), again.stdout, again.stderr)
	}
	// The key never entered the history.
	hist, err := exec.Command("temporal", "workflow", "show", "--address", addr, "--workflow-id", res.WorkflowID, "--output", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow show: %v\n%s", err, hist)
	}
	if flat := strings.ToLower(strings.ReplaceAll(string(hist), "_", "")); !strings.Contains(flat, "workflowexecutioncompleted") || strings.Contains(string(hist), secretKey) {
		t.Errorf("the history export is not this build's or holds the API key:\n%.2000s", hist)
	}
	// The same in the raw history, whose payloads are not base64-encoded.
	raw := historyBytes(t, addr, res.WorkflowID)
	if !strings.Contains(string(raw), "test-model") || !strings.Contains(string(raw), "Factory-") && !strings.Contains(string(raw), hash) {
		t.Fatalf("the raw history does not hold the build's payloads (%d bytes)", len(raw))
	}
	if strings.Contains(string(raw), secretKey) {
		t.Error("the workflow history holds the API key")
	}
}

// historyBytes is the workflow's history as protobuf bytes: the
// payloads' JSON appears in it as is.
func historyBytes(t *testing.T, addr, id string) []byte {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// recordedGroup is the process group the worker's copy records as
// running (gitws's command.json).
func recordedGroup(t *testing.T, cache string) int {
	t.Helper()
	var c struct {
		PGID int `json:"pgid"`
	}
	readJSON(t, filepath.Join(cache, ".git", "factory", "command.json"), &c)
	if c.PGID <= 0 {
		t.Fatalf("no process group recorded in %s", cache)
	}
	return c.PGID
}

func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// The worker running WO-02 is SIGKILLed while WO-02's acceptance command
// runs: its command dies with it, the other worker takes WO-02 over, the
// build completes with WO-02 committed once and WO-01 neither redone nor
// asked of the model again.
func TestTemporalWorkerKilled(t *testing.T) {
	addr := startTemporal(t)
	f := newSlowBuildFixture(t)
	url, remote := bareRemote(t, f.repo)
	routes := newRoutes(passingReplies)
	srv := llmtest.StartRouted(t, routes.route)
	env := []string{"OPENAI_API_KEY=k"}
	a := startWorker(t, addr, "worker-a", env, "--llm-base-url", srv.URL)
	// A short heartbeat timeout: worker-b takes WO-02 over soon after.
	s := submit(t, nil, temporalBuildArgs(addr, url, f, "--heartbeat-timeout", "5s")...)
	id := s.workflowID(t)
	waitUntil(t, time.Minute, "WO-02's acceptance command on worker-a", func() bool { return exists(filepath.Join(a.cache(id), startedFile)) })
	pgid := recordedGroup(t, a.cache(id))
	if !groupAlive(pgid) {
		t.Fatalf("process group %d of the acceptance command is not running", pgid)
	}
	b := startWorker(t, addr, "worker-b", env, "--llm-base-url", srv.URL)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	waitFor(t, "the killed worker's command to die", func() bool { return !groupAlive(pgid) })
	waitUntil(t, time.Minute, "WO-02's acceptance command on worker-b", func() bool { return exists(filepath.Join(b.cache(id), startedFile)) })
	writeFiles(t, b.cache(id), map[string]string{releaseFile: ""})
	if code := s.wait(t, 60*time.Second); code != ExitPass {
		t.Fatalf("exit %d\n%s%s\nworker-a:\n%s", code, s.stdout.String(), s.stderr.String(), a.out.String())
	}
	if !strings.Contains(s.stdout.String(), "WO-02 ") || !strings.Contains(s.stdout.String(), "[worker-b]") {
		t.Errorf("summary:\n%s", s.stdout.String())
	}
	if n := routes.count("WO-01"); n != 1 {
		t.Errorf("the model was asked for WO-01 %d times over the build, want 1", n)
	}
	if n := routes.count("WO-02"); n != 2 {
		t.Errorf("the model was asked for WO-02 %d times, want 2 (once per worker)", n)
	}
	res := temporalStatus(t, addr, id)
	if res.Verdict != builder.VerdictPass || res.WorkOrders[0].Worker != "worker-a" || res.WorkOrders[1].Worker != "worker-b" {
		t.Errorf("status: %+v", res)
	}
	clone := remoteBranch(t, remote, res.Branch)
	checkCommits(t, clone, git(t, f.repo, "rev-parse", "HEAD"), committed)
}

// temporalStatus is `factory status --temporal --workflow ID --json`.
func temporalStatus(t *testing.T, addr, id string) temporal.BuildResult {
	t.Helper()
	out := runFactory(t, nil, "status", "--temporal", addr, "--workflow", id, "--json")
	if out.code != ExitPass {
		t.Fatalf("status: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	var res temporal.BuildResult
	if err := json.Unmarshal([]byte(out.stdout), &res); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.stdout)
	}
	return res
}

// A work order that fails ends the workflow with FAIL (exit 1) after its
// attempts (with --repair off); a key the provider rejects ends it with exit 3 and the
// provider's message. Neither is retried.
func TestTemporalFailAndBadKey(t *testing.T) {
	addr := startTemporal(t)
	t.Run("fail", func(t *testing.T) {
		f := newBuildFixture(t, buildPlan(""))
		url, remote := bareRemote(t, f.repo)
		routes := newRoutes(map[string][]llmtest.Reply{"WO-01": {replyWO01}, "WO-02": {replyWO02Bad}, "WO-03": {replyWO03}})
		srv := llmtest.StartRouted(t, routes.route)
		startWorker(t, addr, "worker-fail", []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srv.URL, "--task-queue", "fail")
		res := runFactory(t, gitEnv(t.TempDir()), temporalBuildArgs(addr, url, f, "--task-queue", "fail", "--repair", "off")...)
		if res.code != ExitFail || !strings.Contains(res.stdout, "verdict: FAIL") || !strings.Contains(res.stdout, "verify_failed") {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, ExitFail, res.stdout, res.stderr)
		}
		if !strings.Contains(res.stderr, "WO-02: FAIL at verify_failed after 2 attempt(s)") {
			t.Errorf("progress lacks the FAIL line:\n%s", res.stderr)
		}
		if routes.count("WO-01") != 1 || routes.count("WO-02") != 2 || routes.count("WO-03") != 0 {
			t.Errorf("model asked %v, want WO-01 once, WO-02 twice (its attempts)", routes.asked)
		}
		clone := remoteBranch(t, remote, "factory/"+planHashOf(t, f))
		checkCommits(t, clone, git(t, f.repo, "rev-parse", "HEAD"), map[string][]string{"WO-01": committed["WO-01"]})
	})
	t.Run("bad key", func(t *testing.T) {
		f := newBuildFixture(t, buildPlan(""))
		url, _ := bareRemote(t, f.repo)
		srv := llmtest.StartRouted(t, func(string) llmtest.Reply {
			return llmtest.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}
		})
		startWorker(t, addr, "worker-key", []string{"OPENAI_API_KEY=bad"}, "--llm-base-url", srv.URL, "--task-queue", "key")
		res := runFactory(t, gitEnv(t.TempDir()), temporalBuildArgs(addr, url, f, "--task-queue", "key")...)
		if res.code != ExitInternal || !strings.Contains(res.stderr, "rejected the API key (HTTP 401): check OPENAI_API_KEY") {
			t.Fatalf("exit %d, want %d with the provider's message\n%s%s", res.code, ExitInternal, res.stdout, res.stderr)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d model requests, want 1: a rejected key is not retried", n)
		}
	})
}

// --max-cost-usd covers the whole build: WO-01's answer costs more than
// the budget, so WO-02 (on whichever worker) is refused before its call.
func TestTemporalBudget(t *testing.T) {
	addr := startTemporal(t)
	f := newBuildFixture(t, buildPlan(""))
	url, remote := bareRemote(t, f.repo)
	wo1 := anthropicReply(replyWO01)
	wo1.OutputTokens = 1_000_000
	srv := llmtest.StartAnthropic(t, wo1, anthropicReply(replyWO02))
	for _, id := range []string{"worker-a", "worker-b"} {
		startWorker(t, addr, id, []string{"ANTHROPIC_API_KEY=ak"}, "--llm-base-url", srv.URL)
	}
	args := temporalBuildArgs(addr, url, f, "--json", "--max-cost-usd", "5")
	args[slicesIndex(args, "test-model")] = "anthropic:claude-sonnet-4-5"
	res := runFactory(t, gitEnv(t.TempDir()), args...)
	if res.code != ExitBudget || !strings.Contains(res.stderr, "cost budget reached") || !strings.Contains(res.stderr, "of $5.0000 spent") {
		t.Fatalf("exit %d, want %d\n%s%s", res.code, ExitBudget, res.stdout, res.stderr)
	}
	var sum temporal.BuildResult
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != builder.VerdictBudget || sum.Tokens < 1_000_000 || sum.CostUSD == nil || *sum.CostUSD <= 5 ||
		sum.WorkOrders[1].Outcome != builder.OutcomePending || srv.Remaining() != 1 {
		t.Errorf("replies left %d; result %+v", srv.Remaining(), sum)
	}
	clone := remoteBranch(t, remote, sum.Branch)
	checkCommits(t, clone, git(t, f.repo, "rev-parse", "HEAD"), map[string][]string{"WO-01": committed["WO-01"]})
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	panic(v + " not found")
}

// factory cancel during a work order: the worker rolls it back (its copy
// is clean, at WO-01's commit), the submitter exits 3, the remote branch
// keeps WO-01.
func TestTemporalCancel(t *testing.T) {
	addr := startTemporal(t)
	f := newSlowBuildFixture(t)
	url, remote := bareRemote(t, f.repo)
	routes := newRoutes(passingReplies)
	srv := llmtest.StartRouted(t, routes.route)
	w := startWorker(t, addr, "worker-a", []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srv.URL)
	s := submit(t, nil, temporalBuildArgs(addr, url, f)...)
	id := s.workflowID(t)
	waitUntil(t, time.Minute, "WO-02's acceptance command", func() bool { return exists(filepath.Join(w.cache(id), startedFile)) })
	pgid := recordedGroup(t, w.cache(id))
	if out := runFactory(t, nil, "cancel", "--temporal", addr, "--workflow", id); out.code != ExitPass {
		t.Fatalf("cancel: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	if code := s.wait(t, 30*time.Second); code != ExitInternal || !strings.Contains(s.stderr.String(), "canceled") {
		t.Fatalf("submitter: exit %d, want %d\n%s%s", code, ExitInternal, s.stdout.String(), s.stderr.String())
	}
	if groupAlive(pgid) {
		t.Error("the canceled work order's command still runs")
	}
	branch := "factory/" + planHashOf(t, f)
	clone := remoteBranch(t, remote, branch)
	checkCommits(t, clone, git(t, f.repo, "rev-parse", "HEAD"), map[string][]string{"WO-01": committed["WO-01"]})
	cache := w.cache(id)
	if st := git(t, cache, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("the worker's copy is not rolled back:\n%s", st)
	}
	if head, want := git(t, cache, "rev-parse", "HEAD"), git(t, clone, "rev-parse", "HEAD"); head != want {
		t.Errorf("the worker's copy is at %s, want WO-01's commit %s", head, want)
	}
	if exists(filepath.Join(cache, ".git", "factory", "journal.json")) {
		t.Error("the canceled attempt's journal is still there")
	}
	if res := temporalStatus(t, addr, id); res.Verdict != temporal.VerdictCanceled || res.WorkOrders[0].Outcome != builder.OutcomePassed {
		t.Errorf("status: %+v", res)
	}
	for _, cmd := range []string{"cancel", "status"} {
		if out := runFactory(t, nil, cmd, "--temporal", addr, "--workflow", "no-such-build"); out.code != ExitUsage || !strings.Contains(out.stderr, "no such workflow") {
			t.Errorf("%s of an unknown workflow: exit %d\n%s", cmd, out.code, out.stderr)
		}
	}
}

// -j 2 on two workers: after the test suite (WO-01), which every order
// depends on, two orders at a time — one per worker — of three
// independent chains; the remote's build branch then has the
// first-parent history of a local serial build with the same replies
// (the same work orders in plan order, each commit with the same tree),
// every prompt was sent once, and the orders' commits wait under
// refs/factory/<plan hash>/, not on branches of the remote.
func TestTemporalBuildParallel(t *testing.T) {
	addr := startTemporal(t)
	ref := newBuildFixture(t, chainPlan(""))
	refBase := git(t, ref.repo, "rev-parse", "HEAD")
	if res := ref.build(t, llmtest.StartRouted(t, newRoutes(chainReplies()).route).URL); res.code != ExitPass {
		t.Fatalf("local serial build: exit %d\n%s", res.code, res.stderr)
	}
	f := newBuildFixture(t, chainPlan(""))
	url, remote := bareRemote(t, f.repo)
	routes := newRoutes(chainReplies())
	srv := llmtest.StartRouted(t, routes.route)
	for _, id := range []string{"worker-a", "worker-b"} {
		startWorker(t, addr, id, []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srv.URL)
	}
	s := submit(t, nil, temporalBuildArgs(addr, url, f, "--json", "-j", "2")...)
	if code := s.wait(t, 3*time.Minute); code != ExitPass {
		t.Fatalf("exit %d\n%s%s", code, s.stdout.String(), s.stderr.String())
	}
	var res temporal.BuildResult
	if err := json.Unmarshal([]byte(s.stdout.String()), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, s.stdout.String())
	}
	workers := map[string]bool{}
	for _, wo := range res.WorkOrders {
		workers[wo.Worker] = true
		if wo.Outcome != builder.OutcomePassed || wo.Commit == "" {
			t.Errorf("%s: %+v", wo.ID, wo)
		}
	}
	if len(res.WorkOrders) != 7 || !workers["worker-a"] || !workers["worker-b"] {
		t.Errorf("work orders ran on %v, want both workers: %+v", workers, res.WorkOrders)
	}
	for id := range chainReplies() {
		if n := routes.count(id); n != 1 {
			t.Errorf("the model was asked for %s %d times, want 1", id, n)
		}
	}
	if !strings.Contains(s.stderr.String(), "up to 2 work orders at a time") || !strings.Contains(s.stderr.String(), "integrated as") {
		t.Errorf("the submitter's progress does not show a parallel build:\n%s", s.stderr.String())
	}
	clone := remoteBranch(t, remote, res.Branch)
	if got, want := firstParentTrees(t, clone, git(t, f.repo, "rev-parse", "HEAD")), firstParentTrees(t, ref.repo, refBase); len(want) != 7 || !slices.Equal(got, want) {
		t.Errorf("the remote's history differs from the local serial build's:\n%q\nwant\n%q", got, want)
	}
	if head := git(t, clone, "rev-parse", "HEAD"); head != res.Head {
		t.Errorf("result head %s, branch at %s", res.Head, head)
	}
	if branches := git(t, remote, "for-each-ref", "--format=%(refname)", "refs/heads"); strings.Count(branches, "\n") != 1 {
		t.Errorf("branches of the remote:\n%s", branches)
	}
	if refs := git(t, remote, "for-each-ref", "--format=%(refname)", "refs/factory/"); strings.Count(refs, "\n")+1 != 7 {
		t.Errorf("order refs of the remote:\n%s", refs)
	}
	// The workflow is deterministic: replayed from its history, whatever
	// order the activities ended in, it makes the same decisions.
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(temporal.Build, workflow.RegisterOptions{Name: temporal.WorkflowName})
	if err := replayer.ReplayWorkflowHistory(nil, workflowHistory(t, addr, res.WorkflowID)); err != nil {
		t.Errorf("replaying the workflow's history: %v", err)
	}
}

// workflowHistory is the workflow's history, as a replayer takes it.
func workflowHistory(t *testing.T, addr, id string) *historypb.History {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// -j 2 on Temporal when beta1 (WO-03) fails (--repair off): beta2, which
// depends on it, is never sent to the model; the passed orders are
// integrated in plan order; the build exits 1 naming WO-03. Submitted again, the orders on
// the branch are not asked again and the build passes.
func TestTemporalBuildParallelFailureThenResume(t *testing.T) {
	addr := startTemporal(t)
	f := newBuildFixture(t, chainPlan(""))
	url, remote := bareRemote(t, f.repo)
	replies := chainReplies()
	good := replies["WO-03"]
	replies["WO-03"] = []llmtest.Reply{{Content: llmtest.Proposal("beta",
		llmtest.Write{Path: "beta.py", BaseSHA256: sha(""), Content: "def beta1():\n    return 0\n"},
		llmtest.Write{Path: "tests/test_beta1.py", BaseSHA256: sha(""), Content: chainTest("beta", 1)})}}
	routes := newRoutes(replies)
	for _, id := range []string{"worker-a", "worker-b"} {
		startWorker(t, addr, id, []string{"OPENAI_API_KEY=k"}, "--llm-base-url", llmtest.StartRouted(t, routes.route).URL)
	}
	args := temporalBuildArgs(addr, url, f, "-j", "2", "--repair", "off")
	res := runFactory(t, gitEnv(t.TempDir()), args...)
	if res.code != ExitFail || !strings.Contains(res.stdout, "verdict: FAIL") || !strings.Contains(res.stdout, "WO-03") {
		t.Fatalf("exit %d, want %d naming WO-03\nstdout:\n%s\nstderr:\n%s", res.code, ExitFail, res.stdout, res.stderr)
	}
	if n := routes.count("WO-06"); n != 0 {
		t.Errorf("WO-06 (depends on the failed WO-03) asked %d times", n)
	}
	base := git(t, f.repo, "rev-parse", "HEAD")
	var subjects []string
	for _, l := range firstParentTrees(t, remoteBranch(t, remote, "factory/"+planHashOf(t, f)), base) {
		subjects = append(subjects, strings.Fields(l)[1])
	}
	// WO-02 ran beside WO-03; whether WO-04, WO-05 and WO-07 started
	// before WO-03 failed is a matter of timing.
	if !slices.IsSorted(subjects) || len(subjects) < 2 || !slices.Equal(subjects[:2], []string{"WO-01", "WO-02"}) ||
		slices.Contains(subjects, "WO-03") || slices.Contains(subjects, "WO-06") {
		t.Errorf("integrated %v, want WO-01, WO-02 and perhaps WO-04, WO-05, WO-07", subjects)
	}

	before := map[string]int{}
	for id := range chainReplies() {
		before[id] = routes.count(id)
	}
	routes.mu.Lock()
	routes.replies["WO-03"] = good
	routes.mu.Unlock()
	res = runFactory(t, gitEnv(t.TempDir()), args...)
	if res.code != ExitPass {
		t.Fatalf("resume: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for id := range chainReplies() {
		want := 1
		if slices.Contains(subjects, id) {
			want = 0
		}
		if n := routes.count(id) - before[id]; n != want {
			t.Errorf("the resumed build asked for %s %d times, want %d", id, n, want)
		}
	}
	clone := remoteBranch(t, remote, "factory/"+planHashOf(t, f))
	if got := git(t, clone, "show", "HEAD:beta.py"); got+"\n" != chainModule("beta", 2) {
		t.Errorf("beta.py = %q", got)
	}
	if n := len(firstParentTrees(t, clone, base)); n != 7 {
		t.Errorf("%d commits on the branch, want 7", n)
	}
}

// A build on a worker whose WO-02 cannot pass (repair_e2e_test.go's
// plan): WO-02 fails, the Repair activity asks the planner with the
// prompt a local build sends, byte for byte, records the repair in the
// worker's build directory as a local build does, and the workflow goes
// on with WO-02r1 and WO-03; the remote's branch keeps WO-01's commit
// and has WO-02r1's with its Factory-Repair trailer. The history replays.
func TestTemporalBuildRepair(t *testing.T) {
	addr := startTemporal(t)
	ses := []llmtest.Reply{replyWO01, replyWO02, replyWO02, replyWO02, replyWO03}
	local := newBuildFixture(t, typoPlan())
	localPlanner, _, localURL := repairServers(t, []llmtest.ResponsesReply{repairReply(nil)}, ses...)
	if res := local.build(t, localURL, "--poll-interval", "10ms"); res.code != ExitPass {
		t.Fatalf("local build: exit %d\n%s", res.code, res.stderr)
	}

	f := newBuildFixture(t, typoPlan())
	base := git(t, f.repo, "rev-parse", "HEAD")
	url, remote := bareRemote(t, f.repo)
	planner, se, srvURL := repairServers(t, []llmtest.ResponsesReply{repairReply(nil)}, ses...)
	w := startWorker(t, addr, "worker-a", []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srvURL)
	s := submit(t, nil, temporalBuildArgs(addr, url, f, "--json", "--max-attempts", "3")...)
	if code := s.wait(t, 3*time.Minute); code != ExitPass {
		t.Fatalf("exit %d\n%s%s", code, s.stdout.String(), s.stderr.String())
	}
	if planner.Remaining() != 0 || se.Remaining() != 0 {
		t.Errorf("replies left: planner %d, se %d", planner.Remaining(), se.Remaining())
	}
	var res temporal.BuildResult
	if err := json.Unmarshal([]byte(s.stdout.String()), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, s.stdout.String())
	}
	if got := outcomesOf(res); res.Verdict != builder.VerdictPass || !slices.Equal(got, []string{"WO-01:passed", "WO-02r1:passed", "WO-03:passed"}) ||
		len(res.Repairs) != 1 || res.Repairs[0].Outcome != builder.RepairApplied {
		t.Fatalf("result: %v %+v", got, res)
	}
	for _, want := range []string{"WO-02: FAIL at acceptance_failed", "build: repair 1 (WO-02 failed at acceptance_failed): removed WO-02; added WO-02r1",
		"PASS after 1 repair, 3 work orders committed"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("the submitter's progress lacks %q:\n%s", want, s.stderr.String())
		}
	}
	if got, want := promptOf(planner.Requests()[0]), promptOf(localPlanner.Requests()[0]); got != want {
		t.Errorf("the worker's repair prompt differs from the local build's:\n%s\n---\n%s", got, want)
	}
	hist := historyOf(t, remoteBranch(t, remote, res.Branch), base)
	if len(hist) != 3 || !strings.Contains(hist[1], "factory: WO-02r1 multiply()") || !strings.Contains(hist[1], "Factory-Repair: 1") ||
		strings.Contains(hist[0], "Factory-Repair") || strings.Contains(hist[2], "Factory-Repair") {
		t.Errorf("history:\n%s", strings.Join(hist, "\n"))
	}
	// Recorded as a local build records it, for status and serve to read.
	buildDir := filepath.Join(w.workDir, "out", res.WorkflowID, "builds", res.PlanHash)
	records, pending, err := builder.ReadRepairs(buildDir)
	if err != nil || pending != 0 || len(records) != 1 || records[0].Dir != filepath.Join(buildDir, "repairs", "1") || records[0].Added[0] != "WO-02r1" {
		t.Errorf("the worker's repairs: %v, pending %d, %+v", err, pending, records)
	}
	for _, name := range []string{"request.json", "plan_before.json", "prompt_attempt_1.txt", "plan_after.json", "diff.txt"} {
		if !exists(filepath.Join(buildDir, "repairs", "1", name)) {
			t.Errorf("repairs/1/%s is missing", name)
		}
	}
	if got := repairEvents(events(t, buildDir)); !slices.Equal(got, []string{"repair_started", "repair_applied"}) {
		t.Errorf("repair events %v", got)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(temporal.Build, workflow.RegisterOptions{Name: temporal.WorkflowName})
	if err := replayer.ReplayWorkflowHistory(nil, workflowHistory(t, addr, res.WorkflowID)); err != nil {
		t.Errorf("replaying the workflow's history: %v", err)
	}
}

func outcomesOf(res temporal.BuildResult) []string {
	var out []string
	for _, wo := range res.WorkOrders {
		out = append(out, wo.ID+":"+wo.Outcome)
	}
	return out
}
