package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/llmtest"
)

// The parallel build benchmark (issue 29): a scripted model that answers
// every work order with a correct solution after a fixed latency, and the
// same plan built with -j 1 and -j 3. Run with bench/parallel.sh.

// pOrder is one work order of a benchmark plan: it writes step step of
// module (the functions f1…f<step>) and a test of it, and reads context.
type pOrder struct {
	module  string
	step    int
	context []string
}

// sixOrders: three chains of two, interleaved in plan order.
var sixOrders = []pOrder{
	{"alpha", 1, nil}, {"beta", 1, nil}, {"gamma", 1, nil},
	{"alpha", 2, nil}, {"beta", 2, nil}, {"gamma", 2, nil},
}

// twelveOrders: a realistic shape: a core, models and utilities on it,
// then layers that read what is below them, two of them extended later.
var twelveOrders = []pOrder{
	{"core", 1, nil},
	{"models", 1, []string{"core.py"}},
	{"util", 1, nil},
	{"api", 1, []string{"models.py"}},
	{"cli", 1, []string{"util.py"}},
	{"db", 1, []string{"models.py"}},
	{"report", 1, []string{"db.py", "util.py"}},
	{"auth", 1, []string{"core.py"}},
	{"api", 2, []string{"auth.py"}},
	{"export", 1, []string{"report.py"}},
	{"cli", 2, []string{"api.py"}},
	{"audit", 1, []string{"auth.py", "export.py"}},
}

func pModule(name string, step int) string {
	var b strings.Builder
	for i := 1; i <= step; i++ {
		fmt.Fprintf(&b, "def f%d():\n    return %d\n\n\n", i, i)
	}
	return b.String()
}

func pTest(name string, step int) string {
	return fmt.Sprintf("import unittest\n\nimport %s\n\n\nclass T(unittest.TestCase):\n    def test_f%d(self):\n        self.assertEqual(%s.f%d(), %d)\n", name, step, name, step, step)
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// writePlan writes orders as a plan directory and returns the model's
// reply for each work order.
func writePlan(tb testing.TB, dir string, orders []pOrder) map[string]string {
	tb.Helper()
	var wos []any
	replies := map[string]string{}
	for i, o := range orders {
		id := fmt.Sprintf("WO-%02d", i+1)
		test := fmt.Sprintf("tests/test_%s_%d.py", o.module, o.step)
		wo := map[string]any{
			"id": id, "title": fmt.Sprintf("%s step %d", o.module, o.step), "intent": "Add f" + strconv.Itoa(o.step) + " to " + o.module + ".py with a test.",
			"preconditions": []any{}, "postconditions": []any{map[string]string{"kind": "file_exists", "path": o.module + ".py"}, map[string]string{"kind": "file_exists", "path": test}},
			"allowed_files": []string{o.module + ".py", test}, "forbidden": []string{},
			"acceptance_commands": []string{fmt.Sprintf("python3 -m unittest tests.test_%s_%d -q", o.module, o.step)},
			"context_files":       append([]string{o.module + ".py", test}, o.context...),
		}
		wos = append(wos, wo)
		data, _ := json.MarshalIndent(wo, "", "  ")
		writeFile(tb, filepath.Join(dir, id+".json"), string(data))
		base := ""
		if o.step > 1 {
			base = pModule(o.module, o.step-1)
		}
		type write struct {
			Path       string `json:"path"`
			BaseSHA256 string `json:"base_sha256"`
			Content    string `json:"content"`
		}
		reply, _ := json.Marshal(map[string]any{"summary": id, "writes": []write{
			{o.module + ".py", hexSHA(base), pModule(o.module, o.step)},
			{test, hexSHA(""), pTest(o.module, o.step)},
		}})
		replies[id] = string(reply)
	}
	data, _ := json.MarshalIndent(map[string]any{"verify_contract": nil, "work_orders": wos}, "", "  ")
	writeFile(tb, filepath.Join(dir, "WORK_ORDERS_MANIFEST.json"), string(data))
	return replies
}

func writeFile(tb testing.TB, p, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestParallelBuild times -j 1 against -j 3 on both plans and checks the
// histories' trees are the same commit by commit.
func TestParallelBuild(t *testing.T) {
	if os.Getenv("FACTORY_BENCH_PARALLEL") == "" {
		t.Skip("set FACTORY_BENCH_PARALLEL=1 (bench/parallel.sh)")
	}
	latency := 2 * time.Second
	if v := os.Getenv("LATENCY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		latency = d
	}
	bin := os.Getenv("FACTORY_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "factory")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/factory").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	for _, plan := range []struct {
		name   string
		orders []pOrder
	}{{"six orders, three chains of two", sixOrders}, {"twelve orders, realistic shape", twelveOrders}} {
		dir := t.TempDir()
		replies := writePlan(t, filepath.Join(dir, "plan"), plan.orders)
		srv := llmtest.StartRouted(t, func(prompt string) llmtest.Reply {
			for id, r := range replies {
				if strings.Contains(prompt, "# Work order "+id+":") {
					return llmtest.Reply{Content: r, Delay: latency}
				}
			}
			return llmtest.Reply{Status: 500, Body: `{"error":{"message":"no route"}}`}
		})
		var trees [][]string
		var took []time.Duration
		for _, jobs := range []string{"1", "3"} {
			repo := filepath.Join(dir, "repo-j"+jobs)
			writeFile(t, filepath.Join(repo, "README.md"), "bench\n")
			gitRun(t, repo, "init", "-q", "-b", "main")
			gitRun(t, repo, "add", "-A")
			gitRun(t, repo, "commit", "-q", "-m", "baseline")
			start := time.Now()
			cmd := exec.Command(bin, "build", "--plan", filepath.Join(dir, "plan"), "--repo", repo, "--out", filepath.Join(dir, "out-j"+jobs),
				"--llm-model", "bench-model", "--llm-base-url", srv.URL, "--verify-command", "python3 -m compileall -q .", "-q", "-j", jobs)
			cmd.Env = append(os.Environ(), "OPENAI_API_KEY=k")
			if out, err := cmd.CombinedOutput(); err != nil {
				check, _ := exec.Command(bin, "validate", filepath.Join(dir, "plan")).CombinedOutput()
				t.Fatalf("%s, -j %s: %v\n%s\n%s", plan.name, jobs, err, out, check)
			}
			took = append(took, time.Since(start))
			if os.Getenv("DUMP") != "" {
				ev, _ := exec.Command("bash", "-c", "cat "+filepath.Join(dir, "out-j"+jobs)+"/builds/*/events.jsonl").Output()
				os.WriteFile("/tmp/events-j"+jobs+"-"+strconv.Itoa(len(plan.orders))+".jsonl", ev, 0o644)
			}
			trees = append(trees, strings.Split(strings.TrimSpace(gitRun(t, repo, "log", "--first-parent", "--reverse", "--format=%T %s", "main..HEAD")), "\n"))
		}
		same := slices.Equal(trees[0], trees[1]) && len(trees[0]) == len(plan.orders)
		fmt.Printf("%-34s latency %s: -j 1 %6.2fs  -j 3 %6.2fs  ratio %.2f  same trees: %v\n", plan.name, latency,
			took[0].Seconds(), took[1].Seconds(), took[1].Seconds()/took[0].Seconds(), same)
		if !same {
			t.Errorf("%s: histories differ:\n%s\n\n%s", plan.name, strings.Join(trees[0], "\n"), strings.Join(trees[1], "\n"))
		}
	}
}
