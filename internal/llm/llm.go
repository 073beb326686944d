// Package llm is the one place that talks to language models: a Model
// interface, an OpenAI-compatible Chat Completions client, an OpenAI
// Responses API client (background mode, for the planner), and record/replay
// of transcripts behind the same interface.
package llm

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/canon"
)

// Message is one chat message. Consecutive user messages are one turn of
// the conversation split into cache segments, stablest first: the OpenAI
// clients send them joined (the bytes are the same as one message), the
// Anthropic client sends one text block each and marks the end of each
// segment but the last as a cache breakpoint (see anthropicParams).
type Message struct {
	Role    string `json:"role"` // "system" or "user"
	Content string `json:"content"`
}

// Request is everything that decides a model reply; its hash identifies an
// exchange in a transcript.
type Request struct {
	Model       string    `json:"model"`
	Temperature float64   `json:"temperature"`
	Messages    []Message `json:"messages"`
	// SchemaName and Schema, when set, ask for strict JSON-schema output.
	SchemaName string         `json:"schema_name,omitempty"`
	Schema     map[string]any `json:"schema,omitempty"`
	// ReasoningEffort ("low", "medium", "high", ...) and MaxOutputTokens, when
	// set, are passed to the server; empty means the server's default. Both
	// are omitted from the JSON when unset, so hashes of requests that do not
	// use them are unchanged.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
	// CacheKey groups the requests of one build for the provider's prompt
	// cache: OpenAI's prompt_cache_key. It is derived from the build's
	// identity (never a clock or randomness), so a replay sends the same.
	CacheKey string `json:"cache_key,omitempty"`
	// LongCache asks the provider to keep the prompt cache longer than its
	// default, for a build expected to outlive it (builder.LongCache): a
	// 1-hour TTL on Anthropic's breakpoints instead of 5 minutes, and
	// prompt_cache_retention "24h" for the OpenAI models that have it
	// (ExtendedRetention). Omitted from the JSON when unset, so hashes of
	// requests that do not ask for it are unchanged.
	LongCache bool `json:"long_cache,omitempty"`
}

// Hash is the hex SHA-256 of the request's canonical JSON.
func (r Request) Hash() string {
	b, err := canon.JSON(r)
	if err != nil {
		// Request holds only strings, numbers and JSON-decoded maps.
		panic("llm: request is not JSON-encodable: " + err.Error())
	}
	return canon.SHA256Hex(b)
}

// Usage counts tokens as the server reported them. PromptTokens is the
// whole input; CachedInputTokens (read from the provider's prompt cache) and
// CacheWriteTokens (written to it) are parts of it, each priced at its own
// rate (see Prices.Cost). CacheWrite1hTokens is the part of CacheWriteTokens
// written with Anthropic's 1-hour TTL, dearer than the 5-minute one. A
// provider that reports nothing about caching leaves them 0, and the input
// is priced as uncached.
type Usage struct {
	PromptTokens       int64 `json:"prompt_tokens"`
	CompletionTokens   int64 `json:"completion_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	CachedInputTokens  int64 `json:"cached_input_tokens"`
	CacheWriteTokens   int64 `json:"cache_write_tokens"`
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
}

// Add is u plus v, field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens: u.PromptTokens + v.PromptTokens, CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		TotalTokens: u.TotalTokens + v.TotalTokens, CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens, CacheWrite1hTokens: u.CacheWrite1hTokens + v.CacheWrite1hTokens,
	}
}

// UncachedInputTokens is the input neither read from nor written to a
// cache, never negative (a server's parts may not add up).
func (u Usage) UncachedInputTokens() int64 {
	return max(u.PromptTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
}

// Response is a model reply.
type Response struct {
	Content      string `json:"content"`
	Refusal      string `json:"refusal,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
	Model        string `json:"model,omitempty"` // as reported by the server
	Usage        Usage  `json:"usage"`
	// Degraded lists request features the server rejected and the client
	// dropped to get an answer (e.g. "response_format"), for the audit trail.
	Degraded []string `json:"degraded,omitempty"`
}

// validText returns r with each byte of its texts that is not part of valid
// UTF-8 replaced by U+FFFD, as encoding/json does when it reads a string: a
// reply then reads the same whichever JSON decoder the provider's SDK uses,
// and its artifacts say what the harness acted on.
func (r Response) validText() Response {
	for _, s := range []*string{&r.Content, &r.Refusal, &r.FinishReason, &r.Model} {
		*s = validUTF8(*s)
	}
	return r
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Model answers one request.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}
