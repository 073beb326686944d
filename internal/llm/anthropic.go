package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// DefaultAnthropicBaseURL is Anthropic's API; the client appends
// /v1/messages.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// DefaultAnthropicMaxTokens is max_tokens for a request that sets no
// MaxOutputTokens: the Messages API requires one. A model with a lower
// output limit gets its own limit instead (see Anthropic.Complete).
const DefaultAnthropicMaxTokens = 16384

// AnthropicConfig configures a Messages API client. As with OpenAIConfig,
// every setting is explicit: the SDK's environment lookups
// (ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN, profiles) are switched off.
type AnthropicConfig struct {
	APIKey  string
	BaseURL string // "" means DefaultAnthropicBaseURL
	// Timeout bounds one HTTP try, the whole streamed answer included; 0
	// means no bound but the context's.
	Timeout time.Duration
	// MaxRetries, RetryBase and Sleep set the retry policy (see
	// DefaultRetries); zero values mean the defaults, nil Sleep a timer.
	MaxRetries int
	RetryBase  time.Duration
	Sleep      SleepFunc
	HTTPClient *http.Client // nil means http.DefaultClient
	// Progress, when set, gets one line per transport retry.
	Progress io.Writer
}

// Anthropic calls the Messages API (POST {base}/v1/messages), always
// streaming: the SDK refuses a non-streaming request whose max_tokens could
// take longer than ten minutes to generate (above ~21,000 tokens, or 8,192
// for Claude Opus 4 and 4.1), which the planner's default budget exceeds,
// and a stream keeps a long generation from idling on the connection. The
// streamed events are accumulated into one message before Complete returns.
//
// Request mapping: system messages become system blocks, user messages
// user messages, MaxOutputTokens max_tokens (DefaultAnthropicMaxTokens when
// unset), Temperature temperature. Schema becomes one tool whose
// input_schema is the schema, forced with tool_choice, and the tool call's
// input is returned as Content: this works on every Claude model, unlike
// structured outputs. ReasoningEffort is not sent: Anthropic's effort and
// extended thinking are model-specific, and forced tool use rules thinking
// out.
//
// Failures of the server or the connection, including an error event in the
// middle of a stream (overloaded_error), are *ProviderError values after
// the retry policy of DefaultRetries; the SDK's own retries are off.
type Anthropic struct {
	client anthropic.Client
	retry  retrier
	out    io.Writer
}

// NewAnthropic returns a Messages API model client.
func NewAnthropic(cfg AnthropicConfig) *Anthropic {
	base := orDefault(cfg.BaseURL, DefaultAnthropicBaseURL)
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return capReply(next(req))
		}),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	c := &Anthropic{
		client: anthropic.NewClient(opts...),
		retry:  newRetrier(cfg.MaxRetries, cfg.RetryBase, cfg.Sleep, ProviderAnthropic, base),
		out:    cfg.Progress,
	}
	if c.out != nil {
		c.retry.logf = func(format string, args ...any) {
			fmt.Fprintf(c.out, "anthropic: "+format+"\n", args...)
		}
	}
	return c
}

// Complete sends req and returns the accumulated answer. When the server
// says that max_tokens exceeds the model's output limit, the request is
// sent once more with that limit, noted in Response.Degraded.
func (c *Anthropic) Complete(ctx context.Context, req Request) (Response, error) {
	params, tool, err := anthropicParams(req)
	if err != nil {
		return Response{}, err
	}
	var degraded []string
	for {
		var msg anthropic.Message
		err := c.retry.do(ctx, "messages", req.Model, func(err error) bool {
			limit, ok := outputLimit(err)
			return ok && limit < params.MaxTokens
		}, func(ctx context.Context) error {
			msg = anthropic.Message{}
			return c.stream(ctx, params, &msg)
		})
		if err == nil {
			return anthropicResponse(&msg, tool, req.LongCache, degraded), nil
		}
		if limit, ok := outputLimit(err); ok && limit < params.MaxTokens {
			params.MaxTokens = limit
			degraded = append(degraded, fmt.Sprintf("max_tokens lowered to %d", limit))
			continue
		}
		if _, ok := AsProviderError(err); ok {
			return Response{}, err // a self-contained message with its hint
		}
		return Response{}, fmt.Errorf("messages with model %s: %w", req.Model, err)
	}
}

