package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/planner"
)

// The build tests' product: a calculator library in three work orders.
const (
	bVerify   = "set -e\npython3 -m unittest discover -s tests -q\n"
	bCalcAdd  = "def add(a, b):\n    return a + b\n"
	bTestAdd  = "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
	bCalcMul  = bCalcAdd + "\n\ndef multiply(a, b):\n    return a * b\n"
	bCalcMulX = bCalcAdd + "\n\ndef multiply(a, b):\n    return a + b\n" // wrong
	bTestMul  = "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_multiply(self):\n        self.assertEqual(calc.multiply(3, 4), 12)\n"
	bCalcSub  = bCalcMul + "\n\ndef subtract(a, b):\n    return a - b\n"
	bTestSub  = "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_subtract(self):\n        self.assertEqual(calc.subtract(7, 4), 3)\n"
)

func cond(kind, path string) map[string]string { return map[string]string{"kind": kind, "path": path} }

// buildPlan is a valid three-order plan. With release set, WO-02's first
// acceptance command waits until that file exists (for the kill tests).
// Confined commands see the host's /tmp only in the work tree, where a
// rollback would remove the file, and in the git directory: release is
// relative to the repository, in .git.
func buildPlan(release string) map[string]any {
	accept2 := []string{"python3 -m unittest tests.test_multiply -q"}
	if release != "" {
		accept2 = append([]string{waitCommand(release, "")}, accept2...)
	}
	return map[string]any{
		"verify_contract": map[string]any{
			"command":  "bash scripts/verify.sh",
			"requires": []any{cond("file_exists", "scripts/verify.sh"), cond("file_exists", "tests/__init__.py")},
		},
		"work_orders": []any{
			map[string]any{
				"id": "WO-01", "title": "Skeleton and add()", "intent": "Create calc.add, its test and scripts/verify.sh.",
				"preconditions":       []any{cond("file_absent", "calc.py"), cond("file_absent", "scripts/verify.sh")},
				"postconditions":      []any{cond("file_exists", "scripts/verify.sh"), cond("file_exists", "tests/__init__.py"), cond("file_exists", "tests/test_add.py"), cond("file_exists", "calc.py")},
				"allowed_files":       []string{"scripts/verify.sh", "tests/__init__.py", "tests/test_add.py", "calc.py"},
				"forbidden":           []string{},
				"acceptance_commands": []string{"python3 -m unittest tests.test_add -q"},
				"context_files":       []string{"scripts/verify.sh", "tests/__init__.py", "tests/test_add.py", "calc.py"},
			},
			map[string]any{
				"id": "WO-02", "title": "multiply()", "intent": "Add calc.multiply with a test.",
				"preconditions":       []any{cond("file_exists", "calc.py")},
				"postconditions":      []any{cond("file_exists", "calc.py"), cond("file_exists", "tests/test_multiply.py")},
				"allowed_files":       []string{"calc.py", "tests/test_multiply.py"},
				"forbidden":           []string{"scripts/verify.sh"},
				"acceptance_commands": accept2,
				"context_files":       []string{"calc.py", "tests/test_multiply.py"},
			},
			map[string]any{
				"id": "WO-03", "title": "subtract()", "intent": "Add calc.subtract with a test.",
				"preconditions":       []any{cond("file_exists", "calc.py")},
				"postconditions":      []any{cond("file_exists", "calc.py"), cond("file_exists", "tests/test_subtract.py")},
				"allowed_files":       []string{"calc.py", "tests/test_subtract.py"},
				"forbidden":           []string{"scripts/verify.sh"},
				"acceptance_commands": []string{"python3 -m unittest tests.test_subtract -q"},
				"context_files":       []string{"calc.py", "tests/test_subtract.py"},
			},
		},
	}
}

