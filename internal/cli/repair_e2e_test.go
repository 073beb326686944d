package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
)

// The repair tests build the calculator of build_e2e_test.go from a plan
// whose WO-02 names a test module that does not exist: no proposal can
// pass it, and after two identical failures the build asks the planner
// (the Responses API) for a repair.
const typoCommand = "python3 -m unittest tests.test_multiply_typo -q"

// typoPlan is buildPlan with WO-02's acceptance command unpassable.
func typoPlan() map[string]any {
	p := buildPlan("")
	p["work_orders"].([]any)[1].(map[string]any)["acceptance_commands"] = []string{typoCommand}
	return p
}

// repairReply is the planner's repaired plan: WO-01 as it was, WO-02
// replaced by WO-02r1 (by default with the acceptance command WO-02
// should have had), WO-03 as it was; mutate changes the plan's orders.
func repairReply(mutate func(orders []any)) llmtest.ResponsesReply {
	p := typoPlan()
	orders := p["work_orders"].([]any)
	fixed := orders[1].(map[string]any)
	fixed["id"] = "WO-02r1"
	fixed["acceptance_commands"] = []string{"python3 -m unittest tests.test_multiply -q"}
	if mutate != nil {
		mutate(orders)
	}
	data, _ := json.Marshal(p)
	return llmtest.ResponsesReply{Content: string(data)}
}

// repairServers serves the planner's replies on the Responses API and the
// SE's on Chat Completions behind one base URL.
func repairServers(t *testing.T, planner []llmtest.ResponsesReply, se ...llmtest.Reply) (*llmtest.ResponsesServer, *llmtest.Server, string) {
	p := llmtest.StartResponses(t, planner...)
	s := llmtest.Start(t, se...)
	return p, s, routeByPath(t, map[string]string{"/v1/responses": p.URL, "/v1/chat/completions": s.URL})
}

