package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/mcp"
)

// mcpClient is a session of the official Go SDK's client with a real
// `factory mcp` process over stdio, and the progress notifications it got.
type mcpClient struct {
	sess *sdk.ClientSession
	cmd  *exec.Cmd

	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
}

// startMCP starts `factory mcp` with the environment env (added to the
// test's) and args, and connects to it.
func startMCP(t *testing.T, env []string, args ...string) *mcpClient {
	t.Helper()
	c := &mcpClient{}
	client := sdk.NewClient(&sdk.Implementation{Name: "factory-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
		},
	})
	c.cmd = factoryCmd(t, env, append([]string{"mcp"}, args...)...)
	c.cmd.Stderr = &syncBuffer{}
	// A long grace: closing stdin alone must end the server (and its build).
	sess, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: c.cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		t.Fatalf("connect to factory mcp: %v", err)
	}
	c.sess = sess
	t.Cleanup(func() { sess.Close() })
	return c
}

func (c *mcpClient) stderr() string { return c.cmd.Stderr.(*syncBuffer).String() }

// call calls a tool and decodes its structured content into out (if not
// nil); it fails the test on a protocol error, not on an error result.
func (c *mcpClient) call(t *testing.T, name string, args any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := c.sess.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\nserver stderr:\n%s", name, err, c.stderr())
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s structured content: %v\n%s", name, err, b)
		}
	}
	return res
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpRoots are --root flags for the fixture's repository, out dir and plan.
func mcpRoots(f *buildFixture) []string {
	return []string{"--root", filepath.Dir(f.repo), "--root", filepath.Dir(f.out), "--root", f.plan}
}

