package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llmtest"
)

func TestParseModelSpec(t *testing.T) {
	for _, tt := range []struct{ spec, provider, name string }{
		{"gpt-4.1", "openai", "gpt-4.1"},
		{"openai:gpt-4.1", "openai", "gpt-4.1"},
		{"anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"qwen2.5-coder:7b", "openai", "qwen2.5-coder:7b"},        // Ollama's tag, not a provider
		{"openai:qwen2.5-coder:7b", "openai", "qwen2.5-coder:7b"}, // only the first colon splits
		{"anthropic:claude:odd", "anthropic", "claude:odd"},       // the rest is the name
		{"mistral:latest", "openai", "mistral:latest"},            // an unknown prefix is part of the name
		{"Anthropic:claude-x", "openai", "Anthropic:claude-x"},    // providers are lower case
		{"openai: gpt-4.1", "openai", " gpt-4.1"},                 // sent as written; the server judges
		{"anthropic:claude-3-5-haiku-latest", "anthropic", "claude-3-5-haiku-latest"},
	} {
		p, n, err := parseModelSpec(tt.spec)
		if err != nil || p != tt.provider || n != tt.name {
			t.Errorf("parseModelSpec(%q) = %q, %q, %v; want %q, %q", tt.spec, p, n, err, tt.provider, tt.name)
		}
	}
	for _, spec := range []string{"anthropic:", "openai:", "openai: "} {
		if _, _, err := parseModelSpec(spec); err == nil || !strings.Contains(err.Error(), "names no model") {
			t.Errorf("parseModelSpec(%q): err = %v, want a refusal", spec, err)
		}
	}
}

func TestReviewModelName(t *testing.T) {
	for _, tt := range []struct{ spec, review, want, err string }{
		{"gpt-5", "", "gpt-5", ""},
		{"anthropic:claude-opus-4-5", "", "claude-opus-4-5", ""},
		{"anthropic:claude-opus-4-5", "claude-sonnet-4-5", "claude-sonnet-4-5", ""},
		{"anthropic:claude-opus-4-5", "anthropic:claude-sonnet-4-5", "claude-sonnet-4-5", ""},
		{"anthropic:claude-opus-4-5", "openai:gpt-5", "", "the reviewer uses the planner's provider"},
		{"gpt-5", "anthropic:claude-sonnet-4-5", "", "the reviewer uses the planner's provider"},
	} {
		got, err := reviewModelName(tt.spec, tt.review)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("reviewModelName(%q, %q) = %q, %v; want %q, %q", tt.spec, tt.review, got, err, tt.want, tt.err)
		}
	}
}

func goodAnthropic(content string) llmtest.AnthropicReply {
	return llmtest.AnthropicReply{Content: llmtest.Proposal("add multiply", llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: content})}
}

