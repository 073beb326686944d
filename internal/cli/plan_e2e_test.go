package cli

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

func validPlan(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("testdata/plans/calc_valid.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// invalidPlan breaks the valid plan: WO-02 runs the verify script itself (E105).
func invalidPlan(t *testing.T) string {
	return strings.Replace(validPlan(t), `"python3 -m unittest tests.test_multiply -v"`, `"bash scripts/verify.sh"`, 1)
}

func done(content string) llmtest.ResponsesReply {
	return llmtest.ResponsesReply{Statuses: []string{"completed"}, Content: content}
}

type planFixture struct {
	srv             *llmtest.ResponsesServer
	spec, out, arts string
}

func newPlanFixture(t *testing.T, replies ...llmtest.ResponsesReply) *planFixture {
	t.Helper()
	dir := t.TempDir()
	f := &planFixture{
		srv:  llmtest.StartResponses(t, replies...),
		spec: filepath.Join(dir, "spec.txt"),
		out:  filepath.Join(dir, "plan"),
		arts: filepath.Join(dir, "artifacts"),
	}
	if err := os.WriteFile(f.spec, []byte("A calculator module with add and multiply.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *planFixture) run(t *testing.T, extra ...string) runOut {
	t.Helper()
	args := append([]string{"plan", "--spec", f.spec, "--outdir", f.out, "--artifacts-dir", f.arts,
		"--llm-model", "planner-model", "--llm-base-url", f.srv.URL, "--poll-interval", "5ms", "--retry-backoff", "5ms"}, extra...)
	return runFactory(t, []string{"OPENAI_API_KEY=test-key"}, args...)
}

func (f *planFixture) summary(t *testing.T) planner.Summary {
	t.Helper()
	var s planner.Summary
	readJSON(t, filepath.Join(f.arts, "compile_summary.json"), &s)
	return s
}

func TestPlanPollsUntilCompleted(t *testing.T) {
	f := newPlanFixture(t, llmtest.ResponsesReply{Statuses: []string{"queued", "in_progress", "completed"}, Content: validPlan(t)})
	res := f.run(t, "--no-review")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if f.srv.Polls() < 3 {
		t.Errorf("polls = %d, want the status walked through", f.srv.Polls())
	}
	got := listDir(t, f.out)
	for _, want := range []string{"WO-01.json", "WO-02.json", planner.ManifestName} {
		if !strings.Contains(strings.Join(got, " "), want) {
			t.Errorf("outdir lacks %s: %v", want, got)
		}
	}
	// Planner output is factory input: one WorkOrder type.
	for _, name := range []string{"WO-01.json", "WO-02.json"} {
		data, _ := os.ReadFile(filepath.Join(f.out, name))
		if _, err := workorder.ParseWorkOrder(data); err != nil {
			t.Errorf("%s is not a valid work order for factory run: %v", name, err)
		}
	}
	var wo1, wo2 workorder.WorkOrder
	readJSON(t, filepath.Join(f.out, "WO-01.json"), &wo1)
	readJSON(t, filepath.Join(f.out, "WO-02.json"), &wo2)
	if wo1.VerifyExempt || wo2.VerifyExempt {
		t.Errorf("verify_exempt = %v, %v; the contract is satisfied after WO-01", wo1.VerifyExempt, wo2.VerifyExempt)
	}
	var plan planner.PlanFile
	readJSON(t, filepath.Join(f.out, planner.ManifestName), &plan)
	s := f.summary(t)
	if plan.Compile == nil || plan.Compile.CompileHash != s.CompileHash || len(s.CompileHash) != 16 || plan.Compile.ValidatorVersion == "" {
		t.Errorf("manifest provenance %+v, summary hash %s", plan.Compile, s.CompileHash)
	}
	body := f.srv.Requests()[0]
	if body["background"] != true || body["model"] != "planner-model" {
		t.Errorf("request = %v", body)
	}
	// The written plan passes `factory validate`.
	if v := runFactory(t, nil, "validate", f.out); v.code != 0 {
		t.Errorf("validate %s: exit %d\n%s%s", f.out, v.code, v.stdout, v.stderr)
	}
}

func TestPlanRetriesTransportAndIncomplete(t *testing.T) {
	f := newPlanFixture(t,
		llmtest.ResponsesReply{HTTPErrors: []int{503}, Statuses: []string{"incomplete"}, Incomplete: "max_output_tokens", Content: `{"work_or`},
		done(validPlan(t)),
	)
	res := f.run(t, "--no-review", "--max-output-tokens", "1000")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	reqs := f.srv.Requests()
	last := reqs[len(reqs)-1]
	if last["max_output_tokens"] != 2000.0 {
		t.Errorf("retry budget = %v, want 2000 (doubled)", last["max_output_tokens"])
	}
}

func TestPlanRevisesInvalidJSON(t *testing.T) {
	f := newPlanFixture(t, done("Here is the plan: {not json"), done(validPlan(t)))
	res := f.run(t, "--no-review")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	for _, name := range []string{"llm_raw_response_attempt_1.txt", "validation_errors_attempt_1.json", "llm_raw_response_attempt_2.txt", "manifest_raw_attempt_2.json", "prompt_attempt_2.txt"} {
		if _, err := os.Stat(filepath.Join(f.arts, name)); err != nil {
			t.Errorf("artifact: %v", err)
		}
	}
	prompt, _ := os.ReadFile(filepath.Join(f.arts, "prompt_attempt_2.txt"))
	if !strings.Contains(string(prompt), "[E000]") || !strings.Contains(string(prompt), "Here is the plan") {
		t.Errorf("revision prompt lacks the error or the previous reply")
	}
	if s := f.summary(t); !s.Success || s.Attempts != 2 {
		t.Errorf("summary = %+v", s)
	}
}

func TestPlanFailsAfterThreeInvalidAttempts(t *testing.T) {
	f := newPlanFixture(t, done(invalidPlan(t)), done(invalidPlan(t)), done(invalidPlan(t)))
	res := f.run(t, "--no-review")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitFail, res.stderr)
	}
	if !strings.Contains(res.stderr, "[E105]") {
		t.Errorf("stderr lacks the error code:\n%s", res.stderr)
	}
	for _, dir := range []string{f.arts, f.out} {
		var issues []planner.Issue
		readJSON(t, filepath.Join(dir, "validation_errors.json"), &issues)
		if len(issues) == 0 || issues[0].Code != "E105" || issues[0].WOID != "WO-02" {
			t.Errorf("%s/validation_errors.json = %+v", dir, issues)
		}
	}
	for _, name := range listDir(t, f.out) {
		if strings.HasPrefix(name, "WO-") || name == planner.ManifestName {
			t.Errorf("an invalid plan was written: %s", name)
		}
	}
	if s := f.summary(t); s.Success || s.Attempts != 3 {
		t.Errorf("summary = %+v", s)
	}
}

func TestPlanNotJSONExitCode(t *testing.T) {
	f := newPlanFixture(t, done("nope"), done("still nope"))
	if res := f.run(t, "--no-review", "--max-attempts", "2"); res.code != ExitFail {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitFail, res.stderr)
	}
}

func TestPlanModelFailureExitCode(t *testing.T) {
	f := newPlanFixture(t, llmtest.ResponsesReply{Statuses: []string{"failed"}, Error: "the model is overloaded"})
	res := f.run(t, "--no-review")
	if res.code != ExitInternal || !strings.Contains(res.stderr, "overloaded") {
		t.Fatalf("exit %d, want %d\n%s", res.code, ExitInternal, res.stderr)
	}
}

func TestPlanReviewerFindingsReviseThePlan(t *testing.T) {
	finding := `{"findings":[{"wo_id":"WO-02","field":"notes","problem":"the notes do not say multiply handles negatives","evidence":"spec","fix":"say so"}]}`
	revised := strings.Replace(validPlan(t), "keep add unchanged.", "keep add unchanged; works for negative numbers.", 1)
	f := newPlanFixture(t, done(validPlan(t)), done(finding), done(revised), done(`{"findings":[]}`))
	res := f.run(t, "--review-model", "reviewer-model")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var wo2 workorder.WorkOrder
	readJSON(t, filepath.Join(f.out, "WO-02.json"), &wo2)
	if wo2.Notes == nil || !strings.Contains(*wo2.Notes, "negative") {
		t.Errorf("WO-02 notes = %v, want the revised plan", wo2.Notes)
	}
	for _, name := range []string{"reviewer_prompt_1.txt", "reviewer_response_1.json", "reviewer_findings_1.json", "reviewer_findings_2.json"} {
		if _, err := os.Stat(filepath.Join(f.arts, name)); err != nil {
			t.Errorf("artifact: %v", err)
		}
	}
	reqs := f.srv.Requests()
	if reqs[1]["model"] != "reviewer-model" || reqs[2]["model"] != "planner-model" {
		t.Errorf("models = %v, %v", reqs[1]["model"], reqs[2]["model"])
	}
	prompt, _ := os.ReadFile(filepath.Join(f.arts, "prompt_attempt_2.txt"))
	if !strings.Contains(string(prompt), "the notes do not say multiply handles negatives") {
		t.Errorf("the review revision prompt lacks the finding")
	}
	s := f.summary(t)
	if len(s.Review) != 2 || s.Review[0].Findings != 1 || s.Review[1].Findings != 0 {
		t.Errorf("review log = %+v", s.Review)
	}
}

func TestPlanKeepsValidPlanWhenReviewRevisionBreaksIt(t *testing.T) {
	finding := `{"findings":[{"wo_id":"WO-02","field":"acceptance_commands[0]","problem":"p","evidence":"e","fix":"f"}]}`
	f := newPlanFixture(t, done(validPlan(t)), done(finding), done(invalidPlan(t)), done(invalidPlan(t)))
	res := f.run(t, "--max-attempts", "2")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var wo2 workorder.WorkOrder
	readJSON(t, filepath.Join(f.out, "WO-02.json"), &wo2)
	if wo2.AcceptanceCommands[0] != "python3 -m unittest tests.test_multiply -v" {
		t.Errorf("WO-02 = %+v, want the plan that passed", wo2.AcceptanceCommands)
	}
}

func TestPlanRefusesExistingPlanWithoutOverwrite(t *testing.T) {
	f := newPlanFixture(t, done(validPlan(t)), done(validPlan(t)))
	if res := f.run(t, "--no-review"); res.code != 0 {
		t.Fatalf("first plan: exit %d\n%s", res.code, res.stderr)
	}
	res := f.run(t, "--no-review")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "--overwrite") || f.srv.Remaining() != 1 {
		t.Fatalf("second plan: exit %d, remaining replies %d\n%s", res.code, f.srv.Remaining(), res.stderr)
	}
	if res := f.run(t, "--no-review", "--overwrite"); res.code != 0 {
		t.Fatalf("--overwrite: exit %d\n%s", res.code, res.stderr)
	}
}

