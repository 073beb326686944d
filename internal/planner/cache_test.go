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
