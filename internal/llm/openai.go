package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// DefaultBaseURL is OpenAI's API; any OpenAI-compatible server works.
const DefaultBaseURL = "https://api.openai.com/v1"

// OpenAIConfig configures an OpenAI-compatible Chat Completions client. Every
// setting is explicit: the SDK's own environment lookups are not relied on.
type OpenAIConfig struct {
	APIKey  string
	BaseURL string        // "" means DefaultBaseURL
	Timeout time.Duration // per HTTP try; a try that times out is retried
	// MaxRetries, RetryBase and Sleep set the retry policy (see
	// DefaultRetries); zero values mean the defaults, nil Sleep a timer.
	MaxRetries int
	RetryBase  time.Duration
	Sleep      SleepFunc
	HTTPClient *http.Client // nil means http.DefaultClient
	// CustomHeaders is the value of OPENAI_CUSTOM_HEADERS, which the SDK
	// applies by itself; its headers are removed again.
	CustomHeaders string
}

// ambientHeaders are set by the SDK from the environment (OPENAI_ORG_ID,
// OPENAI_PROJECT_ID); they are dropped so that only what the user passed to
// factory reaches the server, which may not be OpenAI's.
var ambientHeaders = []string{"OpenAI-Organization", "OpenAI-Project"}

// dropHeaders removes headers the SDK added on its own: the ambient ones,
// and any named in OPENAI_CUSTOM_HEADERS (passed in as customHeaders).
func dropHeaders(customHeaders string) option.Middleware {
	names := append([]string(nil), ambientHeaders...)
	for _, line := range strings.Split(customHeaders, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		for _, n := range names {
			req.Header.Del(n)
		}
		return next(req)
	}
}

// clientOptions are the SDK options both clients share, all explicit. The
// SDK's own retries are off: its waits cannot be injected and it retries
// refused connections, so the retrier decides instead.
func clientOptions(apiKey, baseURL, customHeaders string, httpClient *http.Client) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithAPIKey(apiKey),
		option.WithBaseURL(orDefault(baseURL, DefaultBaseURL)),
		option.WithMaxRetries(0),
		option.WithMiddleware(dropHeaders(customHeaders), capReplies),
	}
	if httpClient != nil {
		opts = append(opts, option.WithHTTPClient(httpClient))
	}
	return opts
}

// OpenAIChat calls POST {base}/chat/completions. Failures of the server or
// the connection are *ProviderError values, after retries where the policy
// allows them (see DefaultRetries).
type OpenAIChat struct {
	client openai.Client
	retry  retrier
}

// NewOpenAIChat returns a Chat Completions model client.
func NewOpenAIChat(cfg OpenAIConfig) *OpenAIChat {
	opts := clientOptions(cfg.APIKey, cfg.BaseURL, cfg.CustomHeaders, cfg.HTTPClient)
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &OpenAIChat{
		client: openai.NewClient(opts...),
		retry:  newRetrier(cfg.MaxRetries, cfg.RetryBase, cfg.Sleep, "", orDefault(cfg.BaseURL, DefaultBaseURL)),
	}
}

// Complete sends req. If the server rejects the strict response format or a
// non-default temperature with a 400 that names it (as some OpenAI-compatible
// servers and reasoning models do), the request is retried once without that
// feature and the drop is listed in Response.Degraded.
func (c *OpenAIChat) Complete(ctx context.Context, req Request) (Response, error) {
	useSchema, useTemperature := req.Schema != nil, true
	var degraded []string
	// droppable names the feature a 400 rejects, if Complete may drop it.
	droppable := func(err error) string {
		switch {
		case useSchema && rejects(err, "response_format", "json_schema"):
			return "response_format"
		case useTemperature && rejects(err, "temperature"):
			return "temperature"
		}
		return ""
	}
	for {
		params, err := chatParams(req, useSchema, useTemperature)
		if err != nil {
			return Response{}, err
		}
		var body []byte
		err = c.retry.do(ctx, "chat completion", req.Model, func(err error) bool { return droppable(err) != "" },
			func(ctx context.Context) error {
				body = nil
				_, err := c.client.Chat.Completions.New(ctx, params, option.WithResponseBodyInto(&body))
				return err
			})
		if err == nil {
			return chatResponse(body, req.Model, degraded)
		}
		feature := droppable(err)
		switch feature {
		case "response_format":
			useSchema = false
		case "temperature":
			useTemperature = false
		default:
			if _, ok := AsProviderError(err); ok {
				return Response{}, err // a self-contained message with its hint
			}
			return Response{}, fmt.Errorf("chat completion with model %s: %w", req.Model, err)
		}
		degraded = append(degraded, feature)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func rejects(err error, words ...string) bool {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || (apiErr.StatusCode != http.StatusBadRequest && apiErr.StatusCode != http.StatusUnprocessableEntity) {
		return false
	}
	msg := strings.ToLower(apiErr.Message + " " + apiErr.Param + " " + apiErr.Code)
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

func chatParams(req Request, useSchema, useTemperature bool) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.CacheKey != "" {
		params.PromptCacheKey = openai.String(req.CacheKey)
	}
	if req.LongCache && ExtendedRetention(req.Model) {
		params.PromptCacheRetention = openai.ChatCompletionNewParamsPromptCacheRetention24h
	}
	for _, m := range joinTurns(req.Messages) {
		switch m.Role {
		case "system":
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case "user":
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		default:
			return params, fmt.Errorf("chat message role %q is not supported", m.Role)
		}
	}
	if useTemperature {
		params.Temperature = openai.Float(req.Temperature)
	}
	if req.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxCompletionTokens = openai.Int(req.MaxOutputTokens)
	}
	if useSchema {
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   req.SchemaName,
					Schema: req.Schema,
					Strict: openai.Bool(true),
				},
			},
		}
	}
	return params, nil
}

func chatResponse(body []byte, model string, degraded []string) (Response, error) {
	var cc openai.ChatCompletion
	if err := decodeReply(body, &chatShape{}, &cc); err != nil {
		return Response{}, fmt.Errorf("chat completion with model %s: %w", model, err)
	}
	if len(cc.Choices) == 0 {
		return Response{}, fmt.Errorf("chat completion with model %s: the server returned no choices", model)
	}
	choice := cc.Choices[0]
	return Response{
		Content:      choice.Message.Content,
		Refusal:      choice.Message.Refusal,
		FinishReason: choice.FinishReason,
		Model:        cc.Model,
		Usage: Usage{
			PromptTokens:      cc.Usage.PromptTokens,
			CompletionTokens:  cc.Usage.CompletionTokens,
			TotalTokens:       cc.Usage.TotalTokens,
			CachedInputTokens: cc.Usage.PromptTokensDetails.CachedTokens,
			CacheWriteTokens:  cc.Usage.PromptTokensDetails.CacheWriteTokens,
		},
		Degraded: degraded,
	}.validText(), nil
}

// joinTurns joins each run of consecutive user messages into one: they are
// cache segments of one turn (see Message), and the OpenAI APIs cache any
// exact prefix, so one message with the same bytes serves as well.
func joinTurns(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if n := len(out); n > 0 && m.Role == "user" && out[n-1].Role == "user" {
			out[n-1].Content += m.Content
			continue
		}
		out = append(out, m)
	}
	return out
}
