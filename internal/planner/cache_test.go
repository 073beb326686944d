package planner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/factory-harness/factory/internal/llm"
)

// captureModel answers every request with reply and keeps the requests.
type captureModel struct {
	mu    sync.Mutex
	reply string
	reqs  []llm.Request
}

func (m *captureModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	return llm.Response{Content: m.reply, Usage: llm.Usage{PromptTokens: 10, CachedInputTokens: 4, TotalTokens: 12, CompletionTokens: 2}}, nil
}

// A revision sends the first prompt unchanged as its own cache segment,
// then the previous reply and the errors; every request of a compile has
// the same cache key, derived from the compile hash unless one is given.
func TestPlannerRevisionKeepsThePrefix(t *testing.T) {
	for _, key := range []string{"", "factory-build-key"} {
		m := &captureModel{reply: "not a plan"}
		o := Options{Spec: "# spec\nadd numbers\n", Template: DefaultTemplate, Model: m, ModelName: "m",
			MaxAttempts: 2, ArtifactsDir: t.TempDir(), CacheKey: key}
		out, err := Compile(context.Background(), o)
		var invalid *InvalidPlanError
		if !errors.As(err, &invalid) {
			t.Fatalf("Compile: %v, %+v", err, out)
		}
		if len(m.reqs) != 2 {
			t.Fatalf("%d requests, want 2", len(m.reqs))
		}
		first, revision := m.reqs[0], m.reqs[1]
		if len(first.Messages) != 1 || len(revision.Messages) != 2 || revision.Messages[0] != first.Messages[0] {
			t.Errorf("the revision does not start with the first prompt as its own segment: %d then %d messages", len(first.Messages), len(revision.Messages))
		}
		if tail := revision.Messages[1].Content; !strings.Contains(tail, "not a plan") || strings.Contains(first.Messages[0].Content, "# Your previous reply") {
			t.Errorf("the previous reply is not in the revision's last segment only")
		}
		want := key
		if want == "" {
			want = "factory-plan-" + CompileHash(o.Spec, o.Template, o.ModelName, o.ReasoningEffort)
		}
		for i, r := range m.reqs {
			if r.CacheKey != want {
				t.Errorf("request %d: cache key %q, want %q", i, r.CacheKey, want)
			}
		}
	}
}

// The map is planner input: the planner's and the reviewer's prompts carry
// it, the summary records its hash, and the default prompt cache key
// changes with it (the same spec over another tree is another prompt).
func TestPlannerMapIsInput(t *testing.T) {
	const spec = "# spec\nextend Add\n"
	keys := map[string]bool{}
	for _, repoMap := range []string{"", "Repository map: 1 of 1\n\ncalc.py\n    1: def Add(a, b):\n", "Repository map: 1 of 1\n\ncalc.py\n    1: def Add(a, b, c):\n"} {
		m := &captureModel{reply: `{"findings": []}`}
		o := Options{Spec: spec, Template: DefaultTemplate, Model: m, ModelName: "m", MaxAttempts: 1,
			ArtifactsDir: t.TempDir(), RepoMap: repoMap}
		c := &compiler{o: o, sum: Summary{CompileHash: CompileHash(o.Spec, o.Template, o.ModelName, "")}}
		if _, err := c.review(context.Background(), 1, "{}"); err != nil {
			t.Fatal(err)
		}
		_, _ = Compile(context.Background(), o)
		if len(m.reqs) != 2 {
			t.Fatalf("%d requests, want a review and a plan", len(m.reqs))
		}
		for i, r := range m.reqs {
			if got := strings.Contains(r.Messages[0].Content, "# The code already in the repository"); got != (repoMap != "") {
				t.Errorf("map %q, request %d: map section present = %v", repoMap, i, got)
			}
			if repoMap != "" && !strings.Contains(r.Messages[0].Content, strings.TrimSpace(repoMap)) {
				t.Errorf("request %d does not carry the map", i)
			}
		}
		want := PromptCacheKey(c.sum.CompileHash, repoMap)
		if repoMap == "" && want != "factory-plan-"+c.sum.CompileHash {
			t.Errorf("without a map the cache key changed: %s", want)
		}
		if m.reqs[1].CacheKey != want || keys[want] {
			t.Errorf("map %q: cache key %s (seen before: %v)", repoMap, m.reqs[1].CacheKey, keys[want])
		}
		keys[want] = true
	}
}
