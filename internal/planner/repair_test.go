package planner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// The plan a repair starts from: WO-01 committed, WO-02 failed (its
// acceptance command names a test module that does not exist), WO-03 not
// run yet, with a check that passes whatever the code does.
func repairBefore(t *testing.T, contract any) *workorder.Manifest {
	t.Helper()
	raw := plan(t, contract,
		wo(1, creates("f01.py", "tests/test_f01.py")),
		wo(2, creates("f02.py"), cmds("python3 -m unittest tests.test_typo")),
		wo(3, creates("f03.py"), cmds(`python3 -c "print('ok')"`)))
	res := Validate(context.Background(), raw, Env{Python: &fakePython{}})
	if len(res.Errors()) > 0 {
		t.Fatalf("the plan before: %+v", res.Errors())
	}
	m := res.Manifest
	m.WorkOrders = ComputeVerifyExempt(m, nil)
	return m
}

func repairContext(before *workorder.Manifest) RepairContext {
	return RepairContext{Before: before, Committed: 1, Failed: "WO-02", Used: []string{"WO-01", "WO-02", "WO-03"},
		TipFiles: []string{"f01.py", "tests/test_f01.py"}}
}

// The orders of a reply: the committed WO-01 as it was, the failed WO-02
// revised, WO-03 as it was.
func wo01() map[string]any { return wo(1, creates("f01.py", "tests/test_f01.py")) }
func wo03() map[string]any { return wo(3, creates("f03.py"), cmds(`python3 -c "print('ok')"`)) }
func wo02r(id string, mutate ...func(map[string]any)) map[string]any {
	return wo(2, append([]func(map[string]any){set("id", id), creates("f02.py"), cmds("python3 -m unittest tests.test_f02")}, mutate...)...)
}