// TestPlannedWorkOrderRunsInTheFactory closes the loop: WO-01 as the planner
// wrote it is executed by `factory run` against a fresh repository.
func TestPlannedWorkOrderRunsInTheFactory(t *testing.T) {
	f := newPlanFixture(t, done(validPlan(t)))
	if res := f.run(t, "--no-review"); res.code != 0 {
		t.Fatalf("plan: exit %d\n%s", res.code, res.stderr)
	}
	repo := newRepo(t, map[string]string{"README.md": "calc\n"})
	verify := "#!/usr/bin/env bash\nset -euo pipefail\npython3 -m compileall -q .\npython3 -m unittest discover -s tests -t . -v\n"
	test := "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
	srv := llmtest.Start(t, llmtest.Reply{Content: llmtest.Proposal("skeleton",
		llmtest.Write{Path: "scripts/verify.sh", BaseSHA256: sha(""), Content: verify},
		llmtest.Write{Path: "tests/__init__.py", BaseSHA256: sha(""), Content: ""},
		llmtest.Write{Path: "tests/test_calc.py", BaseSHA256: sha(""), Content: test},
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(""), Content: "def add(a, b):\n    return a + b\n"},
	)})
	res := runFactory(t, []string{"OPENAI_API_KEY=test-key"}, "run", "--repo", repo, "--work-order", filepath.Join(f.out, "WO-01.json"),
		"--out", filepath.Join(t.TempDir(), "runs"), "--llm-model", "m", "--llm-base-url", srv.URL)
	if res.code != ExitPass || !strings.Contains(res.stderr, "bash scripts/verify.sh → exit 0") {
		t.Fatalf("run: exit %d\n%s", res.code, res.stderr)
	}
}

