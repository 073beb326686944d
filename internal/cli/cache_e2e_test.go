package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/llmtest"
)

// guide is a large file every work order of cachePlan reads and none
// writes: the build's shared, stable context.
var guide = strings.Repeat("The calc module keeps one function per operation, each with a unittest module.\n", 300)

// newCacheFixture is buildPlan's build with docs/guide.md in the
// repository and in every order's context files.
func newCacheFixture(t *testing.T) *buildFixture {
	plan := buildPlan("")
	for _, wo := range plan["work_orders"].([]any) {
		m := wo.(map[string]any)
		m["context_files"] = append(m["context_files"].([]string), "docs/guide.md")
	}
	f := newBuildFixture(t, plan)
	writeFiles(t, f.repo, map[string]string{"docs/guide.md": guide})
	git(t, f.repo, "add", "docs/guide.md")
	git(t, f.repo, "commit", "-q", "-m", "guide")
	f.baseline = treeSnapshot(t, f.repo)
	return f
}

// The replies of a build whose WO-02 fails once: requests 0 (WO-01), 1 and
// 2 (WO-02's attempts), 3 (WO-03).
var cacheReplies = []llmtest.Reply{replyWO01, replyWO02Bad, replyWO02, replyWO03}

const retryRequest = 2

// userText is the user turn of a request as the model reads it.
func userText(req map[string]any) string {
	var b strings.Builder
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm["role"] != "user" {
			continue
		}
		switch c := mm["content"].(type) {
		case string:
			b.WriteString(c)
		case []any:
			for _, block := range c {
				s, _ := block.(map[string]any)["text"].(string)
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

// checkRetryPrefix: the retry's prompt is the first attempt's up to its
// closing line, then the failure brief.
func checkRetryPrefix(t *testing.T, reqs []map[string]any) {
	t.Helper()
	const brief, closing = "\n## The previous attempt failed", "\nReply now with the JSON object only.\n"
	first, retry := userText(reqs[retryRequest-1]), userText(reqs[retryRequest])
	at := strings.Index(retry, brief)
	if at < 0 || !strings.HasSuffix(first, closing) {
		t.Fatalf("no failure brief in the retry, or no closing line in the first attempt")
	}
	if retry[:at] != strings.TrimSuffix(first, closing) {
		t.Errorf("the bytes before the failure brief differ between WO-02's attempts")
	}
}

// checkCost: the build's cost is the sum of every call's parts at the
// model's prices, to the cent and beyond; the cache writes at the 1-hour
// TTL's price for a long cache.
func checkCost(t *testing.T, sum builder.Summary, model string, long bool, usage []llmtest.CacheUsage) {
	t.Helper()
	p, _ := llm.DefaultPrices().Lookup(model)
	write := p.CacheWritePerMTok
	if long {
		write = p.CacheWrite1hPerMTok
	}
	want, cached, written := 0.0, int64(0), int64(0)
	for _, u := range usage {
		want += (float64(u.Input-u.Read-u.Write)*p.InputPerMTok + float64(u.Read)*p.CachedInputPerMTok +
			float64(u.Write)*write + 20*p.OutputPerMTok) / 1e6
		cached, written = cached+u.Read, written+u.Write
	}
	if sum.CostUSD == nil || math.Abs(*sum.CostUSD-want) > 1e-9 {
		t.Errorf("cost_usd = %v, want %.8f", sum.CostUSD, want)
	}
	if sum.CachedInputTokens != cached || sum.CacheWriteTokens != written {
		t.Errorf("summary cached %d written %d, want %d and %d", sum.CachedInputTokens, sum.CacheWriteTokens, cached, written)
	}
}

func decodeSummary(t *testing.T, res runOut) builder.Summary {
	t.Helper()
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var sum builder.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// longAttempts makes cachePlan's three work orders a long build
// (builder.LongCache): 3 × 4 attempts ≥ builder.LongCacheCalls; the
// fixture's 3 × 3 is not.
const longAttempts = "4"

// A build with a retry against an OpenAI-style caching server: one
// prompt_cache_key for the build, the retry reads ≥ 80 % of its prompt
// from the cache, later orders read the shared prefix, and the cost is
// the reported usage priced part by part. A long build of a model with
// the extended retention asks for it in every request; a shorter one never.
func TestBuildPromptCacheOpenAI(t *testing.T) {
	for _, long := range []bool{false, true} {
		t.Run(fmt.Sprintf("long %v", long), func(t *testing.T) {
			f := newCacheFixture(t)
			srv := llmtest.Start(t, cacheReplies...)
			cache := srv.SimulateCache()
			args := []string{"--llm-model", "gpt-4.1", "--json"}
			if long {
				args = append(args, "--max-attempts", longAttempts)
			}
			sum := decodeSummary(t, f.build(t, srv.URL, args...))
			reqs, usage := srv.Requests(), cache.Usage()
			if len(reqs) != len(cacheReplies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(cacheReplies))
			}
			var retention any
			if long {
				retention = "24h"
			}
			for i, r := range reqs {
				if r["prompt_cache_key"] != "factory-"+sum.PlanHash {
					t.Errorf("request %d: prompt_cache_key %v, want factory-%s", i, r["prompt_cache_key"], sum.PlanHash)
				}
				if r["prompt_cache_retention"] != retention {
					t.Errorf("request %d: prompt_cache_retention %v, want %v", i, r["prompt_cache_retention"], retention)
				}
			}
			checkRetryPrefix(t, reqs)
			for i, u := range usage {
				t.Logf("request %d: %d input tokens, %.0f%% read from the cache", i, u.Input, 100*u.ReadShare())
			}
			if share := usage[retryRequest].ReadShare(); share < 0.8 {
				t.Errorf("the retry read %.0f%% of its prompt from the cache, want ≥ 80%%", 100*share)
			}
			for _, i := range []int{1, 3} {
				if usage[i].Read == 0 {
					t.Errorf("request %d (a later order) read nothing of the shared prefix", i)
				}
			}
			checkCost(t, sum, "gpt-4.1", long, usage)
		})
	}
}

// The same build on Anthropic: cache_control breakpoints (at most four)
// make the retry and the later orders read from the cache, and writes and
// reads are priced at their rates. A long build's breakpoints have the
// 1-hour TTL and its writes cost that TTL's price; a shorter one's have
// the default.
func TestBuildPromptCacheAnthropic(t *testing.T) {
	for _, long := range []bool{false, true} {
		t.Run(fmt.Sprintf("long %v", long), func(t *testing.T) {
			f := newCacheFixture(t)
			var replies []llmtest.AnthropicReply
			for _, r := range cacheReplies {
				replies = append(replies, anthropicReply(r))
			}
			srv := llmtest.StartAnthropic(t, replies...)
			cache := srv.SimulateCache()
			args := []string{"build", "--plan", f.plan, "--repo", f.repo, "--out", f.out, "--llm-model", "anthropic:claude-sonnet-4-5",
				"--llm-base-url", srv.URL, "--timeout-seconds", "60", "--max-attempts", "3", "--json"}
			cc := `"cache_control":{"type":"ephemeral"}`
			if long {
				args = append(args, "--max-attempts", longAttempts)
				cc = `"cache_control":{"ttl":"1h","type":"ephemeral"}`
			}
			sum := decodeSummary(t, runFactory(t, append(gitEnv(t.TempDir()), "ANTHROPIC_API_KEY=ak"), args...))
			reqs, usage := srv.Requests(), cache.Usage()
			if len(reqs) != len(cacheReplies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(cacheReplies))
			}
			for i, r := range reqs {
				body := canonicalJSON(t, r)
				if n := strings.Count(body, `"cache_control"`); n == 0 || n > llm.MaxCacheBreakpoints || strings.Count(body, cc) != n {
					t.Errorf("request %d has %d cache_control breakpoints, want 1 to %d, each %s", i, n, llm.MaxCacheBreakpoints, cc)
				}
			}
			checkRetryPrefix(t, reqs)
			for i, u := range usage {
				t.Logf("request %d: %d input tokens, %.0f%% read from the cache, %d written", i, u.Input, 100*u.ReadShare(), u.Write)
			}
			if share := usage[retryRequest].ReadShare(); share < 0.8 {
				t.Errorf("the retry read %.0f%% of its prompt from the cache, want ≥ 80%%", 100*share)
			}
			for _, i := range []int{1, 3} {
				if usage[i].Read == 0 {
					t.Errorf("request %d (a later order) read nothing of the shared prefix", i)
				}
			}
			checkCost(t, sum, "claude-sonnet-4-5", long, usage)
			t.Logf("cost_usd %.6f", *sum.CostUSD)
		})
	}
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// factory run with --prices that sets the cache prices: the run summary
// and each attempt record count the cached tokens, and cost_usd prices
// each part at its own rate; the retry's prompt key is the run's own.
func TestRunPricesCachedTokens(t *testing.T) {
	bad, ok := good(calcBad), good(calcV2)
	bad.PromptTokens, bad.CachedTokens = 2000, 0
	ok.PromptTokens, ok.CachedTokens, ok.CacheWriteTokens = 2100, 1920, 100
	f := newFixture(t, workOrder(), bad, ok)
	prices := filepath.Join(t.TempDir(), "prices.json")
	writeFiles(t, filepath.Dir(prices), map[string]string{"prices.json": `{"prices": {"test-model":
		{"input_per_mtok": 1, "output_per_mtok": 4, "cached_input_per_mtok": 0.25, "cache_write_per_mtok": 1.5}}}`})
	res := f.run(t, "--prices", prices)
	if res.code != ExitPass {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	sum := f.summary(t, res)
	first := (2000*1 + 20*4) / 1e6
	second := (80*1 + 1920*0.25 + 100*1.5 + 20*4) / 1e6
	if sum.CostUSD == nil || math.Abs(*sum.CostUSD-(first+second)) > 1e-12 {
		t.Errorf("cost_usd = %v, want %v", sum.CostUSD, first+second)
	}
	if sum.Usage.CachedInputTokens != 1920 || sum.Usage.CacheWriteTokens != 100 || sum.Usage.PromptTokens != 4100 {
		t.Errorf("usage = %+v", sum.Usage)
	}
	if a := sum.Attempts[1]; a.CostUSD == nil || math.Abs(*a.CostUSD-second) > 1e-12 || a.Usage.CachedInputTokens != 1920 {
		t.Errorf("attempt 2: cost %v, usage %+v", a.CostUSD, a.Usage)
	}
	reqs := f.srv.Requests()
	if key, _ := reqs[0]["prompt_cache_key"].(string); !strings.HasPrefix(key, "factory-run-") || reqs[1]["prompt_cache_key"] != key {
		t.Errorf("prompt_cache_key %v then %v, want one factory-run- key for both attempts", reqs[0]["prompt_cache_key"], reqs[1]["prompt_cache_key"])
	}
}