func TestValidateRepair(t *testing.T) {
	type tc struct {
		name     string
		contract any // of the plan before and the reply, unless reply is set
		reply    []byte
		used     []string // RepairContext.Used, when set
		tip      []string // RepairContext.TipFiles, when set
		want     []string // error codes, sorted; none for a valid repair
		field    string   // of one of the issues
		msg      string   // in that issue's message
		changes  *Changes // of a valid repair
	}
	p := func(orders ...map[string]any) []byte { return plan(t, nil, orders...) }
	tests := []tc{
		{name: "revised under a repair id", reply: p(wo01(), wo02r("WO-02r1"), wo03()),
			changes: &Changes{Removed: []string{"WO-02"}, Added: []string{"WO-02r1"}, Revised: []string{}}},
		{name: "the next free WO-NN", reply: p(wo01(), wo02r("WO-04"), wo03())},
		{name: "split in two with a prerequisite first", reply: p(wo01(), wo(7, set("id", "WO-02r1"), creates("lib.py"), cmds(`python3 -c "import lib"`)), wo02r("WO-02r2"), wo03()),
			changes: &Changes{Removed: []string{"WO-02"}, Added: []string{"WO-02r1", "WO-02r2"}, Revised: []string{}}},
		{name: "the failed order dropped", reply: p(wo01(), wo03()),
			changes: &Changes{Removed: []string{"WO-02"}, Added: []string{}, Revised: []string{}}},
		{name: "a pending order revised", reply: p(wo01(), wo02r("WO-02r1"), wo(3, creates("f03.py"), cmds("python3 -m unittest tests.test_f03"))),
			changes: &Changes{Removed: []string{"WO-02"}, Added: []string{"WO-02r1"}, Revised: []string{"WO-03"}}},

		{name: "a committed order edited", reply: p(wo(1, creates("f01.py", "tests/test_f01.py"), set("title", "Other")), wo02r("WO-02r1"), wo03()),
			want: []string{"E110"}, field: "", msg: "title changed"},
		{name: "a committed order left out", reply: p(wo02r("WO-02r1"), wo03()),
			want: []string{"E110"}, field: "id", msg: "must be the committed WO-01"},
		{name: "a committed order moved", reply: p(wo02r("WO-02r1"), wo01(), wo03()),
			want: []string{"E110"}, field: "id", msg: "committed WO-01"},
		{name: "the verify contract changed", contract: contract(exists("f01.py")),
			reply: plan(t, contract(exists("f03.py")), wo01(), wo02r("WO-02r1"), wo03()),
			want:  []string{"E110"}, field: "verify_contract", msg: "must stay exactly as it was"},

		{name: "the failed id again", reply: p(wo01(), wo02r("WO-02"), wo03()),
			want: []string{"E111"}, field: "id", msg: "such as WO-02r1 or WO-04"},
		{name: "an id a repair removed", used: []string{"WO-01", "WO-02", "WO-03", "WO-02r1"}, reply: p(wo01(), wo02r("WO-02r1"), wo03()),
			want: []string{"E111"}, field: "id", msg: "such as WO-02r2 or WO-04"},

		{name: "every acceptance command dropped", reply: p(wo01(), wo02r("WO-02r1", cmds()), wo03()),
			want: []string{"E005", "E109"}, field: "acceptance_commands", msg: "it has none"},
		{name: "checks that pass anyway", reply: p(wo01(), wo02r("WO-02r1", cmds("true", `python3 -c "pass; import sys; sys.exit(0)"`, "echo ok",
			`sh -c "exit 0"`, "timeout 5 true", "python3 --version", `env A=1 python3 -c "print('done')"`)), wo03()),
			want: []string{"E109"}, field: "acceptance_commands", msg: "passes whatever"},
		{name: "only global verification", reply: p(wo01(), wo02r("WO-02r1", cmds("bash scripts/verify.sh")), wo03()),
			want: []string{"E105", "E109"}},
		{name: "a pending order revised keeps a check that passes anyway", reply: p(wo01(), wo02r("WO-02r1"), wo(3, creates("f03.py"), cmds(`python3 -c "print('ok')"`), set("notes", "new"))),
			want: []string{"E109"}, field: "acceptance_commands"},

		{name: "nothing changed but the id", reply: p(wo01(), wo(2, set("id", "WO-02r1"), creates("f02.py"), cmds("python3 -m unittest tests.test_typo")), wo03()),
			want: []string{"E112"}, field: "work_orders", msg: "nothing but ids"},

		{name: "not an id", reply: p(wo01(), wo02r("WO-2r1"), wo03()), want: []string{"E001"}, field: "id", msg: "WO-NNrK"},
		{name: "r0", reply: p(wo01(), wo02r("WO-02r0"), wo03()), want: []string{"E001"}},
		{name: "r100", reply: p(wo01(), wo02r("WO-02r100"), wo03()), want: []string{"E001"}},
		{name: "an id twice", reply: p(wo01(), wo02r("WO-02r1"), wo(3, set("id", "WO-02r1"), creates("f03.py"), cmds("python3 -m unittest tests.test_f03"))),
			want: []string{"E001"}, msg: "already the id"},

		{name: "a precondition false at the tip", tip: []string{"f01.py", "tests/test_f01.py", "stray.py"},
			reply: p(wo01(), wo02r("WO-02r1", set("preconditions", conds(absent("stray.py")))), wo03()),
			want:  []string{"E101"}, field: "preconditions[0].path", msg: "tip of the build branch"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			before := repairBefore(t, c.contract)
			rc := repairContext(before)
			if c.used != nil {
				rc.Used = c.used
			}
			if c.tip != nil {
				rc.TipFiles = c.tip
			}
			reply := c.reply
			res := Validate(context.Background(), reply, Env{Python: &fakePython{}, Repair: &rc})
			errs := res.Errors()
			got := codes(errs)
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("codes %v, want %v: %+v", got, c.want, errs)
			}
			if len(c.want) > 0 {
				found := false
				for _, i := range errs {
					if (c.field == "" || i.Field == c.field) && strings.Contains(i.Message, c.msg) {
						found = true
					}
				}
				if !found {
					t.Errorf("no issue at %q with %q: %+v", c.field, c.msg, errs)
				}
				return
			}
			if res.Manifest == nil {
				t.Fatal("a valid repair has no manifest")
			}
			if c.changes != nil {
				if ch := PlanChanges(before, res.Manifest); !slices.Equal(ch.Removed, c.changes.Removed) ||
					!slices.Equal(ch.Added, c.changes.Added) || !slices.Equal(ch.Revised, c.changes.Revised) {
					t.Errorf("changes %+v, want %+v", ch, *c.changes)
				}
			}
		})
	}
}