// The model's replies, one per work order.
var (
	replyWO01 = llmtest.Reply{Content: llmtest.Proposal("skeleton",
		llmtest.Write{Path: "scripts/verify.sh", BaseSHA256: sha(""), Content: bVerify},
		llmtest.Write{Path: "tests/__init__.py", BaseSHA256: sha(""), Content: ""},
		llmtest.Write{Path: "tests/test_add.py", BaseSHA256: sha(""), Content: bTestAdd},
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(""), Content: bCalcAdd})}
	replyWO02 = llmtest.Reply{Content: llmtest.Proposal("multiply",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(bCalcAdd), Content: bCalcMul},
		llmtest.Write{Path: "tests/test_multiply.py", BaseSHA256: sha(""), Content: bTestMul})}
	replyWO02Bad = llmtest.Reply{Content: llmtest.Proposal("multiply",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(bCalcAdd), Content: bCalcMulX},
		llmtest.Write{Path: "tests/test_multiply.py", BaseSHA256: sha(""), Content: bTestMul})}
	replyWO03 = llmtest.Reply{Content: llmtest.Proposal("subtract",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(bCalcMul), Content: bCalcSub},
		llmtest.Write{Path: "tests/test_subtract.py", BaseSHA256: sha(""), Content: bTestSub})}
)

type buildFixture struct {
	repo, out, plan string
	baseline        map[string]string
}

