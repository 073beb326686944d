package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/eval"
	"github.com/factory-harness/factory/internal/llmtest"
)

// The eval tests' suite: three cases, each one work order, built by two
// scripted models. m1 solves add and sign and fails to build upper; m2
// solves add and upper, and its sign passes its own acceptance but not the
// hidden tests.
const (
	hiddenMarker = "HIDDEN-7f3a" // in every hidden file; never in a prompt
	addStub      = "def add(a, b):\n    raise NotImplementedError\n"
	addGood      = "def add(a, b):\n    return a + b\n"
	signGood     = "def sign(x):\n    return (x > 0) - (x < 0)\n"
	signLoose    = "def sign(x):\n    return 1 if x >= 0 else -1\n" // sign(0) is wrong
	shoutGood    = "def shout(s):\n    return s.upper() + '!'\n"
	shoutBad     = "def shout(s):\n    return s.upper()\n"
)

func hiddenTest(imports, body string) string {
	return "# " + hiddenMarker + "\nimport unittest\n\n" + imports + "\n\n\nclass Hidden(unittest.TestCase):\n" + body
}

// evalWO is a one-work-order plan's work order for a case; its intent
// names the case, so that the scripted model knows what to answer.
func evalWO(name, file string, pre map[string]string, accept ...string) map[string]any {
	return map[string]any{
		"id": "WO-01", "title": "Write " + file, "intent": "[case " + name + "] Write " + file + ".",
		"preconditions": []any{pre}, "postconditions": []any{cond("file_exists", file)},
		"allowed_files": []string{file}, "forbidden": []string{},
		"acceptance_commands": accept, "context_files": []string{file},
	}
}

func evalPlan(wo map[string]any) string {
	b, _ := json.MarshalIndent(map[string]any{"verify_contract": nil, "work_orders": []any{wo}}, "", "  ")
	return string(b)
}

// leakProbe is an acceptance command that fails when the build's commands
// can read a hidden file: in the suite, in any run's check tree or in the
// work tree. The marker is assembled at run time so that the probe itself
// does not carry it into the prompts.
func leakProbe(suite, out string) string {
	return `python3 -c "import glob, os, sys; m = 'HIDDEN' + '-7f3a'; ` +
		`paths = glob.glob('` + suite + `/*/hidden/*') + glob.glob('` + out + `/evals/*/checks/**/*.py', recursive=True) + glob.glob('*.py'); ` +
		`hits = [p for p in paths if os.access(p, os.R_OK) and m in open(p).read()]; print('readable hidden files:', hits); sys.exit(1 if hits else 0)"`
}

type evalFixture struct {
	suite, out string
	plans      map[string]string            // case → the planner's reply
	answers    map[string]map[string]string // model → case → proposal
}