// runAnthropic runs the fixture's work order with an Anthropic model
// against srv; only ANTHROPIC_API_KEY is set.
func (f *fixture) runAnthropic(t *testing.T, srv *llmtest.AnthropicServer, extra ...string) runOut {
	t.Helper()
	args := append([]string{"run", "--repo", f.repo, "--work-order", f.woPath, "--out", f.out,
		"--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", srv.URL, "--timeout-seconds", "20"}, extra...)
	return runFactory(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=ak"}, args...)
}

// A run with an Anthropic model end to end: a rate limit is retried (the
// server's Retry-After: 0 keeps the test fast), the proposal comes back
// through the forced tool, and the run passes with the model's bare name in
// its summary.
func TestRunAnthropic(t *testing.T) {
	f := newFixture(t, workOrder())
	srv := llmtest.StartAnthropic(t,
		llmtest.AnthropicReply{Status: 429, ErrorType: "rate_limit_error", Message: "slow down", Header: map[string]string{"Retry-After": "0"}},
		goodAnthropic(calcV2))
	res := f.runAnthropic(t, srv)
	if res.code != ExitPass {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || srv.Remaining() != 0 {
		t.Fatalf("%d requests, %d replies left; want the 429 retried once", len(reqs), srv.Remaining())
	}
	tc, _ := reqs[1]["tool_choice"].(map[string]any)
	if reqs[1]["model"] != "claude-sonnet-4-5" || tc["name"] != "write_proposal" {
		t.Errorf("request: model %v, tool_choice %v", reqs[1]["model"], tc)
	}
	if s := f.summary(t, res); s.Verdict != factory.VerdictPass || s.TotalAttempts != 1 || s.Usage.TotalTokens != 120 {
		t.Errorf("summary: verdict %s, attempts %d, usage %+v", s.Verdict, s.TotalAttempts, s.Usage)
	}
	if len(f.srv.Requests()) != 0 {
		t.Error("the OpenAI server was called")
	}
}

// Each provider needs its own key, and only its own: a refusal (exit 2)
// names the variable and leaves nothing behind.
func TestRunProviderKeys(t *testing.T) {
	f := newFixture(t, workOrder())
	srv := llmtest.StartAnthropic(t)
	res := runFactory(t, []string{"OPENAI_API_KEY=sk-set", "ANTHROPIC_API_KEY="}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", srv.URL)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "ANTHROPIC_API_KEY is not set; export it or use --replay FILE") {
		t.Fatalf("exit %d, want %d naming ANTHROPIC_API_KEY\n%s", res.code, ExitUsage, res.stderr)
	}
	if _, err := os.Stat(f.out); !os.IsNotExist(err) {
		t.Errorf("--out was created: %v", err)
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	if len(srv.Requests()) != 0 {
		t.Error("a request was sent")
	}

	res = runFactory(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=ak"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "openai:gpt-4.1", "--llm-base-url", f.srv.URL)
	if res.code != ExitUsage || !strings.Contains(res.stderr, "OPENAI_API_KEY is not set") {
		t.Fatalf("exit %d, want %d naming OPENAI_API_KEY\n%s", res.code, ExitUsage, res.stderr)
	}

	res = runFactory(t, []string{"ANTHROPIC_API_KEY=ak"}, "run", "--repo", f.repo, "--work-order", f.woPath,
		"--out", f.out, "--llm-model", "anthropic:")
	if res.code != ExitUsage || !strings.Contains(res.stderr, `--llm-model "anthropic:" names no model`) {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
}

// Without --llm-base-url an Anthropic model uses ANTHROPIC_BASE_URL, never
// OPENAI_BASE_URL; provider failures carry Anthropic's hints.
func TestRunAnthropicBaseURLAndErrors(t *testing.T) {
	f := newFixture(t, workOrder())
	srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Status: 401, ErrorType: "authentication_error", Message: "invalid x-api-key"})
	res := runFactory(t, []string{"ANTHROPIC_API_KEY=bad", "ANTHROPIC_BASE_URL=" + srv.URL, "OPENAI_BASE_URL=http://127.0.0.1:9/v1"},
		"run", "--repo", f.repo, "--work-order", f.woPath, "--out", f.out, "--llm-model", "anthropic:claude-haiku-4-5")
	want := "rejected the API key (HTTP 401): check ANTHROPIC_API_KEY"
	if res.code != ExitInternal || !strings.Contains(res.stderr, want) {
		t.Fatalf("exit %d, want %d with %q\n%s", res.code, ExitInternal, want, res.stderr)
	}
	if len(srv.Requests()) != 1 {
		t.Errorf("%d requests, want 1", len(srv.Requests()))
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
}

// --record and --replay work for Anthropic runs: the replay needs no key
// and no server, and answers the same.
func TestRunAnthropicRecordReplay(t *testing.T) {
	rec := newFixture(t, workOrder())
	srv := llmtest.StartAnthropic(t, goodAnthropic(calcV2))
	transcript := filepath.Join(t.TempDir(), "t.jsonl")
	if res := rec.runAnthropic(t, srv, "--record", transcript); res.code != ExitPass {
		t.Fatalf("record: exit %d\n%s", res.code, res.stderr)
	}
	rep := newFixture(t, workOrder())
	res := runFactory(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY="}, "run", "--repo", rep.repo, "--work-order", rep.woPath,
		"--out", rep.out, "--llm-model", "anthropic:claude-sonnet-4-5", "--replay", transcript)
	if res.code != ExitPass {
		t.Fatalf("replay: exit %d\n%s", res.code, res.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(rep.repo, "calc.py")); string(got) != calcV2 {
		t.Errorf("calc.py = %q", got)
	}
}

// plan with an Anthropic model: the planner's request goes to the
// Messages API (streamed, no polling) and the plan is written.
func TestPlanAnthropic(t *testing.T) {
	f := newPlanFixture(t)
	srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: validPlan(t)})
	res := runFactory(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=ak"}, "plan", "--spec", f.spec, "--outdir", f.out,
		"--artifacts-dir", f.arts, "--llm-model", "anthropic:claude-opus-4-5", "--llm-base-url", srv.URL, "--no-review")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(f.out, "WO-01.json")); err != nil {
		t.Error(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0]["model"] != "claude-opus-4-5" || reqs[0]["max_tokens"] != 64000.0 {
		t.Errorf("requests = %v", reqs)
	}
	if s := f.summary(t); s.Model != "claude-opus-4-5" {
		t.Errorf("summary model = %q", s.Model)
	}
}