// newBuildFixture makes a repository with a README, a .gitignore and
// ignored user files (.env, .venv/) every step must keep, and writes plan.
func newBuildFixture(t *testing.T, plan map[string]any) *buildFixture {
	t.Helper()
	f := &buildFixture{
		repo: newRepo(t, map[string]string{"README.md": "calc\n", ".gitignore": ".env\n.venv/\n__pycache__/\n"}),
		out:  filepath.Join(t.TempDir(), "out"),
		plan: filepath.Join(t.TempDir(), "plan"),
	}
	writeFiles(t, f.repo, map[string]string{".env": "SECRET=1\n", ".venv/bin/activate": "# venv\n"})
	if err := os.MkdirAll(f.plan, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, wo := range plan["work_orders"].([]any) {
		m := wo.(map[string]any)
		data, _ := json.MarshalIndent(m, "", "  ")
		writeFiles(t, f.plan, map[string]string{m["id"].(string) + ".json": string(data)})
	}
	manifest, _ := json.MarshalIndent(plan, "", "  ")
	writeFiles(t, f.plan, map[string]string{"WORK_ORDERS_MANIFEST.json": string(manifest)})
	f.baseline = treeSnapshot(t, f.repo)
	return f
}

// newSlowBuildFixture is newBuildFixture with a plan whose WO-02 waits
// for f.release.
func newSlowBuildFixture(t *testing.T) *buildFixture {
	return newBuildFixture(t, buildPlan(releaseFile))
}

// waitCommand is WO-02's slow acceptance command: it marks that it runs, then waits for the
// release file. Python statements in first run before that.
func waitCommand(release, first string) string {
	return `python3 -c "import os, subprocess, time; ` + first + `open('` + startedFile + `', 'w').close(); [time.sleep(0.05) for _ in iter(lambda: os.path.exists('` + release + `'), True)]"`
}

// newLeftoverBuildFixture is newSlowBuildFixture whose slow command first starts a child in its
// process group, as a test runner's server would. Unconfined, killed with factory, the command dies
// (its parent-death signal) but the child lives on, so a recovery always finds the group alive and
// must kill it. (Without the child, whether the dead command was still an unreaped zombie when
// recovery looked was a race with PID 1.) Confined, both die with factory (their PID namespace).
func newLeftoverBuildFixture(t *testing.T) *buildFixture {
	plan := buildPlan(releaseFile)
	wo02 := plan["work_orders"].([]any)[1].(map[string]any)
	wo02["acceptance_commands"].([]string)[0] = waitCommand(releaseFile, "subprocess.Popen(['sleep', '300']); ")
	return newBuildFixture(t, plan)
}

const releaseFile = ".git/test-release"

// startedFile is created in the work tree by the slow command once it
// runs: before that, a confined command is still factory's sandbox init,
// which a kill of factory may take down with it.
const startedFile = "wo02-started"

// release lets the slow plan's WO-02 go on.
func (f *buildFixture) release(t *testing.T) {
	writeFiles(t, f.repo, map[string]string{releaseFile: ""})
}

func (f *buildFixture) args(srvURL string, extra ...string) []string {
	return append([]string{"build", "--plan", f.plan, "--repo", f.repo, "--out", f.out,
		"--llm-model", "test-model", "--llm-base-url", srvURL, "--timeout-seconds", "60", "--max-attempts", "3"}, extra...)
}

func (f *buildFixture) build(t *testing.T, srvURL string, extra ...string) runOut {
	t.Helper()
	return runFactory(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=test-key"), f.args(srvURL, extra...)...)
}

func (f *buildFixture) status(t *testing.T) builder.Status {
	t.Helper()
	res := runFactory(t, nil, "status", "--repo", f.repo, "--json")
	if res.code != ExitPass {
		t.Fatalf("status: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var st builder.Status
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, res.stdout)
	}
	return st
}

func outcomes(st builder.Status) []string {
	var out []string
	for _, w := range st.WorkOrders {
		out = append(out, w.ID+":"+w.Outcome+":"+w.Stage)
	}
	return out
}

// checkCommits checks the build branch holds one commit per passed work
// order, on top of the base, with exactly the files its proposal wrote and
// the trailers resume reads.
func checkCommits(t *testing.T, repo, base string, want map[string][]string) {
	t.Helper()
	log := git(t, repo, "log", "--reverse", "--format=%H", base+"..HEAD")
	commits := strings.Fields(log)
	if len(commits) != len(want) {
		t.Fatalf("commits since base: %d, want %d", len(commits), len(want))
	}
	for i, c := range commits {
		id := []string{"WO-01", "WO-02", "WO-03"}[i]
		subject := git(t, repo, "log", "-1", "--format=%s", c)
		if !strings.HasPrefix(subject, "factory: "+id+" ") {
			t.Errorf("commit %d subject %q", i+1, subject)
		}
		trailers := git(t, repo, "log", "-1", "--format=%(trailers:only,unfold)", c)
		for _, tr := range []string{"Factory-Work-Order: " + id, "Factory-Run-Id: ", "Factory-Plan: "} {
			if !strings.Contains(trailers, tr) {
				t.Errorf("%s commit lacks trailer %q:\n%s", id, tr, trailers)
			}
		}
		files := strings.Fields(git(t, repo, "show", "--name-only", "--format=", c))
		slices.Sort(files)
		if !slices.Equal(files, want[id]) {
			t.Errorf("%s commit holds %v, want %v", id, files, want[id])
		}
	}
}

var committed = map[string][]string{
	"WO-01": {"calc.py", "scripts/verify.sh", "tests/__init__.py", "tests/test_add.py"},
	"WO-02": {"calc.py", "tests/test_multiply.py"},
	"WO-03": {"calc.py", "tests/test_subtract.py"},
}

// checkClean checks nothing is left but the user's ignored files.
func checkClean(t *testing.T, repo string) {
	t.Helper()
	if st := git(t, repo, "status", "--porcelain", "--ignored", "--untracked-files=all"); st != "!! .env\n!! .venv/bin/activate" {
		t.Errorf("work tree not clean:\n%s", st)
	}
	if env, _ := os.ReadFile(filepath.Join(repo, ".env")); string(env) != "SECRET=1\n" {
		t.Errorf(".env = %q", env)
	}
}

func TestBuildAllPass(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	mainBefore := git(t, f.repo, "rev-parse", "main")
	res := f.build(t, srv.URL, "--json")
	if res.code != ExitPass {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, res.stdout)
	}
	if sum.Verdict != builder.VerdictPass || sum.PlanSource != builder.PlanGiven || sum.Branch != "factory/"+sum.PlanHash ||
		len(sum.WorkOrders) != 3 || sum.Tokens == 0 || sum.Repo == "" {
		t.Errorf("summary = %+v", sum)
	}
	for _, w := range sum.WorkOrders {
		if w.Outcome != builder.OutcomePassed || len(w.Commit) != 40 || w.Attempts != 1 {
			t.Errorf("work order %+v", w)
		}
	}
	if got := git(t, f.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved: %s → %s", mainBefore, got)
	}
	if got := git(t, f.repo, "branch", "--show-current"); got != sum.Branch {
		t.Errorf("current branch %q, want %q", got, sum.Branch)
	}
	checkCommits(t, f.repo, mainBefore, committed)
	checkClean(t, f.repo)
	if got := git(t, f.repo, "show", "HEAD:calc.py"); got+"\n" != bCalcSub {
		t.Errorf("calc.py at HEAD = %q", got)
	}
	st := f.status(t)
	if !st.Complete || !slices.Equal(outcomes(st), []string{"WO-01:passed:", "WO-02:passed:", "WO-03:passed:"}) {
		t.Errorf("status after = %+v", st)
	}
	events, err := os.ReadFile(filepath.Join(sum.BuildDir, "events.jsonl"))
	if err != nil || !strings.Contains(string(events), `"event":"build_end"`) || !strings.Contains(string(events), `"node":"po"`) {
		t.Errorf("events.jsonl: %v\n%s", err, events)
	}

	// The same command again: nothing to do, no model call.
	again := f.build(t, srv.URL)
	if again.code != ExitPass || srv.Remaining() != 0 || !strings.Contains(again.stderr, "3 already committed") {
		t.Errorf("second build: exit %d\n%s", again.code, again.stderr)
	}

	// An edited plan is a new build; started from this build's branch, its
	// WO-01 no longer validates, and the note says why.
	plan := buildPlan("")
	plan["work_orders"].([]any)[2].(map[string]any)["title"] = "subtract(), edited"
	f.plan = newBuildFixture(t, plan).plan
	edited := f.build(t, srv.URL)
	if edited.code != ExitFail || !strings.Contains(edited.stderr, "another build's branch") || srv.Remaining() != 0 {
		t.Errorf("edited plan on the old build's branch: exit %d\n%s", edited.code, edited.stderr)
	}
}

func TestBuildFailThenResume(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	// WO-02 fails twice the same way: the third attempt is never asked for.
	srv := llmtest.Start(t, replyWO01, replyWO02Bad, replyWO02Bad, replyWO02)
	base := git(t, f.repo, "rev-parse", "HEAD")
	if before := runFactory(t, nil, "status", "--repo", f.repo); before.code != ExitUsage || !strings.Contains(before.stderr, "no factory build has run") {
		t.Errorf("status before any build: exit %d\n%s", before.code, before.stderr)
	}
	res := f.build(t, srv.URL, "--json", "--repair", "off")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, ExitFail, res.stdout, res.stderr)
	}
	if srv.Remaining() != 1 {
		t.Errorf("%d scripted replies left, want 1 (early stop after two identical failures)", srv.Remaining())
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	wo2 := sum.WorkOrders[1]
	if sum.Verdict != builder.VerdictFail || sum.Failed != "WO-02" || sum.StoppedEarly != "identical failure" ||
		wo2.Outcome != builder.OutcomeFailed || wo2.Stage != "verify_failed" || wo2.Attempts != 2 {
		t.Errorf("summary = %+v", sum)
	}
	if _, err := os.Stat(wo2.BriefPath); err != nil {
		t.Errorf("failure brief: %v", err)
	}
	checkCommits(t, f.repo, base, map[string][]string{"WO-01": committed["WO-01"]})
	checkClean(t, f.repo)
	if got := outcomes(f.status(t)); !slices.Equal(got, []string{"WO-01:passed:", "WO-02:failed:verify_failed", "WO-03:pending:"}) {
		t.Errorf("status after the failure = %v", got)
	}

	fixed := llmtest.Start(t, replyWO02, replyWO03)
	again := f.build(t, fixed.URL)
	if again.code != ExitPass {
		t.Fatalf("resume: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
	if fixed.Remaining() != 0 || !strings.Contains(fixed.UserPrompt(0), "WO-02") {
		t.Errorf("resume did not start at WO-02: first prompt %q", fixed.UserPrompt(0)[:min(200, len(fixed.UserPrompt(0)))])
	}
	checkCommits(t, f.repo, base, committed)
	checkClean(t, f.repo)
}

func TestBuildRefusesMainBranch(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t)
	res := f.build(t, srv.URL, "--branch", "main")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "--branch main") {
		t.Fatalf("exit %d, want %d naming the branch\n%s", res.code, ExitUsage, res.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if _, err := os.Stat(f.out); err == nil {
		t.Errorf("--out was created")
	}
}

func TestBuildCreatesRepository(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	f.repo = filepath.Join(t.TempDir(), "new", "repo")
	srv := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	res := f.build(t, srv.URL)
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	root := git(t, f.repo, "rev-list", "--max-parents=0", "HEAD")
	if files := git(t, f.repo, "show", "--name-only", "--format=", root); files != "" {
		t.Errorf("initial commit holds %q, want nothing", files)
	}
	checkCommits(t, f.repo, root, committed)

	// Planning fails on a repository the build made: it is left, and
	// the build says so.
	bad := buildPlan("")
	bad["work_orders"].([]any)[0].(map[string]any)["allowed_files"] = []string{"../outside.py"}
	g := newBuildFixture(t, bad)
	g.repo = filepath.Join(t.TempDir(), "fresh")
	res = g.build(t, srv.URL)
	if res.code != ExitFail || !strings.Contains(res.stderr, "planning failed; the repository "+g.repo+" that this build created is left") {
		t.Errorf("invalid plan on a new repository: exit %d\n%s", res.code, res.stderr)
	}
}

// A factory build killed (SIGKILL) while WO-02's acceptance command runs
// leaves a journal; the next build, or factory recover, restores the tree
// (the ignored .env and .venv/ kept) and the build completes. Meanwhile a
// second build or run is refused.
func TestBuildKilledThenResumes(t *testing.T) {
	for _, via := range []string{"build", "recover"} {
		t.Run(via, func(t *testing.T) {
			f := newLeftoverBuildFixture(t)
			srv := llmtest.Start(t, replyWO01, replyWO02)
			base := git(t, f.repo, "rev-parse", "HEAD")
			first := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(srv.URL)...)
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "WO-02's slow command", func() bool {
				return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && exists(filepath.Join(f.repo, startedFile))
			})
			second := f.build(t, srv.URL)
			if second.code != ExitUsage || !strings.Contains(second.stderr, "is working on this repository") {
				t.Errorf("second build while the first runs: exit %d\n%s", second.code, second.stderr)
			}
			first.Process.Kill()
			first.Wait()

			if via == "recover" {
				rec := runFactory(t, nil, "recover", "--repo", f.repo)
				// Confined in a PID namespace, the command and its child died with the build
				// (TestBuildSIGKILLLeavesNoDaemon); unconfined, recover kills them.
				if rec.code != ExitPass || !strings.Contains(rec.stderr, "killed the command") && !inPIDNamespaces() {
					t.Fatalf("recover: exit %d\n%s%s", rec.code, rec.stdout, rec.stderr)
				}
				checkClean(t, f.repo)
			}
			f.release(t)
			fixed := llmtest.Start(t, replyWO02, replyWO03)
			res := f.build(t, fixed.URL)
			if via == "build" && !strings.Contains(res.stderr, "recovering") {
				t.Errorf("the build did not say it recovered:\n%s", res.stderr)
			}
			if res.code != ExitPass {
				t.Fatalf("build after the kill: exit %d\n%s", res.code, res.stderr)
			}
			checkCommits(t, f.repo, base, committed)
			checkClean(t, f.repo)
		})
	}
}

