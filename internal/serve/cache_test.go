package serve

import (
	"path/filepath"
	"strings"
	"testing"
)

// The prompt cache's hit rate is shown where tokens and costs are: in the
// index, on a finished build's page (from build_summary.json), on a running
// build's (from the node events) and on a run's page (from run_summary.json).
func TestCacheHitRateShown(t *testing.T) {
	out := t.TempDir()
	fixtureBuild(t, out, "aaaa000000000001", true)
	write(t, filepath.Join(out, "builds", "aaaa000000000001", "build_summary.json"), jsonLine(t, map[string]any{
		"verdict": "PASS", "plan_hash": "aaaa000000000001", "branch": "factory/aaaa000000000001", "tokens": 1200, "cost_usd": 0.01,
		"input_tokens": 1000, "cached_input_tokens": 800, "cache_write_tokens": 0, "work_orders": []any{}}))
	running := filepath.Join(out, "builds", "bbbb000000000002")
	write(t, filepath.Join(running, "events.jsonl"),
		jsonLine(t, map[string]any{"event": "build_start", "plan_hash": "bbbb000000000002", "ts": "2026-01-02T03:04:00Z"})+
			jsonLine(t, map[string]any{"event": "node", "wo": "WO-01", "attempt": 1, "node": "se", "tokens": 220, "input_tokens": 200,
				"cached_input_tokens": 50, "ts": "2026-01-02T03:04:01Z"}))
	run := filepath.Join(out, "r9")
	write(t, filepath.Join(run, "work_order.json"), jsonLine(t, map[string]any{"id": "WO-01", "title": "t", "intent": "i",
		"allowed_files": []string{"a.py"}, "forbidden": []string{}, "acceptance_commands": []string{"true"}, "context_files": []string{}}))
	write(t, filepath.Join(run, "run_summary.json"), jsonLine(t, map[string]any{"run_id": "r9", "work_order_id": "WO-01", "verdict": "PASS",
		"total_attempts": 1, "max_attempts": 1, "env_passed": []string{}, "attempts": []any{},
		"usage": map[string]any{"prompt_tokens": 400, "completion_tokens": 20, "total_tokens": 420, "cached_input_tokens": 300, "cache_write_tokens": 0}}))

	_, ts := newTestServer(t, Options{Outs: []string{out}})
	_, index, _ := get(t, ts.URL+"/")
	for _, want := range []string{"1200 (80% cached)", "220 (25% cached)", "420 (75% cached)"} {
		if !strings.Contains(index, want) {
			t.Errorf("the index lacks %q", want)
		}
	}
	_, api, _ := get(t, ts.URL+"/api/index")
	if !strings.Contains(api, `"cached_input_tokens": 800`) || !strings.Contains(api, `"input_tokens": 1000`) {
		t.Errorf("the index API lacks the cache figures:\n%s", api)
	}
	for page, want := range map[string]string{
		"/builds/0/aaaa000000000001": "80% of the input read from the prompt cache",
		"/builds/0/bbbb000000000002": "25% of the input read from the prompt cache",
		"/runs/0/r9":                 "75% of the input read from the prompt cache",
	} {
		if code, body, _ := get(t, ts.URL+page); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, lacks %q", page, code, want)
		}
	}
}