// dirOutsideTmp is a new directory outside /tmp when the machine allows
// it: the sandbox shows confined commands nothing of the host's /tmp but
// the work tree, so only a suite elsewhere shows that hiding works.
func dirOutsideTmp(t testing.TB) string {
	t.Helper()
	if dir, err := os.MkdirTemp("/var/tmp", "factory-eval-test-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return t.TempDir()
}

func newEvalFixture(t testing.TB) *evalFixture {
	t.Helper()
	root := dirOutsideTmp(t)
	f := &evalFixture{suite: filepath.Join(root, "suite"), out: filepath.Join(root, "out")}
	addWO := evalWO("add", "calc.py", cond("file_exists", "calc.py"), leakProbe(f.suite, f.out),
		`python3 -c "import calc; assert calc.add(2, 3) == 5"`)
	signWO := evalWO("sign", "sign.py", cond("file_absent", "sign.py"),
		`python3 -c "import sign; assert sign.sign(5) == 1 and sign.sign(-2) == -1"`)
	upperWO := evalWO("upper", "shout.py", cond("file_absent", "shout.py"),
		`python3 -c "import shout; assert shout.shout('hi') == 'HI!'"`)
	check := "[[checks]]\nname = \"hidden tests\"\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\", \"test_hidden\"]\ntimeout_seconds = 60\n"
	writeFiles(t, f.suite, map[string]string{
		"README.md":                            "the eval tests' suite\n",
		"add/case.toml":                        "description = \"add two numbers\"\nspec = \"spec.md\"\nstart = \"start/\"\nhidden = \"hidden/\"\n" + check,
		"add/spec.md":                          "EVAL-CASE:add\nImplement calc.add(a, b) in calc.py.\n",
		"add/start/calc.py":                    addStub,
		"add/hidden/test_hidden.py":            hiddenTest("import calc", "    def test_add(self):\n        self.assertEqual(calc.add(-1, 1), 0)\n"),
		"sign/case.toml":                       "spec = \"spec.md\"\nhidden = \"hidden/\"\n" + check,
		"sign/spec.md":                         "EVAL-CASE:sign\nImplement sign(x) in sign.py: -1, 0 or 1.\n",
		"sign/hidden/test_hidden.py":           hiddenTest("import sign", "    def test_zero(self):\n        self.assertEqual(sign.sign(0), 0)\n"),
		"upper/case.toml":                      "plan = \"plan/\"\nhidden = \"hidden/\"\nmax_attempts = 2\n" + check,
		"upper/plan/WO-01.json":                mustJSON(upperWO),
		"upper/plan/WORK_ORDERS_MANIFEST.json": evalPlan(upperWO),
		"upper/hidden/test_hidden.py":          hiddenTest("import shout", "    def test_shout(self):\n        self.assertEqual(shout.shout('a'), 'A!')\n"),
	})
	f.plans = map[string]string{"add": evalPlan(addWO), "sign": evalPlan(signWO)}
	proposal := func(path, base, content string) string {
		return llmtest.Proposal("write "+path, llmtest.Write{Path: path, BaseSHA256: sha(base), Content: content})
	}
	f.answers = map[string]map[string]string{
		"m1": {"add": proposal("calc.py", addStub, addGood), "sign": proposal("sign.py", "", signGood), "upper": proposal("shout.py", "", shoutBad)},
		"m2": {"add": proposal("calc.py", addStub, addGood), "sign": proposal("sign.py", "", signLoose), "upper": proposal("shout.py", "", shoutGood)},
	}
	return f
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

var (
	planMarker = regexp.MustCompile(`EVAL-CASE:(\w+)`)
	woMarker   = regexp.MustCompile(`\[case (\w+)\]`)
)

// evalServers are the scripted model: the planner answers by the spec's
// case, the work orders by the model and the work order's case, whatever
// order the parallel runs ask in.
type evalServers struct {
	url     string
	planner *llmtest.ResponsesServer
	se      *llmtest.Server
}

func (f *evalFixture) serve(t testing.TB, plannerFor func(model, name string) llmtest.ResponsesReply) *evalServers {
	t.Helper()
	if plannerFor == nil {
		plannerFor = func(_, name string) llmtest.ResponsesReply { return llmtest.ResponsesReply{Content: f.plans[name]} }
	}
	s := &evalServers{}
	s.planner = llmtest.StartResponsesFunc(t, func(req map[string]any) llmtest.ResponsesReply {
		body, _ := json.Marshal(req)
		m := planMarker.FindSubmatch(body)
		if m == nil {
			return llmtest.ResponsesReply{HTTPErrors: []int{400}}
		}
		model, _ := req["model"].(string)
		return plannerFor(model, string(m[1]))
	})
	s.se = llmtest.StartFunc(t, func(req map[string]any) llmtest.Reply {
		body, _ := json.Marshal(req)
		m := woMarker.FindSubmatch(body)
		model, _ := req["model"].(string)
		if m == nil || f.answers[model][string(m[1])] == "" {
			return llmtest.Reply{Status: 400, Body: `{"error":{"message":"llmtest: no answer for this request"}}`}
		}
		return llmtest.Reply{Content: f.answers[model][string(m[1])]}
	})
	s.url = routeByPath(t, map[string]string{"/v1/responses": s.planner.URL, "/v1/chat/completions": s.se.URL})
	return s
}

// requests are every request body both servers received.
func (s *evalServers) requests() []string {
	var out []string
	for _, r := range append(s.planner.Requests(), s.se.Requests()...) {
		b, _ := json.Marshal(r)
		out = append(out, string(b))
	}
	return out
}

func (f *evalFixture) args(url, out string, extra ...string) []string {
	return append([]string{"eval", "--suite", f.suite, "--out", out, "--llm-model", "m1", "--llm-model", "m2",
		"--no-review", "--python", "python3", "--verify-command", "python3 -m compileall -q .",
		"--llm-base-url", url, "--poll-interval", "10ms", "--retry-backoff", "1ms"}, extra...)
}

func evalEnv(t testing.TB) []string {
	return append(gitEnv(t.TempDir()), "OPENAI_API_KEY=test-key")
}

// evalDir is the one eval directory under out.
func evalDir(t testing.TB, out string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "evals", "*"))
	if len(dirs) != 1 {
		t.Fatalf("eval directories under %s: %v, want one", out, dirs)
	}
	return dirs[0]
}