// TestBuildFromSpec compiles the plan with the planner (Responses API) and
// builds it; the same command again reuses the plan without a model call.
func TestBuildFromSpec(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	planJSON, _ := json.Marshal(buildPlan(""))
	planner := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: string(planJSON)})
	se := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	url := routeByPath(t, map[string]string{"/v1/responses": planner.URL, "/v1/chat/completions": se.URL})
	spec := filepath.Join(t.TempDir(), "spec.md")
	writeFiles(t, filepath.Dir(spec), map[string]string{"spec.md": "# calc\nA calculator library with add, multiply and subtract.\n"})
	args := []string{"build", "--spec", spec, "--repo", f.repo, "--out", f.out, "--llm-model", "test-model",
		"--llm-base-url", url, "--no-review", "--poll-interval", "10ms", "--timeout-seconds", "60"}
	env := append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k")
	res := runFactory(t, env, args...)
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if planner.Remaining() != 0 || se.Remaining() != 0 {
		t.Errorf("unused replies: planner %d, se %d", planner.Remaining(), se.Remaining())
	}
	st := f.status(t)
	if st.PlanSource != builder.PlanCompiled || st.Spec != spec || !st.Complete {
		t.Errorf("status = %+v", st)
	}
	again := runFactory(t, env, args...)
	if again.code != ExitPass || !strings.Contains(again.stderr, "reusing") {
		t.Errorf("second build: exit %d\n%s", again.code, again.stderr)
	}
}

