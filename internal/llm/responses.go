package llm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// Defaults of ResponsesConfig and OpenAIResponses.
const (
	DefaultPollInterval = 2 * time.Second
	DefaultMaxWait      = 30 * time.Minute
	// DefaultMaxOutputTokens is the output budget assumed for a request that
	// sets none when its response comes back incomplete: the retry asks for
	// twice this (128000), which is the output limit of current reasoning
	// models. It is the planner's default budget.
	DefaultMaxOutputTokens = 64000
)

const (
	heartbeatEvery = 30 * time.Second
	// cancelTimeout bounds the best-effort cancellation of an abandoned
	// background response.
	cancelTimeout = 5 * time.Second
)

// ResponsesConfig configures an OpenAI Responses API client. As with
// OpenAIConfig, every setting is explicit.
type ResponsesConfig struct {
	APIKey     string
	BaseURL    string       // "" means DefaultBaseURL
	HTTPClient *http.Client // nil means http.DefaultClient
	// CustomHeaders is the value of OPENAI_CUSTOM_HEADERS, which the SDK
	// applies by itself; its headers are removed again.
	CustomHeaders string
	PollInterval  time.Duration // between status polls; 0 means DefaultPollInterval
	// MaxWait bounds one submission and the wait for its answer (the retry
	// of an incomplete response gets a fresh MaxWait); 0 means
	// DefaultMaxWait.
	MaxWait time.Duration
	// MaxRetries, RetryBase and Sleep set the retry policy of each HTTP
	// call (see DefaultRetries); zero values mean the defaults, nil Sleep a
	// timer.
	MaxRetries int
	RetryBase  time.Duration
	Sleep      SleepFunc
	// Progress, when set, gets one line per submission, status change and
	// transport retry, and a heartbeat line every ~30s of unchanged status.
	Progress io.Writer
}

// OpenAIResponses calls the Responses API (POST {base}/responses) in
// background mode: it submits the request with background and store set,
// then polls GET {base}/responses/{id} until the response is completed,
// failed, cancelled or incomplete. It implements Model, so Recorder and
// Replayer work with it unchanged.
//
// Each HTTP call (the submission, each poll) follows the retry policy of
// DefaultRetries; failures of the server or the connection are
// *ProviderError values. Note that a submission whose answer was lost to a
// dropped connection is submitted again, which may leave a duplicate
// background response on the server.
//
// Request mapping: system messages become instructions (joined by a blank
// line), user messages become input messages, ReasoningEffort becomes
// reasoning.effort, MaxOutputTokens max_output_tokens, and Schema a strict
// json_schema text format. Temperature is sent only when it is not 0, since
// reasoning models reject the parameter.
type OpenAIResponses struct {
	client    openai.Client
	retry     retrier
	poll      time.Duration
	maxWait   time.Duration
	heartbeat time.Duration
	progress  io.Writer
}

// NewOpenAIResponses returns a Responses API model client.
func NewOpenAIResponses(cfg ResponsesConfig) *OpenAIResponses {
	c := &OpenAIResponses{
		client:    openai.NewClient(clientOptions(cfg.APIKey, cfg.BaseURL, cfg.CustomHeaders, cfg.HTTPClient)...),
		retry:     newRetrier(cfg.MaxRetries, cfg.RetryBase, cfg.Sleep, "", orDefault(cfg.BaseURL, DefaultBaseURL)),
		poll:      cfg.PollInterval,
		maxWait:   cfg.MaxWait,
		heartbeat: heartbeatEvery,
		progress:  cfg.Progress,
	}
	c.retry.logf = c.logf
	if c.poll <= 0 {
		c.poll = DefaultPollInterval
	}
	if c.maxWait <= 0 {
		c.maxWait = DefaultMaxWait
	}
	return c
}