// readEvalResults reads results.jsonl with what depends on the machine or
// the clock blanked: wall time and paths under out.
func readEvalResults(t testing.TB, out string) []eval.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(evalDir(t, out), eval.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var rs []eval.Result
	for line := range strings.Lines(string(data)) {
		var r eval.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("results.jsonl line %q: %v", line, err)
		}
		r.WallSeconds = 0
		r.BuildDir = strings.TrimPrefix(r.BuildDir, out)
		r.Repo = strings.TrimPrefix(r.Repo, out)
		if r.FailedCheck != nil {
			r.FailedCheck.OutputTail = regexp.MustCompile(`[0-9.]+s`).ReplaceAllString(r.FailedCheck.OutputTail, "Ns")
		}
		rs = append(rs, r)
	}
	return rs
}

// summaryLine is what the tests compare of a result.
type summaryLine struct {
	Case, Model     string
	Run             int
	Status, Verdict string
	Checks, WOs     string
	Attempts        int
	FirstTry        bool
	Tokens          int64
	FailedExit      int
}

func lines(rs []eval.Result) []summaryLine {
	var out []summaryLine
	for _, r := range rs {
		l := summaryLine{Case: r.Case, Model: r.Model, Run: r.Run, Status: r.Status, Verdict: r.BuildVerdict,
			Checks: fmt.Sprintf("%d/%d", r.ChecksPassed, r.ChecksTotal), WOs: fmt.Sprintf("%d/%d", r.WorkOrdersPassed, r.WorkOrdersTotal),
			Attempts: r.Attempts, FirstTry: r.FirstAttemptPass, Tokens: r.Tokens, FailedExit: -99}
		if r.FailedCheck != nil {
			l.FailedExit = r.FailedCheck.ExitCode
		}
		out = append(out, l)
	}
	return out
}

