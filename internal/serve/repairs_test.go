package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/builder"
)

// repairHash is the build of fixtureRepairs.
const repairHash = "bbbb000000000002"

// fixtureRepairs writes a build whose plan was repaired, as the builder
// leaves it: WO-02 failed; repair 1 removed it, added WO-02r1, WO-02r2 and
// WO-02r10 and revised WO-03; WO-02r2 failed and repair 2 gave up; repair
// 3 was cut off. The build was published to a pull request. Replies,
// reasons and the pull request carry hostile payloads.
func fixtureRepairs(t testing.TB, out string) {
	t.Helper()
	dir := filepath.Join(out, "builds", repairHash)
	ts := func(s int) string { return time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC).Format(time.RFC3339Nano) }
	ev := jsonLine(t, map[string]any{"event": "build_start", "plan_hash": repairHash, "branch": "factory/" + repairHash, "ts": ts(0)}) +
		jsonLine(t, map[string]any{"event": "plan", "work_orders": 3, "ts": ts(1)})
	for i, w := range []struct{ id, verdict string }{{"WO-01", "PASS"}, {"WO-02", "FAIL"}, {"WO-02r2", "FAIL"}, {"WO-02r1", "PASS"}} {
		ev += jsonLine(t, map[string]any{"event": "wo_start", "wo": w.id, "ts": ts(2 + 2*i)}) +
			jsonLine(t, map[string]any{"event": "wo_end", "wo": w.id, "verdict": w.verdict, "ts": ts(3 + 2*i)})
	}
	ev += jsonLine(t, map[string]any{"event": "build_end", "verdict": "FAIL", "ts": ts(20)})
	write(t, filepath.Join(dir, "events.jsonl"), ev)
	wo := func(id, title string) map[string]any {
		return map[string]any{"id": id, "title": title, "intent": "i", "allowed_files": []string{"a.py"}, "forbidden": []string{},
			"acceptance_commands": []string{"python3 -m pytest"}, "context_files": []string{}}
	}
	for _, id := range []string{"WO-01", "WO-02", "WO-03"} {
		write(t, filepath.Join(out, "plans", repairHash, id+".json"), jsonLine(t, wo(id, "first "+id)))
	}
	plan := func(ids ...string) string {
		var wos []any
		for _, id := range ids {
			wos = append(wos, wo(id, "repaired "+id))
		}
		return jsonLine(t, map[string]any{"verify_contract": nil, "work_orders": wos})
	}
	r1 := filepath.Join(dir, "repairs", "1")
	write(t, filepath.Join(r1, "request.json"), `{"failed":{"id":"WO-02"}}`)
	write(t, filepath.Join(r1, "plan_before.json"), plan("WO-01", "WO-02", "WO-03"))
	for _, n := range []string{"1", "2"} {
		write(t, filepath.Join(r1, "prompt_attempt_"+n+".txt"), "repair prompt")
		write(t, filepath.Join(r1, "llm_raw_response_attempt_"+n+".txt"), "reply "+xssScript)
	}
	write(t, filepath.Join(r1, "validation_errors_attempt_1.json"), `[{"code":"E109"}]`)
	write(t, filepath.Join(r1, "plan_after.json"), plan("WO-01", "WO-02r1", "WO-02r2", "WO-02r10", "WO-03"))
	write(t, filepath.Join(r1, "diff.txt"), "repair 1: WO-02 \"x\" failed\n- WO-02 removed\n+ WO-02r1 "+xssImg+" added\n")
	write(t, filepath.Join(r1, "repair.json"), jsonLine(t, builder.RepairRecord{Repair: 1, Failed: "WO-02", Title: "Parse " + xssScript, Stage: "acceptance_failed",
		Outcome: builder.RepairApplied, Attempts: 2, Removed: []string{"WO-02"}, Added: []string{"WO-02r1", "WO-02r2", "WO-02r10"}, Revised: []string{"WO-03"}, Tokens: 900, Dir: r1}))
	r2 := filepath.Join(dir, "repairs", "2")
	write(t, filepath.Join(r2, "prompt_attempt_1.txt"), "repair prompt")
	write(t, filepath.Join(r2, "repair.json"), jsonLine(t, builder.RepairRecord{Repair: 2, Failed: "WO-02r2", Stage: "verify_failed", Outcome: builder.RepairGaveUp,
		Reason: "the spec asks for " + xssLink, Attempts: 1, Removed: []string{}, Added: []string{}, Revised: []string{}, Dir: r2}))
	write(t, filepath.Join(dir, "repairs", "3", "request.json"), `{}`)
	write(t, filepath.Join(dir, "pr.json"), `{"forge":"github","repo":"acme/calc","number":42,"url":"https://github.com/acme/calc/pull/42","state":"open","draft":true,`+
		`"head":"factory/`+repairHash+`","base":"main","commit":"0123456789abcdef0123456789abcdef01234567","action":"created","pushed":true}`)
}