// Complete submits req and waits for its answer. A completed response is
// returned with FinishReason "completed". An incomplete one (reason
// max_output_tokens, or none given) is retried once with the output budget
// doubled (2×MaxOutputTokens, or 2×DefaultMaxOutputTokens when the request
// set none), noted in Response.Degraded; a second incomplete answer, or one
// for another reason, is an error. Failed and cancelled responses are errors
// carrying the server's message.
func (c *OpenAIResponses) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := responsesParams(req)
	if err != nil {
		return Response{}, err
	}
	var degraded []string
	for retried := false; ; retried = true {
		r, err := c.run(ctx, req.Model, params)
		if err != nil {
			return Response{}, err
		}
		switch r.Status {
		case responses.ResponseStatusCompleted:
			return toResponse(r, degraded), nil
		case responses.ResponseStatusIncomplete:
			reason := r.IncompleteDetails.Reason
			if retried || (reason != "" && reason != "max_output_tokens") {
				return Response{}, fmt.Errorf("response %s (model %s) is incomplete (%s) at max_output_tokens %s",
					r.ID, req.Model, orUnknown(reason), budgetText(params))
			}
			budget := 2 * req.MaxOutputTokens
			if budget <= 0 {
				budget = 2 * DefaultMaxOutputTokens
			}
			params.MaxOutputTokens = openai.Int(budget)
			note := fmt.Sprintf("max_output_tokens doubled to %d", budget)
			degraded = append(degraded, note)
			c.logf("response %s is incomplete (%s); retrying with %s", r.ID, orUnknown(reason), note)
		case responses.ResponseStatusFailed:
			msg := r.Error.Message
			if r.Error.Code != "" {
				msg = string(r.Error.Code) + ": " + msg
			}
			return Response{}, fmt.Errorf("response %s (model %s) failed: %s", r.ID, req.Model, orUnknown(msg))
		case responses.ResponseStatusCancelled:
			return Response{}, fmt.Errorf("response %s (model %s) was cancelled on the server", r.ID, req.Model)
		default:
			return Response{}, fmt.Errorf("response %s (model %s) has unexpected status %q", r.ID, req.Model, r.Status)
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func budgetText(p responses.ResponseNewParams) string {
	if p.MaxOutputTokens.Valid() {
		return fmt.Sprint(p.MaxOutputTokens.Value)
	}
	return "(server default)"
}

func responsesParams(req Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model:      shared.ResponsesModel(req.Model),
		Background: openai.Bool(true),
		Store:      openai.Bool(true), // background responses must be stored
	}
	if req.CacheKey != "" {
		p.PromptCacheKey = openai.String(req.CacheKey)
	}
	if req.LongCache && ExtendedRetention(req.Model) {
		p.PromptCacheRetention = responses.ResponseNewParamsPromptCacheRetention24h
	}
	var system []string
	var input responses.ResponseInputParam
	for _, m := range joinTurns(req.Messages) {
		switch m.Role {
		case "system":
			system = append(system, m.Content)
		case "user":
			input = append(input, responses.ResponseInputItemParamOfMessage(m.Content, responses.EasyInputMessageRoleUser))
		default:
			return p, fmt.Errorf("responses message role %q is not supported", m.Role)
		}
	}
	if len(system) > 0 {
		p.Instructions = openai.String(strings.Join(system, "\n\n"))
	}
	if len(input) > 0 {
		p.Input.OfInputItemList = input
	}
	if req.Temperature != 0 {
		p.Temperature = openai.Float(req.Temperature)
	}
	if req.ReasoningEffort != "" {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(req.ReasoningEffort)}
	}
	if req.MaxOutputTokens > 0 {
		p.MaxOutputTokens = openai.Int(req.MaxOutputTokens)
	}
	if req.Schema != nil {
		p.Text = responses.ResponseTextConfigParam{
			Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
					Name:   req.SchemaName,
					Schema: req.Schema,
					Strict: openai.Bool(true),
				},
			},
		}
	}
	return p, nil
}

func toResponse(r *responses.Response, degraded []string) Response {
	// Only message items hold the answer, as the API documents and the
	// Python SDK's output_text reads it; the Go SDK's OutputText takes
	// output_text parts of any item, such as one of a type it does not know.
	var content, refusal strings.Builder
	for _, item := range r.Output {
		if item.Type != "message" {
			continue
		}
		for _, part := range item.Content {
			switch part.Type {
			case "output_text":
				content.WriteString(part.Text)
			case "refusal":
				refusal.WriteString(part.Refusal)
			}
		}
	}
	return Response{
		Content:      content.String(),
		Refusal:      refusal.String(),
		FinishReason: string(r.Status),
		Model:        r.Model,
		Usage: Usage{
			PromptTokens:      r.Usage.InputTokens,
			CompletionTokens:  r.Usage.OutputTokens,
			TotalTokens:       r.Usage.TotalTokens,
			CachedInputTokens: r.Usage.InputTokensDetails.CachedTokens,
		},
		Degraded: degraded,
	}.validText()
}