// TestEval runs a suite of 3 cases × 2 models × 2 runs, plus a malformed
// case, and checks every line of results.jsonl, the summary's counts, that
// the hidden files reached neither a prompt nor the repository nor the
// build's commands, that -j 4 gives the same results as -j 1, that a second
// invocation resumes without a model call, and --min-solve-rate.
func TestEval(t *testing.T) {
	f := newEvalFixture(t)
	writeFiles(t, f.suite, map[string]string{"broken/case.toml": "spec = \"spec.md\"\nretries = 3\n", "broken/spec.md": "x\n"})
	srv := f.serve(t, nil)
	res := runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--runs", "2", "-j", "1")...)
	if res.code != ExitPass {
		t.Fatalf("eval exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	solved := func(c, m string, run int) summaryLine {
		return summaryLine{Case: c, Model: m, Run: run, Status: eval.StatusSolved, Verdict: "PASS", Checks: "1/1", WOs: "1/1", Attempts: 1, FirstTry: true, Tokens: 240, FailedExit: -99}
	}
	want := []summaryLine{
		solved("add", "m1", 1), solved("add", "m1", 2), solved("add", "m2", 1), solved("add", "m2", 2),
		solved("sign", "m1", 1), solved("sign", "m1", 2),
		// Its own acceptance passes, the hidden test does not.
		{Case: "sign", Model: "m2", Run: 1, Status: eval.StatusUnsolved, Verdict: "PASS", Checks: "0/1", WOs: "1/1", Attempts: 1, FirstTry: true, Tokens: 240, FailedExit: 1},
		{Case: "sign", Model: "m2", Run: 2, Status: eval.StatusUnsolved, Verdict: "PASS", Checks: "0/1", WOs: "1/1", Attempts: 1, FirstTry: true, Tokens: 240, FailedExit: 1},
		// A given plan: no planner call; m1 fails to build.
		{Case: "upper", Model: "m1", Run: 1, Status: eval.StatusUnsolved, Verdict: "FAIL", Checks: "0/1", WOs: "0/1", Attempts: 2, Tokens: 240, FailedExit: -99},
		{Case: "upper", Model: "m1", Run: 2, Status: eval.StatusUnsolved, Verdict: "FAIL", Checks: "0/1", WOs: "0/1", Attempts: 2, Tokens: 240, FailedExit: -99},
		{Case: "upper", Model: "m2", Run: 1, Status: eval.StatusSolved, Verdict: "PASS", Checks: "1/1", WOs: "1/1", Attempts: 1, FirstTry: true, Tokens: 120, FailedExit: -99},
		{Case: "upper", Model: "m2", Run: 2, Status: eval.StatusSolved, Verdict: "PASS", Checks: "1/1", WOs: "1/1", Attempts: 1, FirstTry: true, Tokens: 120, FailedExit: -99},
	}
	results := readEvalResults(t, f.out)
	if diff := cmp.Diff(want, lines(results)); diff != "" {
		t.Fatalf("results.jsonl (-want +got):\n%s\nstderr:\n%s", diff, res.stderr)
	}
	if fc := results[6].FailedCheck; !strings.Contains(fc.OutputTail, "test_zero") || !strings.Contains(fc.OutputTail, "FAILED") {
		t.Errorf("the failing hidden check's output tail lacks the failing test:\n%s", fc.OutputTail)
	}

	var sum eval.Summary
	readJSON(t, filepath.Join(evalDir(t, f.out), eval.SummaryFile), &sum)
	for i, want := range []struct {
		model                                 string
		runs, solved, unsolved, errors, first int
	}{{"m1", 6, 4, 2, 0, 4}, {"m2", 6, 4, 2, 0, 4}} {
		m := sum.PerModel[i]
		if m.Model != want.model || m.Runs != want.runs || m.Solved != want.solved || m.Unsolved != want.unsolved || m.Errors != want.errors || m.SolvedFirstAttempt != want.first {
			t.Errorf("summary of %s: %+v, want %+v", want.model, m, want)
		}
		if m.SolveRate == nil || *m.SolveRate != 4.0/6 || m.SolveRateLow == nil || *m.SolveRateLow >= 4.0/6 || *m.SolveRateHigh <= 4.0/6 {
			t.Errorf("%s: solve rate %v in [%v, %v], want 0.667 inside its interval", m.Model, m.SolveRate, m.SolveRateLow, m.SolveRateHigh)
		}
		if m.MeanCostPerRun != nil {
			t.Errorf("%s: cost per run %v; the scripted models have no price, so it is unknown (null)", m.Model, *m.MeanCostPerRun)
		}
	}
	if len(sum.Invalid) != 1 || sum.Invalid[0].Case != "broken" || !strings.Contains(sum.Invalid[0].Error, "retries") {
		t.Errorf("invalid cases %+v, want broken (unknown key retries)", sum.Invalid)
	}
	if !strings.Contains(res.stderr, "invalid case broken") || !strings.Contains(res.stdout, "invalid case broken") {
		t.Errorf("the malformed case is not reported:\nstdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	}
	if sum.Planned != 12 || sum.Finished != 12 || !sum.Complete {
		t.Errorf("summary: planned %d, finished %d, complete %v", sum.Planned, sum.Finished, sum.Complete)
	}
	for _, want := range []string{"[12/12] ", "sign  m2  run 2: unsolved (build PASS, checks 0/1"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, res.stderr)
		}
	}
	if !regexp.MustCompile(`(?m)^m1\s+6\s+4\s+2\s+0\s+66\.7%`).MatchString(res.stdout) {
		t.Errorf("table lacks m1's line:\n%s", res.stdout)
	}

	// The hidden files never reached a prompt or a repository; the leak
	// probe among add's acceptance commands passed, so the build's
	// commands could not read them either.
	for _, body := range srv.requests() {
		if strings.Contains(body, hiddenMarker) || strings.Contains(body, "test_zero") {
			t.Fatalf("a prompt holds hidden content: %.300s", body)
		}
	}
	filepath.WalkDir(filepath.Join(evalDir(t, f.out), "runs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/.git/") {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), hiddenMarker) {
				t.Errorf("%s holds hidden content", p)
			}
		}
		return nil
	})
	calls := len(srv.requests())

	t.Run("parallel gives the same results", func(t *testing.T) {
		out := filepath.Join(filepath.Dir(f.out), "out-j4")
		res := runFactory(t, evalEnv(t), f.args(srv.url, out, "--runs", "2", "-j", "4")...)
		if res.code != ExitPass {
			t.Fatalf("eval -j 4 exit %d\n%s", res.code, res.stderr)
		}
		if diff := cmp.Diff(results, readEvalResults(t, out)); diff != "" {
			t.Errorf("-j 4 results differ from -j 1 (-j1 +j4):\n%s", diff)
		}
	})
	calls = len(srv.requests()) - calls

	t.Run("resume and min-solve-rate", func(t *testing.T) {
		before := len(srv.requests())
		res := runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--runs", "2", "--min-solve-rate", "0.9")...)
		if res.code != ExitFail || !strings.Contains(res.stderr, "below --min-solve-rate 90.0%: m1 solved 66.7%; m2 solved 66.7%") {
			t.Errorf("--min-solve-rate 0.9: exit %d, want 1\n%s", res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "12 already finished, 0 to do") {
			t.Errorf("the second invocation did not resume:\n%s", res.stderr)
		}
		if n := len(srv.requests()) - before; n != 0 {
			t.Errorf("resuming a finished eval asked the model %d times", n)
		}
		if res := runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--runs", "2", "--min-solve-rate", "0.6", "--json")...); res.code != ExitPass {
			t.Errorf("--min-solve-rate 0.6: exit %d, want 0\n%s", res.code, res.stderr)
		} else {
			var s eval.Summary
			if err := json.Unmarshal([]byte(res.stdout), &s); err != nil || s.EvalID != sum.EvalID {
				t.Errorf("--json: %v, eval id %q want %q", err, s.EvalID, sum.EvalID)
			}
		}
	})
	if calls != 22 {
		t.Errorf("-j 4 made %d model calls, want 22 (8 plans, 14 work-order attempts)", calls)
	}
}