// A plan holding a WO-NNrK id is a repaired one: its ids need only be
// unique, in any order, whoever validates it (factory validate, build
// --plan); a plan of WO-NN ids keeps the rule WO-01, WO-02, … in order, and
// a compile's reply keeps it whatever its ids.
func TestRepairIDsOnlyInRepairedPlans(t *testing.T) {
	raw := plan(t, nil, wo(1), wo(2, set("id", "WO-02r1")))
	if got := codes(Validate(context.Background(), raw, Env{compiled: true}).Errors()); !slices.Equal(got, []string{"E001"}) {
		t.Errorf("a compiled plan with WO-02r1: %v, want E001", got)
	}
	for _, env := range []Env{{}, {RepairIDs: true}} {
		res := Validate(context.Background(), raw, env)
		if len(res.Errors()) > 0 || res.Manifest == nil || res.Manifest.WorkOrders[1].ID != "WO-02r1" {
			t.Errorf("a repaired plan with WO-02r1 (RepairIDs %v): %+v", env.RepairIDs, res.Errors())
		}
	}
	// Repaired: a gap and any order, but no duplicate and no bad id.
	for name, c := range map[string]struct {
		raw  []byte
		want []string
	}{
		"gap and order": {plan(t, nil, wo(1), wo(4, set("id", "WO-03r1")), wo(4)), nil},
		"duplicate":     {plan(t, nil, wo(1), wo(2, set("id", "WO-02r1")), wo(3, set("id", "WO-02r1"))), []string{"E001"}},
		"bad id":        {plan(t, nil, wo(1), wo(2, set("id", "WO-02r1")), wo(3, set("id", "WO-3"))), []string{"E001"}},
		"plain gap":     {plan(t, nil, wo(1), wo(3)), []string{"E001"}},
	} {
		if got := codes(Validate(context.Background(), c.raw, Env{}).Errors()); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestFreshIDs(t *testing.T) {
	r, n := FreshIDs("WO-03", []string{"WO-01", "WO-02", "WO-03", "WO-03r1", "WO-05"})
	if r != "WO-03r2" || n != "WO-06" {
		t.Errorf("FreshIDs = %s, %s", r, n)
	}
	if r, _ := FreshIDs("WO-02r1", []string{"WO-02r1"}); r != "WO-02r2" {
		t.Errorf("the repair id of a repaired order: %s", r)
	}
}

// scriptModel answers requests with its replies in order; an error for a
// call beyond them.
type scriptModel struct {
	mu      sync.Mutex
	replies []string
	reqs    []llm.Request
}

func (m *scriptModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.reqs) > len(m.replies) {
		return llm.Response{}, errors.New("no reply scripted")
	}
	return llm.Response{Content: m.replies[len(m.reqs)-1], Usage: llm.Usage{TotalTokens: 10}}, nil
}

func repairOptions(t *testing.T, m llm.Model, dir string) RepairOptions {
	before := repairBefore(t, nil)
	before.WorkOrders[0].VerifyExempt = true // as the plan had it: kept byte for byte
	tree := "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	code := 1
	cmd := "python3 -m unittest tests.test_typo"
	return RepairOptions{
		Request: RepairRequest{
			Spec: "# spec\nthree functions\n", Plan: before,
			Committed: []CommittedOrder{{ID: "WO-01", Title: "Title", Tree: tree}},
			Failed: FailedOrder{ID: "WO-02", Title: "Title", Stage: "acceptance_failed", StoppedEarly: "identical failure",
				Attempts: []AttemptFailure{{Attempt: 1, Stage: "acceptance_failed", Command: &cmd, ExitCode: &code, Excerpt: "ModuleNotFoundError: No module named 'tests.test_typo'"}}},
			Used: []string{"WO-03", "WO-01", "WO-02"}, RepoFiles: []string{"f01.py", "tests/test_f01.py"},
		},
		Model: m, ModelName: "m", MaxAttempts: 3, CacheKey: "factory-key",
		Env: Env{Python: &fakePython{}}, Dir: dir,
	}
}

func TestRepairRevisesAnInvalidReply(t *testing.T) {
	edited := string(plan(t, nil, wo(1, creates("f01.py", "tests/test_f01.py"), set("title", "Other")), wo02r("WO-02r1"), wo03()))
	good := string(plan(t, nil, wo01(), wo02r("WO-02r1"), wo03()))
	m := &scriptModel{replies: []string{edited, good}}
	dir := t.TempDir()
	o := repairOptions(t, m, dir)
	var rejected []int
	o.OnRejected = func(n int, errs []Issue) {
		rejected = append(rejected, n)
		if codes(errs)[0] != "E110" {
			t.Errorf("reply %d rejected for %+v", n, errs)
		}
	}
	out, err := Repair(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Attempts != 2 || out.Calls != 2 || !slices.Equal(rejected, []int{1}) || out.GiveUp != "" || out.Usage.TotalTokens != 20 {
		t.Errorf("outcome %+v, rejected %v", out, rejected)
	}
	if !sameJSON(out.Manifest.WorkOrders[0], o.Request.Plan.WorkOrders[0]) || !out.Manifest.WorkOrders[0].VerifyExempt {
		t.Errorf("the committed order is not byte for byte the one before: %+v", out.Manifest.WorkOrders[0])
	}
	if ids := []string{out.Manifest.WorkOrders[1].ID, out.Manifest.WorkOrders[2].ID}; !slices.Equal(ids, []string{"WO-02r1", "WO-03"}) {
		t.Errorf("ids %v", ids)
	}
	first, second := m.reqs[0], m.reqs[1]
	prompt := first.Messages[0].Content
	for _, want := range []string{"three functions", "WO-01 \"Title\", committed (tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904)",
		"No module named 'tests.test_typo'", "Exit code: 1", "identical failure", "WO-01, WO-02, WO-03", `"give_up"`, "f01.py"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	if strings.Contains(prompt, "verify_exempt") || strings.Contains(prompt, "{{") {
		t.Errorf("the prompt shows verify_exempt or a placeholder:\n%s", prompt)
	}
	if len(second.Messages) != 2 || second.Messages[0].Content != prompt || !strings.Contains(second.Messages[1].Content, "[E110] WO-01") {
		t.Errorf("the revision does not keep the prompt as its first segment and add the errors")
	}
	if first.CacheKey != "factory-key" || second.CacheKey != "factory-key" {
		t.Errorf("cache keys %q, %q", first.CacheKey, second.CacheKey)
	}
	for _, f := range []string{"prompt_attempt_1.txt", "llm_raw_response_attempt_2.txt", "validation_errors_attempt_1.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}

	// The same repair again, as a resumed build asks it: both replies are
	// read back, no call is made, the outcome is the same.
	again := &scriptModel{}
	o.Model = again
	out2, err := Repair(context.Background(), o)
	if err != nil || len(again.reqs) != 0 || out2.Calls != 0 || !sameJSON(out2.Manifest, out.Manifest) {
		t.Errorf("read back: %v, %d calls", err, len(again.reqs))
	}
}

func TestRepairGivesUp(t *testing.T) {
	m := &scriptModel{replies: []string{`{"give_up": "the spec asks for two results at once", "work_orders": []}`, ` {"give_up": " the spec asks for two results at once "}`}}
	out, err := Repair(context.Background(), repairOptions(t, m, t.TempDir()))
	if err != nil || out.GiveUp != "the spec asks for two results at once" || out.Manifest != nil || out.Attempts != 2 {
		t.Fatalf("%v, %+v", err, out)
	}
	if !strings.Contains(m.reqs[1].Messages[1].Content, "[E000] give_up") {
		t.Errorf("a malformed give-up is not sent back as E000")
	}
}

func TestRepairStillInvalid(t *testing.T) {
	m := &scriptModel{replies: []string{"no", "no", "no"}}
	_, err := Repair(context.Background(), repairOptions(t, m, t.TempDir()))
	var invalid *InvalidPlanError
	if !errors.As(err, &invalid) || len(m.reqs) != 3 || invalid.Issues[0].Code != "E000" {
		t.Fatalf("%v after %d calls", err, len(m.reqs))
	}
	m = &scriptModel{}
	if _, err := Repair(context.Background(), repairOptions(t, m, t.TempDir())); !errors.As(err, new(*ModelError)) {
		t.Fatalf("a failed call: %v", err)
	}
}

// PlanJSON is the shape a reply takes: it validates as the plan it shows.
func TestPlanJSONRoundTrip(t *testing.T) {
	before := repairBefore(t, contract(exists("f01.py")))
	res := Validate(context.Background(), []byte(PlanJSON(before)), Env{Python: &fakePython{}})
	if len(res.Errors()) > 0 || !sameJSON(res.Manifest.WorkOrders[1], comparable(before.WorkOrders[1])) {
		t.Fatalf("%+v", res.Errors())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(PlanJSON(before)), &top); err != nil || len(top) != 2 {
		t.Fatalf("%v %v", err, top)
	}
}