// decodeResponse decodes a response object's whole body into *r, refusing
// one whose fields have the wrong types (see shape.go); err is the SDK
// call's.
func decodeResponse(r **responses.Response, body []byte, err error) error {
	if err != nil {
		return err
	}
	var got responses.Response
	if err := decodeReply(body, &responsesShape{}, &got); err != nil {
		return err
	}
	*r = &got
	return nil
}

func terminal(s responses.ResponseStatus) bool {
	switch s {
	case responses.ResponseStatusQueued, responses.ResponseStatusInProgress:
		return false
	}
	return true
}

// run submits params and polls until the response reaches a terminal
// status, all within maxWait.
func (c *OpenAIResponses) run(ctx context.Context, model string, params responses.ResponseNewParams) (*responses.Response, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.maxWait)
	defer cancel()

	var r *responses.Response
	err := c.retry.do(wctx, "submit", model, nil, func(ctx context.Context) error {
		var body []byte
		_, err := c.client.Responses.New(ctx, params, option.WithResponseBodyInto(&body))
		return decodeResponse(&r, body, err)
	})
	_, provider := AsProviderError(err)
	switch {
	case provider:
		return nil, err // a self-contained message with its hint
	case ctx.Err() != nil:
		return nil, fmt.Errorf("submit response with model %s: %w", model, ctx.Err())
	case wctx.Err() != nil:
		return nil, fmt.Errorf("submit response with model %s: no answer within the max wait of %s", model, c.maxWait)
	case err != nil:
		return nil, fmt.Errorf("submit response with model %s: %w", model, err)
	}
	if r.ID == "" && !terminal(r.Status) {
		return nil, fmt.Errorf("submit response with model %s: the server returned status %s and no response id", model, r.Status)
	}
	c.logf("response %s submitted (model %s): %s", r.ID, model, r.Status)

	id, status, lastLine := r.ID, r.Status, time.Now()
	for !terminal(status) {
		err := sleepCtx(wctx, c.poll)
		if err == nil {
			var got *responses.Response
			err = c.retry.do(wctx, "poll "+id, model, nil, func(ctx context.Context) error {
				var body []byte
				_, err := c.client.Responses.Get(ctx, id, responses.ResponseGetParams{}, option.WithResponseBodyInto(&body))
				return decodeResponse(&got, body, err)
			})
			if err == nil {
				r = got
			}
		}
		switch {
		case ctx.Err() != nil:
			c.cancelRemote(ctx, id)
			return nil, fmt.Errorf("response %s (model %s), last status %s: %w", id, model, status, ctx.Err())
		case wctx.Err() != nil:
			return nil, fmt.Errorf("response %s (model %s) is still %s after the max wait of %s (%s)",
				id, model, status, c.maxWait, c.cancelRemote(ctx, id))
		case err != nil:
			if _, ok := AsProviderError(err); ok {
				c.cancelRemote(ctx, id)
				return nil, err
			}
			return nil, fmt.Errorf("response %s (model %s), last status %s: %w", id, model, status, err)
		}
		if r.Status != status {
			status, lastLine = r.Status, time.Now()
			c.logf("response %s: %s after %s", id, status, roundDuration(time.Since(start)))
		} else if time.Since(lastLine) >= c.heartbeat {
			lastLine = time.Now()
			c.logf("response %s: still %s after %s", id, status, roundDuration(time.Since(start)))
		}
	}
	return r, nil
}

// cancelRemote asks the server to cancel an abandoned background response,
// best effort: it runs even when ctx is done, for at most cancelTimeout. It
// returns how that went, for the error message.
func (c *OpenAIResponses) cancelRemote(ctx context.Context, id string) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	if _, err := c.client.Responses.Cancel(cctx, id); err != nil {
		note := "cancel failed: " + brief(err)
		c.logf("response %s: %s", id, note)
		return note
	}
	c.logf("response %s: cancel requested", id)
	return "cancel requested"
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func (c *OpenAIResponses) logf(format string, args ...any) {
	if c.progress != nil {
		fmt.Fprintf(c.progress, "responses: "+format+"\n", args...)
	}
}