// The leak probe is a test that can fail: with the sandbox off, the
// build's commands read the suite's hidden files and add fails to build.
func TestEvalLeakProbeFailsUnconfined(t *testing.T) {
	f := newEvalFixture(t)
	srv := f.serve(t, nil)
	res := runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--case", "add", "--sandbox", "off")...)
	if res.code != ExitPass {
		t.Fatalf("eval exit %d\n%s", res.code, res.stderr)
	}
	for _, r := range readEvalResults(t, f.out) {
		if r.BuildVerdict != "FAIL" {
			t.Errorf("%s %s: build %s; unconfined, the leak probe should have read the hidden file and failed it", r.Case, r.Model, r.BuildVerdict)
		}
	}
	if !strings.Contains(res.stderr, "cannot hide paths") {
		t.Errorf("no warning that the hidden files are readable:\n%s", res.stderr)
	}
}

// A provider that is down makes its runs errors, apart from unsolved; a
// later invocation does them again.
func TestEvalProviderOutageIsAnError(t *testing.T) {
	f := newEvalFixture(t)
	down := f.serve(t, func(model, name string) llmtest.ResponsesReply {
		if model == "m2" {
			return llmtest.ResponsesReply{HTTPErrors: []int{503}}
		}
		return llmtest.ResponsesReply{Content: f.plans[name]}
	})
	res := runFactory(t, evalEnv(t), f.args(down.url, f.out, "--case", "add", "--min-solve-rate", "0.5")...)
	if res.code != ExitFail || !strings.Contains(res.stderr, "m2 has no judged run") {
		t.Fatalf("eval exit %d, want 1 (m2 has no judged run)\n%s", res.code, res.stderr)
	}
	got := lines(readEvalResults(t, f.out))
	if len(got) != 2 || got[0].Status != eval.StatusSolved || got[1].Status != eval.StatusError || got[1].Verdict != "ERROR" {
		t.Fatalf("results %+v, want m1 solved and m2 error", got)
	}
	if r := readEvalResults(t, f.out)[1]; !strings.Contains(r.Error, "503") {
		t.Errorf("the error does not say what the provider answered: %q", r.Error)
	}
	var sum eval.Summary
	readJSON(t, filepath.Join(evalDir(t, f.out), eval.SummaryFile), &sum)
	if m := sum.PerModel[1]; m.Errors != 1 || m.Unsolved != 0 || m.SolveRate != nil || sum.Complete {
		t.Errorf("m2 in the summary: %+v (complete %v), want 1 error and no rate", m, sum.Complete)
	}
	// The provider is back: only the error is done again.
	up := f.serve(t, nil)
	res = runFactory(t, evalEnv(t), f.args(up.url, f.out, "--case", "add")...)
	if res.code != ExitPass || !strings.Contains(res.stderr, "1 already finished, 1 to do") {
		t.Fatalf("rerun exit %d\n%s", res.code, res.stderr)
	}
	if got := lines(readEvalResults(t, f.out)); len(got) != 2 || got[1].Status != eval.StatusSolved {
		t.Errorf("after the rerun: %+v", got)
	}
}

