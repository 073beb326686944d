package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// The SDKs decode leniently: a number where a string belongs becomes its
// text ("content": 5 reads as "5"), a string where a number belongs is
// parsed ("prompt_tokens": "12"), a value of the wrong kind becomes the
// zero value. A reply that does not say what it seems to must fail rather
// than be repaired, so each client decodes the parts of the raw reply it
// uses once more with encoding/json, into the shapes below, whose types are
// the API's.

// replyUsage is the token counts of the three APIs, each where the API
// has it.
type replyUsage struct {
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
	TotalTokens              *int64 `json:"total_tokens"`
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	// Anthropic: the cache writes by TTL.
	CacheCreation *struct {
		Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// Chat Completions: prompt_tokens_details; Responses: input_tokens_details.
	PromptTokensDetails *cacheDetails `json:"prompt_tokens_details"`
	InputTokensDetails  *cacheDetails `json:"input_tokens_details"`
}

// cacheDetails is the OpenAI APIs' breakdown of the input: the part read
// from the prompt cache and, where reported, the part written to it.
type cacheDetails struct {
	CachedTokens     *int64 `json:"cached_tokens"`
	CacheWriteTokens *int64 `json:"cache_write_tokens"`
}

// decodeReply decodes a successful reply's whole body into dst with the
// SDK's decoder, once shape (see above) has checked it. The SDKs decode only
// the first JSON value of a body and drop whatever follows it, so the body
// is taken whole (option.WithResponseBodyInto) and checked here, where
// encoding/json refuses data after the value.
func decodeReply(body []byte, shape interface{ check(string) error }, dst json.Unmarshaler) error {
	if string(bytes.TrimSpace(body)) == "null" {
		return errors.New("the server's reply is malformed: it is null")
	}
	if err := shape.check(string(body)); err != nil {
		return fmt.Errorf("the server's reply is malformed: %w", err)
	}
	if err := dst.UnmarshalJSON(body); err != nil {
		return fmt.Errorf("the server's reply is malformed: %w", err)
	}
	return nil
}

// checkShape decodes raw into shape (a pointer to one of the shapes below)
// and returns what is malformed about it, naming the field, or nil.
func checkShape(raw string, shape any) error {
	if err := json.Unmarshal([]byte(raw), shape); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "the reply"
			}
			return fmt.Errorf("%s is a JSON %s, not %s", field, te.Value, jsonTypeName(te.Type.String()))
		}
		return err
	}
	return checkKeyCase(raw, shape)
}

// checkKeyCase refuses a key that is one of shape's fields but for case
// ("finish_reAson"): encoding/json matches keys without regard to case and
// the SDKs do not, so the check above and the SDK would read different
// values. The APIs' keys are all lower case.
func checkKeyCase(raw string, shape any) error {
	t := reflect.TypeOf(shape)
	cached, ok := shapeFields.Load(t)
	if !ok {
		fields := map[string]bool{}
		collectFields(t, fields, map[reflect.Type]bool{})
		cached, _ = shapeFields.LoadOrStore(t, fields)
	}
	fields := cached.(map[string]bool)
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return err
	}
	return walkKeys(v, fields)
}

// shapeFields caches collectFields per shape type: the check runs on every
// reply and every streamed event.
var shapeFields sync.Map // reflect.Type -> map[string]bool, read only once stored

func walkKeys(v any, fields map[string]bool) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if low := strings.ToLower(k); low != k && fields[low] {
				return fmt.Errorf("key %q is not the API's %q", k, low)
			}
			if err := walkKeys(e, fields); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := walkKeys(e, fields); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectFields adds the JSON names of t's struct fields, at any depth.
func collectFields(t reflect.Type, fields map[string]bool, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			fields[name] = true
		}
		collectFields(f.Type, fields, seen)
	}
}

// jsonTypeName names a Go type of a shape the way the API documents it.
func jsonTypeName(goType string) string {
	switch strings.TrimLeft(goType, "*") {
	case "string":
		return "a string"
	case "int64":
		return "an integer"
	}
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.HasPrefix(goType, "llm."):
		return "an object"
	}
	return goType
}

// checkCounts refuses a negative token count, which would run a budget
// backwards.
func checkCounts(at string, u *replyUsage) error {
	if u == nil {
		return nil
	}
	type count struct {
		name string
		n    *int64
	}
	counts := []count{
		{"prompt_tokens", u.PromptTokens}, {"completion_tokens", u.CompletionTokens}, {"total_tokens", u.TotalTokens},
		{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens},
		{"cache_creation_input_tokens", u.CacheCreationInputTokens}, {"cache_read_input_tokens", u.CacheReadInputTokens},
	}
	if c := u.CacheCreation; c != nil {
		counts = append(counts, count{"cache_creation.ephemeral_5m_input_tokens", c.Ephemeral5m}, count{"cache_creation.ephemeral_1h_input_tokens", c.Ephemeral1h})
	}
	for _, d := range []struct {
		name string
		d    *cacheDetails
	}{{"prompt_tokens_details", u.PromptTokensDetails}, {"input_tokens_details", u.InputTokensDetails}} {
		if d.d != nil {
			counts = append(counts, count{d.name + ".cached_tokens", d.d.CachedTokens}, count{d.name + ".cache_write_tokens", d.d.CacheWriteTokens})
		}
	}
	for _, c := range counts {
		if c.n != nil && *c.n < 0 {
			return fmt.Errorf("%s.%s is negative (%d)", at, c.name, *c.n)
		}
	}
	return nil
}

// chatShape is the part of a chat completion that chatResponse reads.
type chatShape struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *replyUsage `json:"usage"`
}

func (s *chatShape) check(raw string) error {
	if err := checkShape(raw, s); err != nil {
		return err
	}
	return checkCounts("usage", s.Usage)
}

// responsesShape is the part of a Responses API object that Complete and
// toResponse read.
type responsesShape struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Model  string `json:"model"`
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	} `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage *replyUsage `json:"usage"`
}

func (s *responsesShape) check(raw string) error {
	if err := checkShape(raw, s); err != nil {
		return err
	}
	return checkCounts("usage", s.Usage)
}

// anthropicEventShape is the part of a Messages stream event that
// Message.Accumulate and anthropicResponse read.
type anthropicEventShape struct {
	Type    string `json:"type"`
	Index   *int64 `json:"index"`
	Message *struct {
		Model      string      `json:"model"`
		StopReason *string     `json:"stop_reason"`
		Usage      *replyUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type string `json:"type"`
		Text string `json:"text"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *replyUsage `json:"usage"`
}

func (s *anthropicEventShape) check(raw string) error {
	if err := checkShape(raw, s); err != nil {
		return err
	}
	if s.Message != nil {
		if err := checkCounts("message.usage", s.Message.Usage); err != nil {
			return err
		}
	}
	return checkCounts("usage", s.Usage)
}
