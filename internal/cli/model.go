package cli

import (
	"io"
	"net/url"
	"os"
	"strings"
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
type modelRole int

const (
	// roleSE is the software engineer of run and build: OpenAI's Chat
	// Completions.
	roleSE modelRole = iota
	// rolePlanner is plan's (and build's) planner and reviewer: OpenAI's
	// Responses API in background mode, with polling.
	rolePlanner
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

// parseModelSpec splits --llm-model into provider and model name. A plain
// name means OpenAI (or the OpenAI-compatible server of --llm-base-url);
// so does a name whose text before the first colon is not a provider, such
// as Ollama's qwen2.5-coder:7b.
func parseModelSpec(spec string) (provider, name string, err error) {
	provider, name = llm.ProviderOpenAI, spec
	if p, rest, ok := strings.Cut(spec, ":"); ok && (p == llm.ProviderOpenAI || p == llm.ProviderAnthropic) {
		provider, name = p, rest
	}
	if strings.TrimSpace(name) == "" {
		return "", "", usagef("--llm-model %q names no model: use NAME, openai:NAME or anthropic:NAME", spec)
	}
	return provider, name, nil
}

// newModel turns --llm-model and the connection flags into a Model and the
// model name to put in requests (spec without its provider): a replayer,
// or a live client of the spec's provider for role, wrapped by a recorder
// when asked. A live client needs only its own provider's key. Every
// refusal is a usage error (exit 2), returned before anything is created.
func newModel(env Env, spec string, role modelRole, f modelFlags) (llm.Model, string, error) {
	provider, name, err := parseModelSpec(spec)
	if err != nil {
		return nil, "", err
	}
	if f.record != "" && f.replay != "" {
		return nil, "", usagef("--record and --replay cannot be used together")
	}
	if f.replay != "" {
		r, err := llm.LoadReplayer(f.replay)
		if err != nil {
			return nil, "", usagef("--replay: %v", err)
		}
		return r, name, nil
	}
	keyVar := llm.KeyEnv(provider)
	key := env.Getenv(keyVar)
	if key == "" {
		if provider == llm.ProviderOpenAI {
			return nil, "", usagef("%s is not set; export it (any non-empty value for a local server that ignores keys) or use --replay FILE", keyVar)
		}
		return nil, "", usagef("%s is not set; export it or use --replay FILE", keyVar)
	}
	base := f.baseURL
	if base == "" {
		base = env.Getenv(llm.BaseURLEnv(provider))
	}
	if base != "" {
		if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", usagef("model base URL %q is not an http(s) URL like http://localhost:11434/v1", base)
		}
	}
	var m llm.Model
	switch {
	case provider == llm.ProviderAnthropic:
		m = llm.NewAnthropic(llm.AnthropicConfig{
			APIKey: key, BaseURL: base, Timeout: f.timeout, RetryBase: f.retryBase, Progress: f.progress,
		})
	case role == rolePlanner:
		m = llm.NewOpenAIResponses(llm.ResponsesConfig{
			APIKey: key, BaseURL: base, CustomHeaders: env.Getenv("OPENAI_CUSTOM_HEADERS"),
			MaxWait: f.timeout, Progress: f.progress, PollInterval: f.pollInterval, RetryBase: f.retryBase,
		})
	default:
		m = llm.NewOpenAIChat(llm.OpenAIConfig{
			APIKey: key, BaseURL: base, Timeout: f.timeout, RetryBase: f.retryBase,
			CustomHeaders: env.Getenv("OPENAI_CUSTOM_HEADERS"),
		})
	}
	if f.record != "" {
		// One transcript per run: two runs in one file replay as neither.
		if info, err := os.Stat(f.record); err == nil && info.Size() > 0 {
			return nil, "", usagef("--record %s already holds a transcript; choose a new file", f.record)
		}
		m = &llm.Recorder{Model: m, Path: f.record}
	}
	return m, name, nil
}

// reviewModelName is the model name of plan's reviewer: review (default:
// the planner's), whose provider is the planner's since one client serves
// both; a provider prefix is allowed only when it is that one.
func reviewModelName(spec, review string) (string, error) {
	provider, name, err := parseModelSpec(spec)
	if err != nil || review == "" {
		return name, err
	}
	rp, rname, err := parseModelSpec(review)
	if err != nil {
		return "", err
	}
	if rp != provider && strings.HasPrefix(review, rp+":") {
		return "", usagef("--review-model %q is a %s model but --llm-model %q is %s: the reviewer uses the planner's provider", review, rp, spec, provider)
	}
	if rp != provider {
		return review, nil // a plain name: the planner's provider
	}
	return rname, nil
}