func TestMCPToolsListSchemas(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	c := startMCP(t, nil, mcpRoots(f)...)
	if got := c.sess.InitializeResult().ServerInfo; got.Name != "factory" || got.Version == "" {
		t.Errorf("server info %+v", got)
	}
	list, err := c.sess.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	forgeArgs := []string{"base", "draft", "forge", "forge_api", "forge_repo", "remote", "reopen"}
	want := map[string]struct{ required, optional []string }{
		mcp.ToolValidate: {[]string{"plan_dir"}, []string{"repo"}},
		mcp.ToolPlan:     {[]string{"llm_model", "out", "spec"}, []string{"llm_base_url", "no_review", "overwrite", "repo"}},
		mcp.ToolBuild: {[]string{"llm_model", "out", "repo"},
			[]string{"branch", "jobs", "llm_base_url", "max_cost_usd", "max_repairs", "max_tokens", "no_review", "plan_dir", "repair", "spec"}},
		mcp.ToolStatus: {[]string{"repo"}, nil},
		mcp.ToolPR:     {[]string{"repo"}, append([]string{"build"}, forgeArgs...)},
		mcp.ToolIssue: {[]string{"issue", "llm_model", "out", "repo"},
			append([]string{"branch", "jobs", "llm_base_url", "max_cost_usd", "max_tokens", "no_review"}, forgeArgs...)},
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too thin for an agent to act on: %q", tool.Name, tool.Description)
		}
		var schema struct {
			Type                 string                    `json:"type"`
			Required             []string                  `json:"required"`
			Properties           map[string]map[string]any `json:"properties"`
			AdditionalProperties any                       `json:"additionalProperties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		slices.Sort(schema.Required)
		if schema.Type != "object" || !slices.Equal(schema.Required, w.required) {
			t.Errorf("%s: type %q, required %v; want object, %v", tool.Name, schema.Type, schema.Required, w.required)
		}
		var props []string
		for name, p := range schema.Properties {
			props = append(props, name)
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", tool.Name, name)
			}
			if strings.Contains(name, "key") || strings.Contains(name, "token") && name != "max_tokens" {
				t.Errorf("%s takes %s: keys come from the server's environment only", tool.Name, name)
			}
		}
		slices.Sort(props)
		if all := slices.Sorted(slices.Values(append(slices.Clone(w.required), w.optional...))); !slices.Equal(props, all) {
			t.Errorf("%s properties %v, want %v", tool.Name, props, all)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{mcp.ToolBuild, mcp.ToolIssue, mcp.ToolPlan, mcp.ToolPR, mcp.ToolStatus, mcp.ToolValidate}) {
		t.Errorf("tools %v", names)
	}
}

func TestMCPValidateGoodAndBadPlan(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	bad := buildPlan("")
	wo2 := bad["work_orders"].([]any)[1].(map[string]any)
	wo2["allowed_files"] = []string{"calc.py"} // its postcondition's test file is no longer allowed
	badPlan := newBuildFixture(t, bad).plan
	c := startMCP(t, nil, append(mcpRoots(f), "--root", badPlan)...)

	var good mcp.ValidateResult
	res := c.call(t, mcp.ToolValidate, map[string]any{"plan_dir": f.plan, "repo": f.repo}, &good)
	if res.IsError || !good.Valid || len(good.Errors) != 0 || !strings.Contains(resultText(res), "valid") {
		t.Errorf("good plan: %+v\n%s", good, resultText(res))
	}
	var got mcp.ValidateResult
	res = c.call(t, mcp.ToolValidate, map[string]any{"plan_dir": badPlan, "repo": f.repo}, &got)
	if res.IsError {
		t.Fatalf("a plan with errors must be a normal result: %s", resultText(res))
	}
	if got.Valid || len(got.Errors) == 0 || !strings.Contains(resultText(res), "INVALID") {
		t.Fatalf("bad plan: %+v\n%s", got, resultText(res))
	}
	e := got.Errors[0]
	if e.Code == "" || e.WOID != "WO-02" || e.Message == "" {
		t.Errorf("error %+v: want code, wo_id WO-02 and a message", e)
	}
	// Without repo: the checks that need it are skipped, and it says so.
	res = c.call(t, mcp.ToolValidate, map[string]any{"plan_dir": f.plan}, &good)
	if !good.Valid || len(good.Notes) == 0 || !strings.Contains(good.Notes[0], "skipped") {
		t.Errorf("without repo: %+v", good)
	}
}

func TestMCPBuildWithProgressThenStatus(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	const key = "sk-test-AAAAAAAAAAAAAAAAAAAAAAAA"
	c := startMCP(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY="+key), mcpRoots(f)...)
	mainBefore := git(t, f.repo, "rev-parse", "main")

	params := &sdk.CallToolParams{Name: mcp.ToolBuild, Arguments: map[string]any{
		"repo": f.repo, "out": f.out, "plan_dir": f.plan, "llm_model": "test-model", "llm_base_url": srv.URL,
	}}
	params.SetProgressToken("build-1")
	res, err := c.sess.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, c.stderr())
	}
	if res.IsError {
		t.Fatalf("build error result: %s\n%s", resultText(res), c.stderr())
	}
	var sum builder.Summary
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != builder.VerdictPass || len(sum.WorkOrders) != 3 || sum.Tokens == 0 || sum.Branch != "factory/"+sum.PlanHash {
		t.Fatalf("summary %+v", sum)
	}
	for _, w := range sum.WorkOrders {
		if w.Outcome != builder.OutcomePassed || len(w.Commit) != 40 {
			t.Errorf("work order %+v", w)
		}
	}
	if text := resultText(res); !strings.Contains(text, "verdict: PASS") || strings.Contains(text, key) || strings.Contains(string(b), key) {
		t.Errorf("result text:\n%s", text)
	}
	checkCommits(t, f.repo, mainBefore, committed)
	checkClean(t, f.repo)

	// Progress: one notification per work order event, for this request,
	// increasing, ending with each order's commit.
	c.mu.Lock()
	progress := slices.Clone(c.progress)
	c.mu.Unlock()
	var msgs []string
	last := 0.0
	for _, p := range progress {
		if p.ProgressToken != "build-1" || p.Progress <= last {
			t.Errorf("notification %+v (after progress %v)", p, last)
		}
		last = p.Progress
		msgs = append(msgs, p.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"WO-01 (1/3)", "running python3 -m unittest", "WO-03 (3/3) subtract(): PASS, committed " + sum.WorkOrders[2].Commit[:12]} {
		if !strings.Contains(all, want) {
			t.Errorf("progress lacks %q:\n%s", want, all)
		}
	}
	if len(progress) < 9 {
		t.Errorf("%d progress notifications, want at least 3 per work order:\n%s", len(progress), all)
	}

	var st builder.Status
	res = c.call(t, mcp.ToolStatus, map[string]any{"repo": f.repo}, &st)
	if res.IsError || !st.Complete || !slices.Equal(outcomes(st), []string{"WO-01:passed:", "WO-02:passed:", "WO-03:passed:"}) {
		t.Errorf("status: %+v\n%s", st, resultText(res))
	}
	// status --json says the same.
	if cli := f.status(t); !slices.Equal(outcomes(cli), outcomes(st)) || cli.PlanHash != st.PlanHash {
		t.Errorf("factory status --json %+v, MCP %+v", cli, st)
	}
}

func TestMCPRefusesPathsOutsideRoots(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	outside := t.TempDir() // not a root
	root := filepath.Dir(f.out)
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	c := startMCP(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=test-key"), mcpRoots(f)...)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{mcp.ToolBuild, map[string]any{"repo": filepath.Join(outside, "repo"), "out": f.out, "plan_dir": f.plan, "llm_model": "m"}},
		{mcp.ToolBuild, map[string]any{"repo": filepath.Join(root, "escape", "repo"), "out": f.out, "plan_dir": f.plan, "llm_model": "m"}},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": filepath.Join(root, "escape", "out"), "plan_dir": f.plan, "llm_model": "m"}},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": filepath.Join(root, "..", filepath.Base(outside), "out"), "plan_dir": f.plan, "llm_model": "m"}},
		{mcp.ToolPlan, map[string]any{"spec": "/etc/hostname", "out": filepath.Join(outside, "plan"), "llm_model": "m"}},
		{mcp.ToolPlan, map[string]any{"spec": filepath.Join(f.plan, "WO-01.json"), "out": filepath.Join(root, "escape", "plan"), "llm_model": "m"}},
		{mcp.ToolValidate, map[string]any{"plan_dir": f.plan, "repo": outside}},
		{mcp.ToolStatus, map[string]any{"repo": filepath.Join(root, "escape")}},
	} {
		res := c.call(t, tc.tool, tc.args, nil)
		if !res.IsError || !strings.Contains(resultText(res), mcp.RootRule) {
			t.Errorf("%s %v: want an error result naming the rule, got %s", tc.tool, tc.args, resultText(res))
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("created outside the roots: %v", entries)
	}
	if _, err := os.Stat(f.out); !os.IsNotExist(err) {
		t.Errorf("out dir created by a refused call: %v", err)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

func TestMCPBadArgumentsThenGoodCall(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	c := startMCP(t, []string{"OPENAI_API_KEY="}, mcpRoots(f)...)
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{mcp.ToolStatus, map[string]any{"repo": 42}, "repo"},
		{mcp.ToolStatus, map[string]any{}, "repo"},
		{mcp.ToolValidate, map[string]any{"plan_dir": f.plan, "colour": "red"}, "colour"},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m"}, "give spec"},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m", "plan_dir": f.plan, "spec": f.plan}, "cannot be used together"},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m", "plan_dir": f.plan, "jobs": 4}, "one at a time"},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m", "plan_dir": f.plan, "branch": "main"}, "never works on main"},
		{mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "anthropic:", "plan_dir": f.plan}, "names no model"},
		{mcp.ToolStatus, map[string]any{"repo": f.repo}, "no factory build has run"},
	} {
		res := c.call(t, tc.tool, tc.args, nil)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s %v: want an error result with %q, got %s", tc.tool, tc.args, tc.want, resultText(res))
		}
	}
	// An unknown tool is a JSON-RPC error; the session goes on.
	if _, err := c.sess.CallTool(context.Background(), &sdk.CallToolParams{Name: "factory_nope"}); err == nil {
		t.Error("unknown tool accepted")
	}
	var v mcp.ValidateResult
	if res := c.call(t, mcp.ToolValidate, map[string]any{"plan_dir": f.plan, "repo": f.repo}, &v); res.IsError || !v.Valid {
		t.Errorf("good call after bad ones: %s", resultText(res))
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if _, err := os.Stat(f.out); !os.IsNotExist(err) {
		t.Errorf("out dir created by a refused call: %v", err)
	}
}

func TestMCPBuildKeyOnlyFromServerEnvironment(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	c := startMCP(t, []string{"OPENAI_API_KEY="}, mcpRoots(f)...)
	res := c.call(t, mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m", "plan_dir": f.plan}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "OPENAI_API_KEY is not set") || !strings.Contains(resultText(res), "server's environment") {
		t.Errorf("without a key: %s", resultText(res))
	}
	// An argument cannot carry one.
	res = c.call(t, mcp.ToolBuild, map[string]any{"repo": f.repo, "out": f.out, "llm_model": "m", "plan_dir": f.plan, "openai_api_key": "sk-x"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "openai_api_key") {
		t.Errorf("key as an argument: %s", resultText(res))
	}
	if _, err := os.Stat(f.out); !os.IsNotExist(err) {
		t.Errorf("out dir created by a refused call: %v", err)
	}
}

func TestMCPClientDisconnectDuringBuild(t *testing.T) {
	f := newSlowBuildFixture(t)
	srv := llmtest.Start(t, replyWO01, replyWO02)
	env := append(gitEnv(t.TempDir()), "OPENAI_API_KEY=test-key")
	// The client's own pipes, so that it can vanish as a killed agent does:
	// the SDK client's Close waits for calls in flight first.
	cmd := factoryCmd(t, env, append([]string{"mcp"}, mcpRoots(f)...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	client := sdk.NewClient(&sdk.Implementation{Name: "factory-test", Version: "1"}, nil)
	sess, err := client.Connect(context.Background(), &sdk.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mainBefore := git(t, f.repo, "rev-parse", "main")
	callDone := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolBuild, Arguments: map[string]any{
			"repo": f.repo, "out": f.out, "plan_dir": f.plan, "llm_model": "test-model", "llm_base_url": srv.URL,
		}})
		callDone <- err
	}()
	// WO-01 is committed and WO-02's acceptance command waits.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(f.repo, startedFile)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("WO-02 never started\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client goes away: its end of both pipes closes. The server must
	// cancel the build, roll back and exit on its own, without a signal.
	start := time.Now()
	stdin.Close()
	stdout.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("factory mcp exited with %v after the client went away\n%s", err, stderr)
		}
	case <-time.After(50 * time.Second):
		t.Fatalf("factory mcp still runs %v after the client went away\n%s", time.Since(start), stderr)
	}
	if err := <-callDone; err == nil {
		t.Error("the call returned a result after the client went away")
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("server stderr does not say the build was interrupted:\n%s", stderr)
	}
	// Clean and resumable: WO-01's commit, nothing of WO-02, no lock.
	checkClean(t, f.repo)
	if got := len(strings.Fields(git(t, f.repo, "log", "--format=%H", mainBefore+"..HEAD"))); got != 1 {
		t.Errorf("%d commits after the disconnect, want WO-01's only", got)
	}
	if st := f.status(t); st.Complete || outcomes(st)[0] != "WO-01:passed:" || st.WorkOrders[1].Outcome == builder.OutcomePassed {
		t.Errorf("status after the disconnect: %v", outcomes(st))
	}
	if exists(filepath.Join(f.repo, ".git", "factory", "journal.json")) {
		t.Errorf("journal left after a disconnect that rolled back")
	}
	// The same build again, from the CLI, resumes at WO-02.
	f.release(t)
	res := f.build(t, llmtest.Start(t, replyWO02, replyWO03).URL)
	if res.code != ExitPass || !strings.Contains(res.stderr, "1 already committed") {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkCommits(t, f.repo, mainBefore, committed)
	checkClean(t, f.repo)
}

func TestVersion(t *testing.T) {
	res := runFactory(t, nil, "--version")
	line := strings.TrimSpace(res.stdout)
	if res.code != ExitPass || !strings.HasPrefix(line, "factory ") || !strings.HasSuffix(line, " "+runtime.GOOS+"/"+runtime.GOARCH) ||
		!strings.Contains(line, " go1.") || strings.Count(res.stdout, "\n") != 1 {
		t.Errorf("factory --version: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	same := runFactory(t, nil, "version")
	if same.code != ExitPass || same.stdout != res.stdout {
		t.Errorf("factory version = %q, --version = %q", same.stdout, res.stdout)
	}
	js := runFactory(t, nil, "version", "--json")
	var info map[string]any
	if err := json.Unmarshal([]byte(js.stdout), &info); err != nil || js.code != ExitPass {
		t.Fatalf("version --json: exit %d, %v\n%s", js.code, err, js.stdout)
	}
	for _, k := range []string{"version", "modified", "go", "platform"} {
		if _, ok := info[k]; !ok {
			t.Errorf("version --json lacks %q: %s", k, js.stdout)
		}
	}
	if info["platform"] != runtime.GOOS+"/"+runtime.GOARCH || !strings.HasPrefix(info["go"].(string), "go1.") ||
		!strings.HasPrefix(line, "factory "+info["version"].(string)) {
		t.Errorf("version --json %s disagrees with %q", js.stdout, line)
	}
	if bad := runFactory(t, nil, "version", "extra"); bad.code != ExitUsage {
		t.Errorf("version extra: exit %d", bad.code)
	}
}

func TestMCPPlanThenValidate(t *testing.T) {
	root := t.TempDir()
	spec := filepath.Join(root, "spec.md")
	writeFiles(t, root, map[string]string{"spec.md": "A calculator module with add and multiply.\n"})
	srv := llmtest.StartResponses(t, done(validPlan(t)))
	c := startMCP(t, []string{"OPENAI_API_KEY=test-key"}, "--root", root)
	var plan mcp.PlanResult
	res := c.call(t, mcp.ToolPlan, map[string]any{"spec": "spec.md", "out": "plan", "llm_model": "planner-model",
		"llm_base_url": srv.URL, "no_review": true}, &plan)
	if res.IsError {
		t.Fatalf("plan: %s\n%s", resultText(res), c.stderr())
	}
	if plan.PlanDir != filepath.Join(root, "plan") || len(plan.WorkOrders) == 0 || plan.CompileHash == "" || plan.WorkOrders[0].ID != "WO-01" {
		t.Errorf("plan result %+v", plan)
	}
	for _, wo := range plan.WorkOrders {
		if _, err := os.Stat(wo.File); err != nil {
			t.Errorf("%s: %v", wo.ID, err)
		}
	}
	if srv.Remaining() != 0 || !strings.Contains(resultText(res), "factory_build with plan_dir="+plan.PlanDir) {
		t.Errorf("replies left %d; text:\n%s", srv.Remaining(), resultText(res))
	}
	var v mcp.ValidateResult
	if res := c.call(t, mcp.ToolValidate, map[string]any{"plan_dir": plan.PlanDir}, &v); res.IsError || !v.Valid {
		t.Errorf("validate the written plan: %s", resultText(res))
	}
	// Again into the same out: refused, as factory plan refuses, before any model call.
	res = c.call(t, mcp.ToolPlan, map[string]any{"spec": spec, "out": plan.PlanDir, "llm_model": "planner-model", "llm_base_url": srv.URL}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "overwrite") {
		t.Errorf("second plan into the same out: %s", resultText(res))
	}
}

func TestMCPHTTPWithToken(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFiles(t, filepath.Dir(tokenFile), map[string]string{"token": "s3cret-token-value\n"})
	cmd := factoryCmd(t, nil, append([]string{"mcp", "--http", "127.0.0.1:0", "--token-file", tokenFile}, mcpRoots(f)...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &syncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	line := make([]byte, 0, 100)
	for buf := make([]byte, 1); !strings.HasSuffix(string(line), "\n"); {
		if _, err := stdout.Read(buf); err != nil {
			t.Fatalf("reading the URL: %v\n%s", err, cmd.Stderr)
		}
		line = append(line, buf[0])
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "serving ")
	if !ok || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("first line %q", line)
	}
	connect := func(token string) (*sdk.ClientSession, error) {
		client := sdk.NewClient(&sdk.Implementation{Name: "factory-test", Version: "1"}, nil)
		hc := &http.Client{Transport: bearer{token}}
		return client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	}
	if sess, err := connect("wrong"); err == nil {
		sess.Close()
		t.Error("connected with a wrong token")
	}
	sess, err := connect("s3cret-token-value")
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolValidate, Arguments: map[string]any{"plan_dir": f.plan, "repo": f.repo}})
	if err != nil || res.IsError {
		t.Fatalf("validate over HTTP: %v %+v", err, res)
	}
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A client that cancels the build call (notifications/cancelled) gets the
// Ctrl-C treatment too, and the same session resumes the build.
func TestMCPCancelledBuildResumesOnTheSameSession(t *testing.T) {
	f := newSlowBuildFixture(t)
	srv := llmtest.Start(t, replyWO01, replyWO02, replyWO02, replyWO03)
	c := startMCP(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=test-key"), mcpRoots(f)...)
	mainBefore := git(t, f.repo, "rev-parse", "main")
	args := map[string]any{"repo": f.repo, "out": f.out, "plan_dir": f.plan, "llm_model": "test-model", "llm_base_url": srv.URL}
	ctx, cancel := context.WithCancel(context.Background())
	callDone := make(chan error, 1)
	go func() {
		_, err := c.sess.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ToolBuild, Arguments: args})
		callDone <- err
	}()
	waitFor(t, "WO-02's slow command", func() bool { return exists(filepath.Join(f.repo, startedFile)) })
	cancel()
	if err := <-callDone; err == nil {
		t.Error("a cancelled call returned a result")
	}
	f.release(t)
	// The cancelled build rolls back and lets go of the repository; then the
	// same call resumes it.
	deadline := time.Now().Add(time.Minute)
	for {
		var sum builder.Summary
		res := c.call(t, mcp.ToolBuild, args, &sum)
		if res.IsError && strings.Contains(resultText(res), "lock") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if res.IsError || sum.Verdict != builder.VerdictPass {
			t.Fatalf("resumed build: %s\n%s", resultText(res), c.stderr())
		}
		break
	}
	if !strings.Contains(c.stderr(), "cancelled the call") {
		t.Errorf("server log does not say the call was cancelled:\n%s", c.stderr())
	}
	checkCommits(t, f.repo, mainBefore, committed)
	checkClean(t, f.repo)
}

func TestMCPUsage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	writeFiles(t, filepath.Dir(file), map[string]string{"f": "x"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "give at least one --root DIR"},
		{[]string{"mcp", "--root", file}, "is not a directory"},
		{[]string{"mcp", "--root", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"mcp", "--root", t.TempDir(), "--token-file", file}, "--token-file needs --http"},
		{[]string{"mcp", "--root", t.TempDir(), "--sandbox", "maybe"}, "--sandbox"},
	} {
		res := runFactory(t, nil, tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.want) || res.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 with %q", tc.args, res.code, res.stdout, res.stderr, tc.want)
		}
	}
}