func TestBuildPageShowsRepairsAndPR(t *testing.T) {
	out := t.TempDir()
	fixtureRepairs(t, out)
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	_, api, _ := get(t, ts.URL+"/api/builds/0/"+repairHash)
	var v BuildView
	if err := json.Unmarshal([]byte(api), &v); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range v.WOs {
		ids = append(ids, w.ID)
	}
	if want := []string{"WO-01", "WO-02", "WO-02r1", "WO-02r2", "WO-02r10", "WO-03"}; !slices.Equal(ids, want) {
		t.Errorf("work orders listed %v, want %v", ids, want)
	}
	if v.PlanRepair != 1 || len(v.Plan) != 5 || v.Plan[1].ID != "WO-02r1" {
		t.Errorf("the plan shown is repair %d's, %d orders; want repair 1's, 5", v.PlanRepair, len(v.Plan))
	}
	var outcomes []string
	for _, r := range v.Repairs {
		outcomes = append(outcomes, r.Outcome)
	}
	if want := []string{"applied", "gave_up", "pending"}; !slices.Equal(outcomes, want) {
		t.Errorf("repair outcomes %v, want %v", outcomes, want)
	}
	var labels []string
	for _, f := range v.Repairs[0].Files {
		labels = append(labels, f.Label)
	}
	if want := []string{"request", "plan before", "prompt 1", "reply 1", "validation errors 1", "prompt 2", "reply 2", "plan after", "diff", "record"}; !slices.Equal(labels, want) {
		t.Errorf("repair 1's files %v, want %v", labels, want)
	}
	if v.PR == nil || v.PR.Record == nil || v.PR.Record.Number != 42 || v.PR.Link != "https://github.com/acme/calc/pull/42" {
		t.Errorf("pull request %+v", v.PR)
	}

	_, page, _ := get(t, ts.URL+"/builds/0/"+repairHash)
	for _, want := range []string{
		`<a href="/files/out/0/builds/` + repairHash + `/repairs/1/llm_raw_response_attempt_2.txt">reply 2</a>`,
		`<a href="/files/out/0/builds/` + repairHash + `/repairs/1/plan_after.json">plan after</a>`,
		`removed by repair 1`, `added by repair 1`, `revised by repair 1`, `The plan as repair 1 left it`,
		`the planner gave up:`, `the spec asks for &lt;a href=`, `WO-02r1 &lt;img src=x`, `No outcome recorded yet`,
		`<a href="https://github.com/acme/calc/pull/42" rel="noreferrer noopener">#42</a>`, `open, draft`,
		`<code>factory/` + repairHash + `</code> → <code>main</code>`, `<code>0123456789ab</code>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the build page lacks %q", want)
		}
	}
	checkPages(t, map[string]string{"/builds/0/" + repairHash: page, "/api/builds/0/" + repairHash: api})
	if code, body, _ := get(t, ts.URL+"/files/out/0/builds/"+repairHash+"/repairs/1/llm_raw_response_attempt_2.txt"); code != 200 || !strings.Contains(body, "reply ") {
		t.Errorf("a repair's reply: %d %q", code, body)
	}

	var buf strings.Builder
	if err := Report(t.Context(), &buf, ReportOptions{Out: out, Build: repairHash}); err != nil {
		t.Fatal(err)
	}
	report := buf.String()
	if !strings.Contains(report, "Repairs of the plan") || !strings.Contains(report, "validation errors 1") || strings.Contains(report, "/files/") ||
		strings.Contains(strings.ToLower(report), "<script") || !strings.Contains(report, `href="https://github.com/acme/calc/pull/42"`) {
		t.Errorf("the report's repairs or pull request:\n%.3000s", report)
	}
}

// A repair directory or file that is a symlink leading out of the out
// dir is neither listed nor served.
func TestRepairLinksStayInside(t *testing.T) {
	out, outside := t.TempDir(), t.TempDir()
	fixtureRepairs(t, out)
	write(t, filepath.Join(outside, "secret.txt"), "secret")
	write(t, filepath.Join(outside, "4", "repair.json"), jsonLine(t, builder.RepairRecord{Repair: 4, Outcome: builder.RepairGaveUp}))
	r1 := filepath.Join(out, "builds", repairHash, "repairs", "1")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(r1, "prompt_attempt_3.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "4"), filepath.Join(out, "builds", repairHash, "repairs", "4")); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, Options{Outs: []string{out}})
	_, api, _ := get(t, ts.URL+"/api/builds/0/"+repairHash)
	if strings.Contains(api, "prompt_attempt_3") || strings.Contains(api, `"repair": 4`) {
		t.Errorf("a symlink out of the out dir is listed:\n%s", api)
	}
	if code, _, _ := get(t, ts.URL+"/files/out/0/builds/"+repairHash+"/repairs/1/prompt_attempt_3.txt"); code != 404 {
		t.Errorf("a symlinked repair file: %d, want 404", code)
	}
}

func TestDecodeRepair(t *testing.T) {
	valid := func(edit func(r *builder.RepairRecord)) string {
		r := builder.RepairRecord{Repair: 2, Failed: "WO-02", Outcome: builder.RepairApplied, Removed: []string{"WO-02"}, Added: []string{"WO-02r1"}, Revised: []string{}}
		if edit != nil {
			edit(&r)
		}
		b, _ := json.Marshal(r)
		return string(b)
	}
	tests := []struct {
		name, data string
		err        string // "" decodes
		check      func(r *builder.RepairRecord) bool
	}{
		{"as written", valid(nil), "", func(r *builder.RepairRecord) bool { return r.Added[0] == "WO-02r1" }},
		{"gave up", valid(func(r *builder.RepairRecord) { r.Outcome, r.Reason = builder.RepairGaveUp, "no way" }), "", nil},
		{"another repair's", valid(func(r *builder.RepairRecord) { r.Repair = 3 }), "says repair 3, in the directory of repair 2", nil},
		{"unknown outcome", valid(func(r *builder.RepairRecord) { r.Outcome = "<b>won</b>" }), `outcome "<b>won</b>" is none factory writes`, nil},
		{"unknown field", `{"repair":2,"outcome":"applied","extra":1}`, "unknown field", nil},
		{"duplicate key", `{"repair":2,"repair":2,"outcome":"applied"}`, "duplicate", nil},
		{"trailing data", valid(nil) + "{}", "after the top-level value", nil},
		{"wrong type", `{"repair":"2"}`, "repair", nil},
		{"null", "null", "null", nil},
		{"long reason cut", valid(func(r *builder.RepairRecord) {
			r.Outcome, r.Reason = builder.RepairRejected, strings.Repeat("é", 2*maxRepairReason)
		}), "",
			func(r *builder.RepairRecord) bool {
				return strings.HasSuffix(r.Reason, "…") && len([]rune(r.Reason)) == maxRepairReason+1
			}},
		{"many ids bounded", valid(func(r *builder.RepairRecord) { r.Added = slices.Repeat([]string{"WO-09"}, maxRepairIDs+5) }), "",
			func(r *builder.RepairRecord) bool {
				return len(r.Added) == maxRepairIDs+1 && r.Added[maxRepairIDs] == "and 5 more"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, why := decodeRepair(2, []byte(tt.data))
			switch {
			case tt.err == "" && r == nil:
				t.Fatalf("not decoded: %s", why)
			case tt.err != "" && (r != nil || !strings.Contains(why, tt.err)):
				t.Fatalf("decodeRepair = %+v, %q; want nil and %q", r, why, tt.err)
			case tt.check != nil && !tt.check(r):
				t.Fatalf("decoded as %+v", r)
			}
		})
	}
}

func TestDecodePR(t *testing.T) {
	tests := []struct {
		name, url string
		link      bool
	}{
		{"https", "https://github.com/acme/calc/pull/7", true},
		{"http", "http://gitea.local:3000/acme/calc/pulls/7", true},
		{"javascript", "javascript:alert(1)", false},
		{"data", "data:text/html,<script>x</script>", false},
		{"relative", "/acme/calc/pull/7", false},
		{"no host", "https:///x", false},
		{"too long", "https://a/" + strings.Repeat("x", maxDepsField), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"number": 7, "url": tt.url})
			v := decodePR(b)
			if v.Record == nil || v.Error != "" {
				t.Fatalf("not decoded: %s", v.Error)
			}
			if (v.Link != "") != tt.link || tt.link && v.Link != tt.url {
				t.Fatalf("link %q for %q", v.Link, tt.url)
			}
		})
	}
	for _, bad := range []string{`{"number":7,"token":"x"}`, `{"number":"7"}`, `{`, `[]`} {
		if v := decodePR([]byte(bad)); v.Record != nil || !strings.Contains(v.Error, "pr.json is not a record factory wrote") {
			t.Errorf("decodePR(%s) = %+v", bad, v)
		}
	}
}
