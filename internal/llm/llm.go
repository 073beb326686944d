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

// Message is one chat message.
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

// Usage counts tokens as the server reported them.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
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