// promptOf is a Responses request's prompt text.
func promptOf(req map[string]any) string {
	var b strings.Builder
	items, _ := req["input"].([]any)
	for _, m := range items {
		mm, _ := m.(map[string]any)
		switch c := mm["content"].(type) {
		case string:
			b.WriteString(c)
		case []any:
			for _, part := range c {
				p, _ := part.(map[string]any)
				s, _ := p["text"].(string)
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func buildSummary(t *testing.T, res runOut) builder.Summary {
	t.Helper()
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	return sum
}

// events lists the event names of a build's events.jsonl, with the
// repair events' details.
func events(t *testing.T, buildDir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(buildDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func repairEvents(evs []map[string]any) []string {
	var out []string
	for _, ev := range evs {
		if name, _ := ev["event"].(string); strings.HasPrefix(name, "repair_") {
			out = append(out, name)
		}
	}
	return out
}

// historyOf is the build branch's history since base: each commit's hash,
// tree and trailers, oldest first.
func historyOf(t *testing.T, repo, base string) []string {
	t.Helper()
	var out []string
	for _, c := range strings.Split(git(t, repo, "log", "--reverse", "--format=%H %T %s%n%(trailers:only,unfold)%x1e", base+"..HEAD"), "\x1e") {
		out = append(out, strings.ReplaceAll(strings.TrimSpace(c), "\n", " | "))
	}
	if len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// A build whose WO-02 cannot pass: with --repair off it stops there
// exactly as before repairs existed; run again with repairs (the default),
// WO-02 fails again, the planner replaces it with WO-02r1, and the build
// passes with WO-01's commit untouched.
func TestBuildRepairPasses(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	base := git(t, f.repo, "rev-parse", "HEAD")
	planner, se, url := repairServers(t, nil, replyWO01, replyWO02, replyWO02)
	off := f.build(t, url, "--repair", "off", "--json", "--poll-interval", "10ms")
	if off.code != ExitFail || len(planner.Requests()) != 0 || se.Remaining() != 0 {
		t.Fatalf("--repair off: exit %d, %d planner requests, %d replies left\n%s", off.code, len(planner.Requests()), se.Remaining(), off.stderr)
	}
	if strings.Contains(off.stdout, `"repairs"`) || strings.Contains(off.stderr, "repair") {
		t.Errorf("--repair off mentions repairs:\n%s%s", off.stdout, off.stderr)
	}
	sum := buildSummary(t, off)
	if sum.Failed != "WO-02" || sum.WorkOrders[1].Stage != "acceptance_failed" {
		t.Errorf("--repair off summary %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(sum.BuildDir, "repairs")); err == nil {
		t.Errorf("--repair off made a repairs directory")
	}
	wo01 := git(t, f.repo, "rev-parse", "HEAD")
	tree01 := git(t, f.repo, "rev-parse", "HEAD^{tree}")

	planner, se, url = repairServers(t, []llmtest.ResponsesReply{repairReply(nil)}, replyWO02, replyWO02, replyWO02, replyWO03)
	res := f.build(t, url, "--poll-interval", "10ms")
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if planner.Remaining() != 0 || se.Remaining() != 0 {
		t.Errorf("replies left: planner %d, se %d", planner.Remaining(), se.Remaining())
	}
	for _, want := range []string{"verdict: PASS (passed after 1 repair)", "repair 1 (WO-02 failed at acceptance_failed): removed WO-02; added WO-02r1", "diff.txt"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
	if !strings.Contains(res.stderr, "PASS after 1 repair") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
	hist := historyOf(t, f.repo, base)
	if len(hist) != 3 || !strings.HasPrefix(hist[0], wo01+" ") || !strings.Contains(hist[1], "factory: WO-02r1 multiply()") ||
		!strings.Contains(hist[1], "Factory-Repair: 1") || strings.Contains(hist[0], "Factory-Repair") || strings.Contains(hist[2], "Factory-Repair") {
		t.Errorf("history:\n%s", strings.Join(hist, "\n"))
	}
	checkClean(t, f.repo)

	// The request names WO-01 by its tree, not its commit, and carries
	// the failure.
	prompt := promptOf(planner.Requests()[0])
	for _, want := range []string{tree01, typoCommand, "tests.test_multiply_typo", "acceptance_failed", "WO-01, WO-02, WO-03"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the repair prompt lacks %q", want)
		}
	}
	if strings.Contains(prompt, wo01) || strings.Contains(prompt, f.repo) {
		t.Errorf("the repair prompt names a commit or the repository's path")
	}

	dir := filepath.Join(f.out, "builds", sum.PlanHash, "repairs", "1")
	for _, name := range []string{"request.json", "plan_before.json", "prompt_attempt_1.txt", "llm_raw_response_attempt_1.txt",
		"validation_errors_attempt_1.json", "plan_after.json", "diff.txt", "repair.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	diff, _ := os.ReadFile(filepath.Join(dir, "diff.txt"))
	for _, want := range []string{`- WO-02 "multiply()" removed`, `+ WO-02r1 "multiply()" added`, "WO-03 after: WO-01, WO-02r1 (was: WO-01, WO-02)"} {
		if !strings.Contains(string(diff), want) {
			t.Errorf("diff.txt lacks %q:\n%s", want, diff)
		}
	}
	if got := repairEvents(events(t, sum.BuildDir)); !slices.Equal(got, []string{"repair_started", "repair_applied"}) {
		t.Errorf("repair events %v", got)
	}
	var final builder.Summary
	data, _ := os.ReadFile(filepath.Join(sum.BuildDir, "build_summary.json"))
	if err := json.Unmarshal(data, &final); err != nil || len(final.Repairs) != 1 || final.Repairs[0].Outcome != builder.RepairApplied ||
		final.Failed != "" || len(final.WorkOrders) != 3 || final.WorkOrders[1].ID != "WO-02r1" {
		t.Errorf("build_summary.json: %v %+v", err, final)
	}
	st := f.status(t)
	if !st.Complete || !slices.Equal(outcomes(st), []string{"WO-01:passed:", "WO-02r1:passed:", "WO-03:passed:"}) || len(st.Repairs) != 1 {
		t.Errorf("status %+v", st)
	}
	if text := runFactory(t, nil, "status", "--repo", f.repo); !strings.Contains(text.stdout, "repair 1 (WO-02 failed at acceptance_failed): removed WO-02; added WO-02r1") {
		t.Errorf("status does not list the repair:\n%s", text.stdout)
	}

	// Again: the repaired plan is read back, nothing is asked.
	planner, se, url = repairServers(t, nil)
	again := f.build(t, url, "--poll-interval", "10ms")
	if again.code != ExitPass || len(planner.Requests()) != 0 || len(se.Requests()) != 0 || !strings.Contains(again.stderr, "3 already committed") {
		t.Errorf("again: exit %d\n%s", again.code, again.stderr)
	}
}

// Replies that break the repair rules are sent back with their errors: a
// committed order edited (E110), every acceptance command dropped
// (E005, E109), the failed order's id used again (E111).
func TestBuildRepairRejectsAndRevises(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	edited := repairReply(func(orders []any) { orders[0].(map[string]any)["title"] = "Skeleton, renamed" })
	dropped := repairReply(func(orders []any) { orders[1].(map[string]any)["acceptance_commands"] = []string{} })
	reused := repairReply(func(orders []any) { orders[1].(map[string]any)["id"] = "WO-02" })
	planner, se, url := repairServers(t, []llmtest.ResponsesReply{edited, dropped, reused, repairReply(nil)},
		replyWO01, replyWO02, replyWO02, replyWO02, replyWO03)
	res := f.build(t, url, "--poll-interval", "10ms", "--plan-max-attempts", "4", "--json")
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if planner.Remaining() != 0 || se.Remaining() != 0 {
		t.Errorf("replies left: planner %d, se %d", planner.Remaining(), se.Remaining())
	}
	reqs := planner.Requests()
	for i, want := range []string{"[E110] WO-01", "[E109] WO-02r1 acceptance_commands", "[E111] WO-02 id"} {
		if p := promptOf(reqs[i+1]); !strings.Contains(p, want) {
			t.Errorf("revision %d does not say %q", i+1, want)
		}
	}
	sum := buildSummary(t, res)
	var codes [][]string
	for _, ev := range events(t, sum.BuildDir) {
		if ev["event"] == "repair_rejected" {
			var c []string
			for _, x := range ev["codes"].([]any) {
				c = append(c, x.(string))
			}
			codes = append(codes, c)
		}
	}
	if want := [][]string{{"E110"}, {"E005", "E109"}, {"E111"}}; !slices.EqualFunc(codes, want, slices.Equal) {
		t.Errorf("rejections %v, want %v", codes, want)
	}
	if len(sum.Repairs) != 1 || sum.Repairs[0].Attempts != 4 || sum.Repairs[0].Outcome != builder.RepairApplied {
		t.Errorf("repairs %+v", sum.Repairs)
	}
}

// The planner may give up: the build ends FAIL at the order, with the
// reason; a repair whose every reply is invalid ends it the same way.
func TestBuildRepairGivesUp(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	_, _, url := repairServers(t, []llmtest.ResponsesReply{{Content: `{"give_up": "the spec wants multiply to add"}`}},
		replyWO01, replyWO02, replyWO02)
	res := f.build(t, url, "--poll-interval", "10ms", "--json")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	sum := buildSummary(t, res)
	if sum.Verdict != builder.VerdictFail || sum.Failed != "WO-02" || len(sum.Repairs) != 1 ||
		sum.Repairs[0].Outcome != builder.RepairGaveUp || sum.Repairs[0].Reason != "the spec wants multiply to add" {
		t.Errorf("summary %+v", sum)
	}
	if !strings.Contains(res.stderr, "the planner gave up: the spec wants multiply to add; the build stops at WO-02") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
	if got := repairEvents(events(t, sum.BuildDir)); !slices.Equal(got, []string{"repair_started", "repair_gave_up"}) {
		t.Errorf("repair events %v", got)
	}
	checkCommits(t, f.repo, git(t, f.repo, "rev-parse", "main"), map[string][]string{"WO-01": committed["WO-01"]})

	g := newBuildFixture(t, typoPlan())
	_, _, url = repairServers(t, []llmtest.ResponsesReply{{Content: "no"}, {Content: "still no"}}, replyWO01, replyWO02, replyWO02)
	res = g.build(t, url, "--poll-interval", "10ms", "--plan-max-attempts", "2", "--json")
	sum = buildSummary(t, res)
	if res.code != ExitFail || len(sum.Repairs) != 1 || sum.Repairs[0].Outcome != builder.RepairRejected || !strings.Contains(sum.Repairs[0].Reason, "E000") {
		t.Errorf("invalid replies: exit %d, %+v", res.code, sum.Repairs)
	}
}

// Repairs run out: the repaired order fails too and --max-repairs 1 is
// used up; the build exits 1 naming the order, its failure and the repair.
func TestBuildRepairExhausted(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	stillWrong := repairReply(func(orders []any) {
		orders[1].(map[string]any)["acceptance_commands"] = []string{"python3 -m unittest tests.test_multiply_typo2 -q"}
	})
	planner, _, url := repairServers(t, []llmtest.ResponsesReply{stillWrong}, replyWO01, replyWO02, replyWO02, replyWO02, replyWO02)
	res := f.build(t, url, "--poll-interval", "10ms", "--max-repairs", "1")
	if res.code != ExitFail || planner.Remaining() != 0 {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	want := "WO-02r1 failed and no repairs are left (--max-repairs 1); repairs tried: repair 1 (WO-02 failed at acceptance_failed): removed WO-02; added WO-02r1"
	if !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, "WO-02r1: FAIL at acceptance_failed") {
		t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
	}
	if !strings.Contains(res.stdout, "WO-02r1 failed   acceptance_failed") || !strings.Contains(res.stdout, "repairs: 1") {
		t.Errorf("stdout:\n%s", res.stdout)
	}
	if got := outcomes(f.status(t)); !slices.Equal(got, []string{"WO-01:passed:", "WO-02r1:failed:acceptance_failed", "WO-03:pending:"}) {
		t.Errorf("status %v", got)
	}
}

// A build killed during the repair call resumes the repair (no order runs
// again); one killed after it resumes on the repaired plan without asking
// the planner. Both end with the history of a build never killed.
func TestBuildRepairKilled(t *testing.T) {
	// WO-02r1 waits for the release file before its real check.
	slow := func() llmtest.ResponsesReply {
		return repairReply(func(orders []any) {
			orders[1].(map[string]any)["acceptance_commands"] = []string{waitCommand(releaseFile, ""), "python3 -m unittest tests.test_multiply -q"}
		})
	}
	ref := newBuildFixture(t, typoPlan())
	ref.release(t)
	_, _, url := repairServers(t, []llmtest.ResponsesReply{slow()}, replyWO01, replyWO02, replyWO02, replyWO02, replyWO03)
	if res := ref.build(t, url, "--poll-interval", "10ms"); res.code != ExitPass {
		t.Fatalf("reference build: exit %d\n%s", res.code, res.stderr)
	}
	base := git(t, ref.repo, "rev-parse", "main")
	want := historyOf(t, ref.repo, base)

	for _, when := range []string{"during", "after"} {
		t.Run(when, func(t *testing.T) {
			f := newBuildFixture(t, typoPlan())
			reply := slow()
			if when == "during" {
				reply.Statuses = []string{"in_progress"} // never answers
			}
			planner, se, url := repairServers(t, []llmtest.ResponsesReply{reply}, replyWO01, replyWO02, replyWO02, replyWO02)
			cmd := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(url, "--poll-interval", "10ms")...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if when == "during" {
				waitUntil(t, 2*time.Minute, "the repair call", func() bool { return len(planner.Requests()) > 0 })
			} else {
				waitUntil(t, 2*time.Minute, "WO-02r1's slow command", func() bool {
					return exists(filepath.Join(f.repo, ".git", "factory", "command.json")) && exists(filepath.Join(f.repo, startedFile))
				})
			}
			cmd.Process.Kill()
			cmd.Wait()
			sesBefore := len(se.Requests())

			f.release(t)
			var replies []llmtest.ResponsesReply
			if when == "during" {
				replies = []llmtest.ResponsesReply{slow()}
			}
			planner2, se2, url := repairServers(t, replies, replyWO02, replyWO03)
			res := f.build(t, url, "--poll-interval", "10ms")
			if res.code != ExitPass {
				t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
			}
			if planner2.Remaining() != 0 || se2.Remaining() != 0 || len(planner2.Requests()) != len(replies) {
				t.Errorf("resume: planner asked %d times (%d left), se %d left", len(planner2.Requests()), planner2.Remaining(), se2.Remaining())
			}
			if p := se2.UserPrompt(0); !strings.Contains(p, "WO-02r1") {
				t.Errorf("the resumed build ran another order first (%d SE calls before the kill)", sesBefore)
			}
			if when == "during" && !strings.Contains(res.stderr, "repair 1 was cut off; resuming it") {
				t.Errorf("stderr:\n%s", res.stderr)
			}
			if got := historyOf(t, f.repo, base); !slices.Equal(got, want) {
				t.Errorf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			checkClean(t, f.repo)
		})
	}
}

// With -j 2, orders already running when an order fails finish; the
// repair comes before any order that depends on the failed one starts,
// and the repaired plan keeps the committed orders first.
func TestBuildRepairParallel(t *testing.T) {
	plan := chainPlan("")
	beta1 := plan["work_orders"].([]any)[2].(map[string]any)
	beta1["acceptance_commands"] = []string{"python3 -m unittest tests.test_beta_typo -q"}
	f := newBuildFixture(t, plan)
	replies := chainReplies()
	committedLine := regexp.MustCompile(`(?m)^- (WO-[0-9]+(?:r[0-9]+)?) "[^"]*", committed`)
	planner := llmtest.StartResponsesFunc(t, func(req map[string]any) llmtest.ResponsesReply {
		var first, rest []any
		done := map[string]bool{}
		for _, m := range committedLine.FindAllStringSubmatch(promptOf(req), -1) {
			done[m[1]] = true
		}
		for _, o := range chainPlan("")["work_orders"].([]any) {
			wo := o.(map[string]any)
			switch {
			case done[wo["id"].(string)]:
				first = append(first, wo)
			case wo["id"] == "WO-03":
				wo["id"] = "WO-03r1"
				rest = append(rest, wo)
			default:
				rest = append(rest, wo)
			}
		}
		data, _ := json.Marshal(map[string]any{"verify_contract": plan["verify_contract"], "work_orders": append(first, rest...)})
		return llmtest.ResponsesReply{Content: string(data)}
	})
	header := regexp.MustCompile(`# Work order (WO-[0-9]+(?:r[0-9]+)?):`)
	se := llmtest.StartRouted(t, func(prompt string) llmtest.Reply {
		m := header.FindStringSubmatch(prompt)
		if m == nil {
			return llmtest.Reply{Status: 500, Body: `{"error":{"message":"unknown order"}}`}
		}
		return replies[strings.Split(m[1], "r")[0]][0]
	})
	url := routeByPath(t, map[string]string{"/v1/responses": planner.URL, "/v1/chat/completions": se.URL})
	res := f.build(t, url, "--poll-interval", "10ms", "-j", "2", "--json")
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	sum := buildSummary(t, res)
	if len(sum.Repairs) != 1 || sum.Repairs[0].Failed != "WO-03" || !slices.Equal(sum.Repairs[0].Added, []string{"WO-03r1"}) {
		t.Errorf("repairs %+v", sum.Repairs)
	}
	// beta2 (WO-06) depends on beta1: it starts only after the repair.
	var applied, beta2 string
	for _, ev := range events(t, sum.BuildDir) {
		switch {
		case ev["event"] == "repair_applied":
			applied = ev["ts"].(string)
		case ev["event"] == "wo_start" && ev["wo"] == "WO-06" && beta2 == "":
			beta2 = ev["ts"].(string)
		}
	}
	if applied == "" || beta2 == "" || beta2 < applied {
		t.Errorf("WO-06 started at %s, the repair was applied at %s", beta2, applied)
	}
	log := git(t, f.repo, "log", "--first-parent", "--format=%s", "main..HEAD")
	for _, id := range []string{"WO-01", "WO-02", "WO-03r1", "WO-04", "WO-05", "WO-06", "WO-07"} {
		if !strings.Contains(log, "factory: "+id+" ") {
			t.Errorf("%s is not on the branch:\n%s", id, log)
		}
	}
	checkNoWorktree(t, f.repo)
}

// A repair call counts against the budget like every call: one that could
// pass --max-tokens is not sent (exit 5), and the same command with room
// for it resumes the repair without running the failed order again.
func TestBuildRepairBudget(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	planner, _, url := repairServers(t, nil, replyWO01, replyWO02, replyWO02)
	// The planner's output budget makes the repair call's estimate too large.
	res := f.build(t, url, "--poll-interval", "10ms", "--max-tokens", "500000", "--max-output-tokens", "1000000", "--json")
	if res.code != ExitBudget || len(planner.Requests()) != 0 {
		t.Fatalf("exit %d, %d planner requests\n%s%s", res.code, len(planner.Requests()), res.stdout, res.stderr)
	}
	sum := buildSummary(t, res)
	if sum.Verdict != builder.VerdictBudget || !strings.Contains(res.stderr, "repair 1 stopped") {
		t.Errorf("summary %+v\n%s", sum, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(sum.BuildDir, "repairs", "1", "request.json")); err != nil {
		t.Error(err)
	}
	planner, se, url := repairServers(t, []llmtest.ResponsesReply{repairReply(nil)}, replyWO02, replyWO03)
	res = f.build(t, url, "--poll-interval", "10ms", "--max-tokens", "500000")
	if res.code != ExitPass || planner.Remaining() != 0 || se.Remaining() != 0 || !strings.Contains(se.UserPrompt(0), "WO-02r1") {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "repair 1 was cut off; resuming it") || !strings.Contains(res.stderr, "earlier processes spent") {
		t.Errorf("stderr:\n%s", res.stderr)
	}
}

// A build that repaired its plan, recorded, replays in a fresh repository
// to the same history: the repair prompt names no commit and no path.
func TestBuildRepairReplays(t *testing.T) {
	f := newBuildFixture(t, typoPlan())
	_, _, url := repairServers(t, []llmtest.ResponsesReply{repairReply(nil)}, replyWO01, replyWO02, replyWO02, replyWO02, replyWO03)
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	if res := f.build(t, url, "--poll-interval", "10ms", "--record", transcript); res.code != ExitPass {
		t.Fatalf("record: exit %d\n%s", res.code, res.stderr)
	}
	g := newBuildFixture(t, typoPlan())
	res := g.build(t, "http://127.0.0.1:1/v1", "--replay", transcript)
	if res.code != ExitPass {
		t.Fatalf("replay: exit %d\n%s", res.code, res.stderr)
	}
	base := git(t, f.repo, "rev-parse", "main")
	if got, want := historyOf(t, g.repo, base), historyOf(t, f.repo, base); !slices.Equal(got, want) {
		t.Errorf("replayed history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
