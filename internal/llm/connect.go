package llm

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// Role picks the client a provider uses for a kind of call.
type Role int

const (
	// RoleSE is the software engineer of run and build: OpenAI's Chat
	// Completions.
	RoleSE Role = iota
	// RolePlanner is the planner and reviewer: OpenAI's Responses API in
	// background mode, with polling.
	RolePlanner
)

// ConfigError is a model configuration refused before anything was
// created or sent: a bad model name or base URL, a missing key, a
// transcript that cannot be used. Connect and ParseModelSpec return it.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// ConnectConfig is a model to connect and how.
type ConnectConfig struct {
	// Spec is NAME (OpenAI or an OpenAI-compatible BaseURL), openai:NAME or
	// anthropic:NAME.
	Spec string
	Role Role
	// Getenv reads the provider's key (and default base URL and headers):
	// keys come from the environment only.
	Getenv func(string) string
	// BaseURL overrides the provider's ($OPENAI_BASE_URL or
	// $ANTHROPIC_BASE_URL, else its own).
	BaseURL string
	// Record writes every exchange to this new transcript; Replay answers
	// from one (no network, no key). At most one.
	Record, Replay string
	// Timeout bounds one HTTP try for the SE and one background response or
	// one streamed Anthropic try for the planner; 0 means the context's.
	Timeout time.Duration
	// PollInterval (OpenAI planner) and RetryBase (every client): 0 means
	// the defaults.
	PollInterval, RetryBase time.Duration
	// Progress gets the planner clients' status and retry lines; nil is
	// quiet.
	Progress io.Writer
}

// ParseModelSpec splits a model spec into provider and model name. A plain
// name means OpenAI (or the OpenAI-compatible server of a base URL); so
// does a name whose text before the first colon is not a provider, such as
// Ollama's qwen2.5-coder:7b.
func ParseModelSpec(spec string) (provider, name string, err error) {
	provider, name = ProviderOpenAI, spec
	if p, rest, ok := strings.Cut(spec, ":"); ok && (p == ProviderOpenAI || p == ProviderAnthropic) {
		provider, name = p, rest
	}
	if strings.TrimSpace(name) == "" {
		return "", "", configErrorf("--llm-model %q names no model: use NAME, openai:NAME or anthropic:NAME", spec)
	}
	return provider, name, nil
}

// Connect turns a model spec and its connection settings into a Model and
// the model name to put in requests (the spec without its provider): a
// replayer, or a live client of the spec's provider for the role, wrapped
// by a recorder when asked. A live client needs only its own provider's
// key. Every refusal is a *ConfigError, returned before anything is
// created.
func Connect(c ConnectConfig) (Model, string, error) {
	provider, name, err := ParseModelSpec(c.Spec)
	if err != nil {
		return nil, "", err
	}
	if c.Record != "" && c.Replay != "" {
		return nil, "", configErrorf("--record and --replay cannot be used together")
	}
	if c.Replay != "" {
		r, err := LoadReplayer(c.Replay)
		if err != nil {
			return nil, "", configErrorf("--replay: %v", err)
		}
		return r, name, nil
	}
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	keyVar := KeyEnv(provider)
	key := getenv(keyVar)
	if key == "" {
		if provider == ProviderOpenAI {
			return nil, "", configErrorf("%s is not set; export it (any non-empty value for a local server that ignores keys) or use --replay FILE", keyVar)
		}
		return nil, "", configErrorf("%s is not set; export it or use --replay FILE", keyVar)
	}
	base := c.BaseURL
	if base == "" {
		base = getenv(BaseURLEnv(provider))
	}
	if base != "" {
		if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", configErrorf("model base URL %q is not an http(s) URL like http://localhost:11434/v1", base)
		}
	}
	var m Model
	switch {
	case provider == ProviderAnthropic:
		m = NewAnthropic(AnthropicConfig{
			APIKey: key, BaseURL: base, Timeout: c.Timeout, RetryBase: c.RetryBase, Progress: c.Progress,
		})
	case c.Role == RolePlanner:
		m = NewOpenAIResponses(ResponsesConfig{
			APIKey: key, BaseURL: base, CustomHeaders: getenv("OPENAI_CUSTOM_HEADERS"),
			MaxWait: c.Timeout, Progress: c.Progress, PollInterval: c.PollInterval, RetryBase: c.RetryBase,
		})
	default:
		m = NewOpenAIChat(OpenAIConfig{
			APIKey: key, BaseURL: base, Timeout: c.Timeout, RetryBase: c.RetryBase,
			CustomHeaders: getenv("OPENAI_CUSTOM_HEADERS"),
		})
	}
	if c.Record != "" {
		// One transcript per run: two runs in one file replay as neither.
		if info, err := os.Stat(c.Record); err == nil && info.Size() > 0 {
			return nil, "", configErrorf("--record %s already holds a transcript; choose a new file", c.Record)
		}
		m = &Recorder{Model: m, Path: c.Record}
	}
	return m, name, nil
}

// ReviewModelName is the model name of the planner's reviewer: review
// (default: the planner's, spec), whose provider is the planner's since one
// client serves both; a provider prefix is allowed only when it is that
// one.
func ReviewModelName(spec, review string) (string, error) {
	provider, name, err := ParseModelSpec(spec)
	if err != nil || review == "" {
		return name, err
	}
	rp, rname, err := ParseModelSpec(review)
	if err != nil {
		return "", err
	}
	if rp != provider && strings.HasPrefix(review, rp+":") {
		return "", configErrorf("--review-model %q is a %s model but --llm-model %q is %s: the reviewer uses the planner's provider", review, rp, spec, provider)
	}
	if rp != provider {
		return review, nil // a plain name: the planner's provider
	}
	return rname, nil
}