func TestPlanRecordThenReplay(t *testing.T) {
	transcript := filepath.Join(t.TempDir(), "plan.jsonl")
	rec := newPlanFixture(t, done("not json"), done(validPlan(t)))
	if res := rec.run(t, "--no-review", "--record", transcript); res.code != 0 {
		t.Fatalf("record: exit %d\n%s", res.code, res.stderr)
	}
	rep := newPlanFixture(t)
	rep.spec = rec.spec
	res := runFactory(t, []string{"OPENAI_API_KEY="}, "plan", "--spec", rep.spec, "--outdir", rep.out, "--artifacts-dir", rep.arts,
		"--llm-model", "planner-model", "--no-review", "--replay", transcript)
	if res.code != 0 {
		t.Fatalf("replay: exit %d\n%s", res.code, res.stderr)
	}
	for _, name := range []string{"WO-01.json", "WO-02.json", planner.ManifestName} {
		a, _ := os.ReadFile(filepath.Join(rec.out, name))
		b, _ := os.ReadFile(filepath.Join(rep.out, name))
		if string(a) != string(b) || len(a) == 0 {
			t.Errorf("%s differs between the recorded and the replayed compile", name)
		}
	}
}

func TestPlanUsageErrors(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.txt")
	os.WriteFile(spec, []byte("a spec\n"), 0o644)
	noPlaceholder := filepath.Join(dir, "tmpl.md")
	os.WriteFile(noPlaceholder, []byte("plan something\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing spec", []string{"plan", "--outdir", dir}, "--spec is required"},
		{"empty spec file", []string{"plan", "--spec", os.DevNull, "--outdir", dir}, "is empty"},
		{"template without placeholder", []string{"plan", "--spec", spec, "--outdir", dir, "--template", noPlaceholder}, "{{PRODUCT_SPEC}}"},
		{"unknown flag", []string{"plan", "--nope"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runFactory(t, []string{"OPENAI_API_KEY=k"}, tt.args...)
			if res.code != ExitUsage || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", res.code, res.stderr, ExitUsage, tt.want)
			}
		})
	}
	if res := runFactory(t, nil, "validate"); res.code == 0 || !strings.Contains(res.stderr, "accepts 1 arg") {
		t.Errorf("validate without a path: exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestPlanKeepsValidPlanWhenReviewerFails(t *testing.T) {
	f := newPlanFixture(t, done(validPlan(t)), llmtest.ResponsesReply{Statuses: []string{"failed"}, Error: "reviewer overloaded"})
	res := f.run(t)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	s := f.summary(t)
	if s.AcceptedAttempt != 1 || len(s.Review) != 1 || !strings.Contains(s.Review[0].Outcome, "reviewer overloaded") {
		t.Errorf("summary accepted=%d review=%+v", s.AcceptedAttempt, s.Review)
	}
}

func TestPlanClearsStaleFilesOfAnEarlierCompile(t *testing.T) {
	f := newPlanFixture(t, done("no"), done("no"), done("no"), done(validPlan(t)))
	if res := f.run(t, "--no-review"); res.code != ExitFail {
		t.Fatalf("first compile: exit %d\n%s", res.code, res.stderr)
	}
	if res := f.run(t, "--no-review"); res.code != 0 {
		t.Fatalf("second compile: exit %d\n%s", res.code, res.stderr)
	}
	for _, p := range []string{filepath.Join(f.out, "validation_errors.json"), filepath.Join(f.arts, "validation_errors.json"), filepath.Join(f.arts, "prompt_attempt_2.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("stale %s survived a successful compile", p)
		}
	}
}

func TestPlanMissingKeyCreatesNothing(t *testing.T) {
	f := newPlanFixture(t)
	res := runFactory(t, []string{"OPENAI_API_KEY="}, "plan", "--spec", f.spec, "--outdir", f.out, "--artifacts-dir", f.arts,
		"--llm-base-url", f.srv.URL)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "OPENAI_API_KEY") {
		t.Fatalf("exit %d, want %d naming OPENAI_API_KEY\n%s", res.code, ExitUsage, res.stderr)
	}
	for _, dir := range []string{f.out, f.arts} {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created (stat: %v)", dir, err)
		}
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

// A provider failure is not the plan's fault: it ends the compile at once,
// with exit 3 and a one-line hint, and none of it reaches a prompt.
func TestPlanProviderErrorEndsCompileAtOnce(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/v1"
	closed.Close()
	tests := []struct {
		name     string
		reply    llmtest.ResponsesReply
		baseURL  string // "" means the fixture's server
		want     []string
		requests int
	}{
		{name: "401", reply: llmtest.ResponsesReply{HTTPErrors: []int{401}}, want: []string{"rejected the API key (HTTP 401): check OPENAI_API_KEY"}, requests: 1},
		{name: "403", reply: llmtest.ResponsesReply{HTTPErrors: []int{403}}, want: []string{"HTTP 403", "OPENAI_API_KEY"}, requests: 1},
		{name: "404", reply: llmtest.ResponsesReply{HTTPErrors: []int{404}}, want: []string{"HTTP 404", "--llm-base-url", "--llm-model"}, requests: 1},
		{name: "503 four times", reply: llmtest.ResponsesReply{HTTPErrors: []int{503, 503, 503, 503}}, want: []string{"HTTP 503, gave up after 4 attempts"}, requests: 4},
		{name: "closed port", baseURL: closedURL, want: []string{closedURL, "connection refused", "--llm-base-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.reply.Content = validPlan(t)
			f := newPlanFixture(t, tt.reply)
			if tt.baseURL != "" {
				f.srv.URL = tt.baseURL
			}
			res := f.run(t, "--no-review", "--max-attempts", "3")
			if res.code != ExitInternal {
				t.Fatalf("exit %d, want %d\n%s", res.code, ExitInternal, res.stderr)
			}
			var last string
			for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
				if strings.HasPrefix(line, "factory: ") {
					last = line
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("error line %q lacks %q\nstderr:\n%s", last, w, res.stderr)
				}
			}
			if n := len(f.srv.Requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if _, err := os.Stat(filepath.Join(f.arts, "prompt_attempt_2.txt")); err == nil {
				t.Error("a second attempt was prompted after a provider failure")
			}
			if s := f.summary(t); s.Success || s.Attempts != 0 || !strings.Contains(s.Error, tt.want[0]) {
				t.Errorf("summary success=%v attempts=%d error=%q", s.Success, s.Attempts, s.Error)
			}
			for _, name := range listDir(t, f.out) {
				if strings.HasPrefix(name, "WO-") {
					t.Errorf("a plan was written: %s", name)
				}
			}
		})
	}
}

func TestPlanRetries503ThenSucceeds(t *testing.T) {
	f := newPlanFixture(t, llmtest.ResponsesReply{HTTPErrors: []int{503, 503}, Content: validPlan(t)})
	res := f.run(t, "--no-review")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if n := len(f.srv.Requests()); n != 3 {
		t.Errorf("%d submissions, want 3", n)
	}
	if s := f.summary(t); s.Attempts != 1 {
		t.Errorf("summary attempts = %d, want 1: retries are not attempts", s.Attempts)
	}
}

// In the review phase a plan has already passed: an outage keeps it
// unreviewed, but a setup mistake (a bad key, a misspelt --review-model)
// still ends the compile.
func TestPlanReviewerProviderErrors(t *testing.T) {
	tests := []struct {
		name    string
		errs    []int
		code    int
		outcome string
	}{
		{name: "outage keeps the plan", errs: []int{503, 503, 503, 503}, code: 0, outcome: "keeps failing"},
		{name: "unknown endpoint ends the compile", errs: []int{404}, code: ExitInternal},
		{name: "bad key ends the compile", errs: []int{401}, code: ExitInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPlanFixture(t, done(validPlan(t)), llmtest.ResponsesReply{HTTPErrors: tt.errs, Content: `{"findings":[]}`})
			res := f.run(t, "--review-model", "reviewer-model")
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, tt.code, res.stderr)
			}
			s := f.summary(t)
			if tt.code == 0 {
				if s.AcceptedAttempt != 1 || len(s.Review) != 1 || !strings.Contains(s.Review[0].Outcome, tt.outcome) {
					t.Errorf("summary accepted=%d review=%+v", s.AcceptedAttempt, s.Review)
				}
				return
			}
			if s.Success || len(listDir(t, f.out)) != 0 {
				t.Errorf("summary success=%v, outdir %v; want no plan written", s.Success, listDir(t, f.out))
			}
		})
	}
}