// stream makes one streamed request and accumulates it into msg.
func (c *Anthropic) stream(ctx context.Context, params anthropic.MessageNewParams, msg *anthropic.Message) error {
	s := c.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	for s.Next() {
		var shape anthropicEventShape
		if err := shape.check(s.Current().RawJSON()); err != nil {
			return fmt.Errorf("decode stream: malformed %q event: %w", s.Current().Type, err)
		}
		if err := msg.Accumulate(s.Current()); err != nil {
			return fmt.Errorf("decode stream: %w", err)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if msg.StopReason == "" {
		// The stream ended before message_delta: a dropped connection
		// as far as the answer is concerned, and worth a retry.
		return fmt.Errorf("the stream ended before the message was complete: %w", io.ErrUnexpectedEOF)
	}
	return nil
}

// MaxCacheBreakpoints is how many cache_control breakpoints the Messages
// API accepts in one request.
const MaxCacheBreakpoints = 4

func anthropicParams(req Request) (p anthropic.MessageNewParams, tool string, err error) {
	p = anthropic.MessageNewParams{
		Model:       anthropic.Model(req.Model),
		MaxTokens:   req.MaxOutputTokens,
		Temperature: anthropic.Float(req.Temperature),
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens = DefaultAnthropicMaxTokens
	}
	var user []anthropic.TextBlockParam // the current run of user messages: one turn
	flush := func() {
		if len(user) > 0 {
			blocks := make([]anthropic.ContentBlockParamUnion, len(user))
			for i := range user {
				blocks[i] = anthropic.ContentBlockParamUnion{OfText: &user[i]}
			}
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
			user = nil
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			flush()
			p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
		case "user":
			user = append(user, anthropic.TextBlockParam{Text: m.Content})
		default:
			return p, "", fmt.Errorf("anthropic message role %q is not supported", m.Role)
		}
	}
	flush()
	// Cache breakpoints, at most MaxCacheBreakpoints: the end of the system
	// prompt (the tool comes before it, so it is covered too), then the end
	// of every user segment but the request's last, which holds what
	// changes between attempts. All with one TTL: 1 hour for a long cache,
	// else the default 5 minutes (no "ttl" sent).
	var breakpoints []*anthropic.CacheControlEphemeralParam
	if n := len(p.System); n > 0 {
		breakpoints = append(breakpoints, &p.System[n-1].CacheControl)
	}
	var segments []*anthropic.CacheControlEphemeralParam
	for mi := range p.Messages {
		for bi := range p.Messages[mi].Content {
			segments = append(segments, &p.Messages[mi].Content[bi].OfText.CacheControl)
		}
	}
	if len(segments) > 0 {
		segments = segments[:len(segments)-1]
	}
	if room := MaxCacheBreakpoints - len(breakpoints); len(segments) > room {
		segments = segments[len(segments)-room:] // the latest cover the most
	}
	for _, cc := range append(breakpoints, segments...) {
		*cc = anthropic.NewCacheControlEphemeralParam()
		if req.LongCache {
			cc.TTL = anthropic.CacheControlEphemeralTTLTTL1h
		}
	}
	if req.Schema != nil {
		if t, ok := req.Schema["type"]; ok && t != "object" {
			return p, "", fmt.Errorf("schema %s has type %v: a tool's input schema must be an object", req.SchemaName, t)
		}
		tool = toolName(req.SchemaName)
		extra := make(map[string]any, len(req.Schema))
		for k, v := range req.Schema {
			if k != "type" { // the SDK always writes "type": "object"
				extra[k] = v
			}
		}
		p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        tool,
			Description: anthropic.String("Reply by calling this tool; its input is the whole answer."),
			InputSchema: anthropic.ToolInputSchemaParam{ExtraFields: extra},
		}}}
		p.ToolChoice = anthropic.ToolChoiceParamOfTool(tool)
	}
	return p, tool, nil
}