// Ctrl-C stops the eval with what finished kept; the next invocation does
// only the rest, without asking the model about the finished runs again.
func TestEvalInterruptThenResume(t *testing.T) {
	f := newEvalFixture(t)
	slow := f.serve(t, func(_, name string) llmtest.ResponsesReply {
		if name == "sign" {
			return llmtest.ResponsesReply{Statuses: []string{"in_progress"}} // never finishes
		}
		return llmtest.ResponsesReply{Content: f.plans[name]}
	})
	cmd := factoryCmd(t, evalEnv(t), f.args(slow.url, f.out, "-j", "1")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "[2/") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("add did not finish:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for len(slow.planner.Requests()) < 3 { // sign's planner call for m1 is in flight
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitInternal {
		t.Fatalf("interrupted eval: %v, want exit 3\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "run the same command again to resume") {
		t.Errorf("no resume hint:\n%s", stderr.String())
	}
	first := readEvalResults(t, f.out)
	if len(first) != 2 || first[0].Case != "add" || first[1].Case != "add" {
		t.Fatalf("kept results %+v, want add's two runs", lines(first))
	}

	again := f.serve(t, nil)
	res := runFactory(t, evalEnv(t), f.args(again.url, f.out, "-j", "1")...)
	if res.code != ExitPass || !strings.Contains(res.stderr, "2 already finished, 4 to do") {
		t.Fatalf("resume exit %d\n%s", res.code, res.stderr)
	}
	for _, body := range again.requests() {
		if strings.Contains(body, "EVAL-CASE:add") || strings.Contains(body, "[case add]") {
			t.Errorf("the resumed eval asked the model about add again: %.200s", body)
		}
	}
	if got := readEvalResults(t, f.out); len(got) != 6 {
		t.Errorf("after the resume %d results, want 6", len(got))
	}
}

// BenchmarkEvalJobs compares -j 1 with -j 4 on the suite of TestEval (3
// cases × 2 models × 2 runs, 12 builds and their checks), each iteration
// into a new --out:
//
//	go test ./internal/cli -run '^$' -bench EvalJobs -benchtime 1x
func BenchmarkEvalJobs(b *testing.B) {
	f := newEvalFixture(b)
	srv := f.serve(b, nil)
	for _, jobs := range []string{"1", "4"} {
		b.Run("j"+jobs, func(b *testing.B) {
			for i := range b.N {
				out := filepath.Join(filepath.Dir(f.out), fmt.Sprintf("bench-j%s-%d", jobs, i))
				if res := runFactory(b, evalEnv(b), f.args(srv.url, out, "--runs", "2", "-j", jobs)...); res.code != ExitPass {
					b.Fatalf("eval -j %s: exit %d\n%s", jobs, res.code, res.stderr)
				}
			}
		})
	}
}

// --max-tokens bounds the whole eval: at the limit no request is sent, the
// eval exits 5 and nothing is recorded, so the next invocation does the runs.
func TestEvalBudget(t *testing.T) {
	f := newEvalFixture(t)
	srv := f.serve(t, nil)
	res := runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--case", "add", "-j", "1", "--max-tokens", "50")...)
	if res.code != ExitBudget || !strings.Contains(res.stderr, "token budget reached") {
		t.Fatalf("eval exit %d, want 5\n%s", res.code, res.stderr)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent past the budget", n)
	}
	if got := readEvalResults(t, f.out); len(got) != 0 {
		t.Errorf("runs stopped at the budget were recorded: %+v", lines(got))
	}
	res = runFactory(t, evalEnv(t), f.args(srv.url, f.out, "--case", "add", "-j", "1")...)
	if res.code != ExitPass || !strings.Contains(res.stderr, "0 already finished, 2 to do") || len(readEvalResults(t, f.out)) != 2 {
		t.Errorf("after the budget: exit %d\n%s", res.code, res.stderr)
	}
}
