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
	APIKey     string
	BaseURL    string
	Timeout    time.Duration // per request, retries included
	MaxRetries int           // transport retries on 408/409/429/5xx and connection errors
	HTTPClient *http.Client  // nil means http.DefaultClient
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

// clientOptions are the SDK options both clients share, all explicit.
func clientOptions(apiKey, baseURL, customHeaders string, httpClient *http.Client, retries int) []option.RequestOption {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithAPIKey(apiKey),
		option.WithBaseURL(baseURL),
		option.WithMaxRetries(retries),
		option.WithMiddleware(dropHeaders(customHeaders)),
	}
	if httpClient != nil {
		opts = append(opts, option.WithHTTPClient(httpClient))
	}
	return opts
}

// OpenAIChat calls POST {base}/chat/completions.
type OpenAIChat struct {
	client openai.Client
}

// NewOpenAIChat returns a Chat Completions model client.
func NewOpenAIChat(cfg OpenAIConfig) *OpenAIChat {
	opts := clientOptions(cfg.APIKey, cfg.BaseURL, cfg.CustomHeaders, cfg.HTTPClient, cfg.MaxRetries)
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &OpenAIChat{client: openai.NewClient(opts...)}
}

// Complete sends req. If the server rejects the strict response format or a
// non-default temperature with a 400 that names it (as some OpenAI-compatible
// servers and reasoning models do), the request is retried once without that
// feature and the drop is listed in Response.Degraded.
func (c *OpenAIChat) Complete(ctx context.Context, req Request) (Response, error) {
	useSchema, useTemperature := req.Schema != nil, true
	var degraded []string
	for {
		resp, err := c.complete(ctx, req, useSchema, useTemperature)
		if err == nil {
			resp.Degraded = degraded
			return resp, nil
		}
		switch {
		case useSchema && rejects(err, "response_format", "json_schema"):
			useSchema = false
			degraded = append(degraded, "response_format")
		case useTemperature && rejects(err, "temperature"):
			useTemperature = false
			degraded = append(degraded, "temperature")
		default:
			return Response{}, err
		}
	}
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

func (c *OpenAIChat) complete(ctx context.Context, req Request, useSchema, useTemperature bool) (Response, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case "user":
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		default:
			return Response{}, fmt.Errorf("chat message role %q is not supported", m.Role)
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
	cc, err := c.client.Chat.Completions.New(ctx, params)
	if err != nil {
		// The SDK's error text is only the status; the server's message is
		// what tells the user (and the next attempt) what went wrong.
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.Message != "" {
			return Response{}, fmt.Errorf("chat completion with model %s: %w: %s", req.Model, err, apiErr.Message)
		}
		return Response{}, fmt.Errorf("chat completion with model %s: %w", req.Model, err)
	}
	if len(cc.Choices) == 0 {
		return Response{}, fmt.Errorf("chat completion with model %s: the server returned no choices", req.Model)
	}
	choice := cc.Choices[0]
	return Response{
		Content:      choice.Message.Content,
		Refusal:      choice.Message.Refusal,
		FinishReason: choice.FinishReason,
		Model:        cc.Model,
		Usage: Usage{
			PromptTokens:     cc.Usage.PromptTokens,
			CompletionTokens: cc.Usage.CompletionTokens,
			TotalTokens:      cc.Usage.TotalTokens,
		},
	}, nil
}
