package cli

import (
	"io"
	"time"

	"github.com/factory-harness/factory/internal/llm"
)

// Help texts of the model flags, the same for run, plan and build.
const (
	modelHelp = "model name as NAME for OpenAI (or any model of an OpenAI-compatible --llm-base-url, e.g. qwen2.5-coder:7b), " +
		"openai:NAME, or anthropic:NAME such as anthropic:claude-sonnet-4-5"
	baseURLHelp = "OpenAI-compatible API base URL, e.g. http://localhost:11434/v1 for Ollama, or Anthropic's for anthropic: models " +
		"(default $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the provider's own)"
	// recordHelp: newModel refuses a file that already holds a transcript.
	recordHelp = "write every model exchange to this new JSONL transcript (the file must not exist or be empty)"
)

// modelRole picks the client a provider uses for a kind of call.
type modelRole = llm.Role

const (
	// roleSE is the software engineer of run and build: OpenAI's Chat
	// Completions.
	roleSE = llm.RoleSE
	// rolePlanner is plan's (and build's) planner and reviewer: OpenAI's
	// Responses API in background mode, with polling.
	rolePlanner = llm.RolePlanner
)

// modelFlags are the model-connection settings shared by run, plan and
// build.
type modelFlags struct {
	baseURL, record, replay string
	// timeout bounds one HTTP try for the SE (--llm-timeout-seconds) and
	// one background response or one streamed Anthropic try for the
	// planner (--max-wait-seconds); 0 means no bound but the context's.
	timeout time.Duration
	// pollInterval (OpenAI planner) and retryBase (every client): 0 means
	// the defaults.
	pollInterval, retryBase time.Duration
	// progress gets the planner clients' status and retry lines; nil is
	// quiet.
	progress io.Writer
}

// configUsage makes llm's configuration refusals usage errors (exit 2).
func configUsage(err error) error {
	if err != nil {
		return usagef("%v", err)
	}
	return nil
}

// parseModelSpec splits --llm-model into provider and model name
// (llm.ParseModelSpec).
func parseModelSpec(spec string) (provider, name string, err error) {
	provider, name, err = llm.ParseModelSpec(spec)
	return provider, name, configUsage(err)
}

// newModel turns --llm-model and the connection flags into a Model and the
// model name to put in requests (llm.Connect). Every refusal is a usage
// error (exit 2), returned before anything is created.
func newModel(env Env, spec string, role modelRole, f modelFlags) (llm.Model, string, error) {
	m, name, err := llm.Connect(llm.ConnectConfig{
		Spec: spec, Role: role, Getenv: env.Getenv, BaseURL: f.baseURL, Record: f.record, Replay: f.replay,
		Timeout: f.timeout, PollInterval: f.pollInterval, RetryBase: f.retryBase, Progress: f.progress,
	})
	return m, name, configUsage(err)
}

// reviewModelName is the model name of plan's reviewer
// (llm.ReviewModelName).
func reviewModelName(spec, review string) (string, error) {
	name, err := llm.ReviewModelName(spec, review)
	return name, configUsage(err)
}