// toolNameChars are the characters a tool name may have
// (^[a-zA-Z0-9_-]{1,64}$).
var toolNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// toolName turns a schema name into a valid tool name; "answer" when the
// schema has none.
func toolName(schemaName string) string {
	name := toolNameChars.ReplaceAllString(schemaName, "_")
	if name == "" {
		return "answer"
	}
	return name[:min(len(name), 64)]
}

// anthropicResponse maps a message to a Response. With a tool, Content is
// the tool call's input (the JSON the schema describes); otherwise the
// text. stop_reason is translated to the Chat Completions vocabulary the
// callers know: "length" for max_tokens, "content_filter" for a refusal,
// else "stop". The cache writes made with the 1-hour TTL are those the
// server reports in cache_creation.ephemeral_1h_input_tokens; a server that
// does not break the writes down by TTL wrote them with the one the request
// asked for (longCache).
func anthropicResponse(msg *anthropic.Message, tool string, longCache bool, degraded []string) Response {
	var text strings.Builder
	var input json.RawMessage
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.Name == tool && input == nil {
				input = b.Input
			}
		}
	}
	r := Response{Model: string(msg.Model), FinishReason: "stop", Degraded: degraded, Content: text.String()}
	if tool != "" && input != nil {
		r.Content = string(input)
	}
	switch msg.StopReason {
	case anthropic.StopReasonMaxTokens:
		r.FinishReason = "length"
	case anthropic.StopReasonRefusal:
		r.FinishReason = "content_filter"
		r.Refusal = orUnknown(text.String())
	}
	u := msg.Usage
	prompt := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	r.Usage = Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		CachedInputTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	switch {
	case u.JSON.CacheCreation.Valid():
		r.Usage.CacheWrite1hTokens = min(u.CacheCreation.Ephemeral1hInputTokens, u.CacheCreationInputTokens)
	case longCache:
		r.Usage.CacheWrite1hTokens = u.CacheCreationInputTokens
	}
	return r.validText()
}

// outputLimitMsg is how the Messages API rejects a max_tokens above the
// model's output limit: "max_tokens: 64000 > 32000, which is the maximum
// allowed number of output tokens for claude-opus-4-20250514".
var outputLimitMsg = regexp.MustCompile(`max_tokens: \d+ > (\d+), which is the maximum`)

// outputLimit reports the model's output limit named by such a rejection.
func outputLimit(err error) (int64, bool) {
	a, ok := asErrorReply(err)
	if !ok || a.status != http.StatusBadRequest {
		return 0, false
	}
	m := outputLimitMsg.FindStringSubmatch(a.message)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	return n, err == nil && n > 0
}

// anthropicStreamStatus is the HTTP status an error type stands for. An
// error event in a stream arrives after HTTP 200, so the type is all there
// is to classify it by.
var anthropicStreamStatus = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// anthropicErrorReply reads the error body {"type":"error","error":{"type":
// "...","message":"..."}}.
func anthropicErrorReply(e *anthropic.Error) errorReply {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	raw := e.RawJSON()
	if json.Unmarshal([]byte(raw), &body) != nil || body.Error.Message == "" {
		body.Error.Message = raw // not Anthropic's envelope: a proxy's page, say
	}
	a := errorReply{status: e.StatusCode, code: body.Error.Type, message: body.Error.Message}
	if e.Response != nil {
		a.header = e.Response.Header
	}
	if a.status/100 == 2 {
		a.status = http.StatusInternalServerError
		if s, ok := anthropicStreamStatus[a.code]; ok {
			a.status = s
		}
	}
	return a
}