// routeByPath serves one base URL that forwards each path prefix to its
// own scripted server, so planner and SE calls can share --llm-base-url.
func routeByPath(t testing.TB, routes map[string]string) string {
	t.Helper()
	mux := http.NewServeMux()
	for prefix, target := range routes {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
		mux.Handle(prefix, proxy)
		mux.Handle(prefix+"/", proxy)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

// A journal a killed `factory run` left is not the build's to undo: the
// build refuses and points at factory recover.
func TestBuildRefusesJournalOfRun(t *testing.T) {
	plan := buildPlan(releaseFile)
	f := newBuildFixture(t, plan)
	wo := plan["work_orders"].([]any)[1].(map[string]any)
	wo["preconditions"] = []any{}
	wo["allowed_files"] = []string{"tests/test_multiply.py"}
	woPath := filepath.Join(t.TempDir(), "wo.json")
	data, _ := json.Marshal(wo)
	writeFiles(t, filepath.Dir(woPath), map[string]string{"wo.json": string(data)})
	srv := llmtest.Start(t, llmtest.Reply{Content: llmtest.Proposal("t",
		llmtest.Write{Path: "tests/test_multiply.py", BaseSHA256: sha(""), Content: bTestMul})})
	run := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), "run", "--repo", f.repo, "--work-order", woPath,
		"--out", f.out, "--llm-model", "m", "--llm-base-url", srv.URL, "--timeout-seconds", "60",
		"--verify-command", `python3 -c "import time; time.sleep(60)"`)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command to start", func() bool { return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) })
	run.Process.Kill()
	run.Wait()

	res := f.build(t, llmtest.Start(t).URL)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "factory recover --repo") || !strings.Contains(res.stderr, "factory run") {
		t.Fatalf("build over a run's journal: exit %d, want %d pointing at factory recover\n%s", res.code, ExitUsage, res.stderr)
	}
	if rec := runFactory(t, nil, "recover", "--repo", f.repo); rec.code != ExitPass {
		t.Fatalf("recover: exit %d\n%s", rec.code, rec.stderr)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

// Ctrl-C in the middle of a work order rolls it back and exits 3; the
// same command then resumes there.
func TestBuildInterrupted(t *testing.T) {
	f := newSlowBuildFixture(t)
	srv := llmtest.Start(t, replyWO01, replyWO02)
	base := git(t, f.repo, "rev-parse", "HEAD")
	cmd := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(srv.URL)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "WO-02's slow command", func() bool {
		return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && exists(filepath.Join(f.repo, startedFile))
	})
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitInternal {
		t.Fatalf("exit %d (%v), want %d\n%s", code, err, ExitInternal, stderr.String())
	}
	checkCommits(t, f.repo, base, map[string][]string{"WO-01": committed["WO-01"]})
	checkClean(t, f.repo)
	if exists(filepath.Join(f.repo, ".git", "factory", "journal.json")) {
		t.Errorf("journal left after an interrupt that rolled back")
	}
	f.release(t)
	res := f.build(t, llmtest.Start(t, replyWO02, replyWO03).URL)
	if res.code != ExitPass {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	checkCommits(t, f.repo, base, committed)
}

func anthropicReply(r llmtest.Reply) llmtest.AnthropicReply {
	return llmtest.AnthropicReply{Content: r.Content}
}

// A build with an Anthropic model, planner included, end to end: a rate
// limit is retried, and the cost is known from the built-in price table.
func TestBuildAnthropic(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	planJSON, _ := json.Marshal(buildPlan(""))
	srv := llmtest.StartAnthropic(t,
		llmtest.AnthropicReply{Content: string(planJSON)},
		llmtest.AnthropicReply{Status: 429, ErrorType: "rate_limit_error", Message: "slow down", Header: map[string]string{"Retry-After": "0"}},
		anthropicReply(replyWO01), anthropicReply(replyWO02), anthropicReply(replyWO03))
	spec := filepath.Join(t.TempDir(), "spec.md")
	writeFiles(t, filepath.Dir(spec), map[string]string{"spec.md": "# calc\nadd, multiply, subtract\n"})
	res := runFactory(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=ak"), "build", "--spec", spec,
		"--repo", f.repo, "--out", f.out, "--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", srv.URL,
		"--no-review", "--json")
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if srv.Remaining() != 0 || sum.Verdict != builder.VerdictPass || sum.PlanSource != builder.PlanCompiled || sum.CostUSD == nil || *sum.CostUSD <= 0 {
		t.Errorf("replies left %d; summary %+v", srv.Remaining(), sum)
	}
	for _, w := range sum.WorkOrders {
		if w.CostUSD == nil || *w.CostUSD <= 0 || w.Tokens != 120 {
			t.Errorf("work order %s: tokens %d, cost %v", w.ID, w.Tokens, w.CostUSD)
		}
	}
	checkCommits(t, f.repo, git(t, f.repo, "rev-parse", "main"), committed)
}

// The budget is checked before every model call: when the next call could
// pass --max-tokens, the build stops with exit 5, nothing committed for
// that work order, the tree clean.
func TestBuildBudget(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	// WO-01's answer reports a million tokens: WO-02's call cannot fit.
	wo1 := anthropicReply(replyWO01)
	wo1.OutputTokens = 1_000_000
	srv := llmtest.StartAnthropic(t, wo1, anthropicReply(replyWO02))
	base := git(t, f.repo, "rev-parse", "HEAD")
	res := runFactory(t, append(gitEnv(t.TempDir()), "ANTHROPIC_API_KEY=ak"), "build", "--plan", f.plan,
		"--repo", f.repo, "--out", f.out, "--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", srv.URL,
		"--max-tokens", "1010000", "--json")
	if res.code != ExitBudget {
		t.Fatalf("exit %d, want %d\n%s%s", res.code, ExitBudget, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "tokens") {
		t.Errorf("stderr does not say which budget:\n%s", res.stderr)
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != builder.VerdictBudget || srv.Remaining() != 1 || sum.Tokens < 1_000_000 || sum.Failed != "" ||
		sum.WorkOrders[1].Outcome != builder.OutcomePending {
		t.Errorf("replies left %d; summary %+v", srv.Remaining(), sum)
	}
	checkCommits(t, f.repo, base, map[string][]string{"WO-01": committed["WO-01"]})
	checkClean(t, f.repo)
	// An unknown price cannot bound a cost: refused before anything.
	unpriced := runFactory(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), "build", "--plan", f.plan,
		"--repo", f.repo, "--out", f.out, "--llm-model", "my-local-model", "--llm-base-url", srv.URL, "--max-cost-usd", "1")
	if unpriced.code != ExitUsage || !strings.Contains(unpriced.stderr, "--max-cost-usd") {
		t.Errorf("unpriced model with --max-cost-usd: exit %d\n%s", unpriced.code, unpriced.stderr)
	}
}

// A budget covers the whole build: what a process spent before it was
// interrupted counts when the build resumes, until --reset-budget.
func TestBuildBudgetAcrossResume(t *testing.T) {
	f := newSlowBuildFixture(t)
	wo1 := anthropicReply(replyWO01)
	wo1.OutputTokens = 1_000_000
	srv := llmtest.StartAnthropic(t, wo1, anthropicReply(replyWO02))
	env := append(gitEnv(t.TempDir()), "ANTHROPIC_API_KEY=ak")
	args := func(url string, extra ...string) []string {
		return append([]string{"build", "--plan", f.plan, "--repo", f.repo, "--out", f.out,
			"--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", url}, extra...)
	}
	cmd := factoryCmd(t, env, args(srv.URL)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "WO-02's slow command", func() bool {
		return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && exists(filepath.Join(f.repo, startedFile))
	})
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitInternal {
		t.Fatalf("exit %d, want %d\n%s", code, ExitInternal, stderr.String())
	}
	st := f.status(t)
	if st.Spend.Counted.Calls != 2 || st.Spend.Counted.TotalTokens < 1_000_000 || st.Spend.Counted.Cost() == nil {
		t.Fatalf("status after the interrupt: spend %+v", st.Spend)
	}
	text := runFactory(t, env, "status", "--repo", f.repo)
	if !strings.Contains(text.stdout, fmt.Sprintf("spent: 2 model calls, %d tokens, $", st.Spend.Counted.TotalTokens)) {
		t.Errorf("status does not show the spending:\n%s", text.stdout)
	}
	f.release(t)

	// 1,000,000+ tokens were spent by the first process: the next call does
	// not fit 1,010,000, and no request is sent.
	srv2 := llmtest.StartAnthropic(t, anthropicReply(replyWO02), anthropicReply(replyWO03))
	res := runFactory(t, env, args(srv2.URL, "--max-tokens", "1010000")...)
	if res.code != ExitBudget || srv2.Remaining() != 2 || !strings.Contains(res.stderr, "earlier processes spent") {
		t.Fatalf("resume under a budget: exit %d, replies left %d\n%s", res.code, srv2.Remaining(), res.stderr)
	}
	res = runFactory(t, env, args(srv2.URL, "--max-tokens", "1010000", "--reset-budget")...)
	if res.code != ExitPass || srv2.Remaining() != 0 {
		t.Fatalf("--reset-budget: exit %d, replies left %d\n%s", res.code, srv2.Remaining(), res.stderr)
	}
	st = f.status(t)
	if st.Spend.Resets != 1 || st.Spend.Counted.Calls != 2 || st.Spend.Total.Calls != 4 || st.Spend.Total.TotalTokens < 1_000_000 {
		t.Errorf("status after the reset: spend %+v", st.Spend)
	}
}

// TestBuildResumesEarlierReleasesPlan: a build planned under an earlier
// release's template (here: another --template) resumes with this one.
// Without the spec's hash in the old plan factory cannot tell the spec is
// the same and asks; with it, it goes on with the plan, on the same branch,
// without a planner call (issue 40, item 5).
func TestBuildResumesEarlierReleasesPlan(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"spec.md": "# calc\nA calculator library.\n", "old.md": planner.DefaultTemplate + "\nAn earlier release's wording.\n"})
	spec, oldTemplate := filepath.Join(dir, "spec.md"), filepath.Join(dir, "old.md")
	planJSON, _ := json.Marshal(buildPlan(""))
	planner1 := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: string(planJSON)})
	se := llmtest.Start(t, replyWO01, replyWO02Bad)
	url := routeByPath(t, map[string]string{"/v1/responses": planner1.URL, "/v1/chat/completions": se.URL})
	args := func(url string, extra ...string) []string {
		return append([]string{"build", "--spec", spec, "--repo", f.repo, "--out", f.out, "--llm-model", "test-model",
			"--llm-base-url", url, "--no-review", "--poll-interval", "10ms", "--timeout-seconds", "60", "--max-attempts", "1", "--repair", "off"}, extra...)
	}
	env := append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k")
	if res := runFactory(t, env, args(url, "--template", oldTemplate)...); res.code != ExitFail {
		t.Fatalf("first build: exit %d\n%s", res.code, res.stderr)
	}
	first := f.status(t)
	manifest := filepath.Join(first.PlanDir, planner.ManifestName)
	withHash, err := os.ReadFile(manifest)
	if err != nil || !strings.Contains(string(withHash), `"spec_sha256"`) {
		t.Fatalf("manifest: %v\n%s", err, withHash)
	}
	// A plan from before the spec's hash was recorded: factory asks.
	var m map[string]any
	json.Unmarshal(withHash, &m)
	delete(m["compile"].(map[string]any), "spec_sha256")
	old, _ := json.MarshalIndent(m, "", "  ")
	writeFiles(t, filepath.Dir(manifest), map[string]string{planner.ManifestName: string(old)})
	asked := runFactory(t, env, args(url)...)
	if asked.code != ExitUsage || !strings.Contains(asked.stderr, "--earlier-plan keep") || !strings.Contains(asked.stderr, "--earlier-plan replan") {
		t.Fatalf("without the spec's hash: exit %d\n%s", asked.code, asked.stderr)
	}
	// With it: the build goes on, on its branch, with its plan.
	writeFiles(t, filepath.Dir(manifest), map[string]string{planner.ManifestName: string(withHash)})
	se2 := llmtest.Start(t, replyWO02, replyWO03)
	url2 := routeByPath(t, map[string]string{"/v1/chat/completions": se2.URL})
	res := runFactory(t, env, args(url2)...)
	if res.code != ExitPass || !strings.Contains(res.stderr, "whose plan an earlier factory made") {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	if st := f.status(t); st.PlanHash != first.PlanHash || st.Branch != first.Branch || !st.Complete {
		t.Errorf("status after: %+v (first: %s on %s)", st, first.PlanHash, first.Branch)
	}
}
