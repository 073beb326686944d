package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
)

// Exchange is one line of a JSONL transcript.
type Exchange struct {
	Seq           int       `json:"seq"`
	RequestSHA256 string    `json:"request_sha256"`
	Request       Request   `json:"request"`
	Response      *Response `json:"response,omitempty"`
	Error         string    `json:"error,omitempty"` // the call failed; replay fails the same way
	// ProviderError is set when the failure was the provider's, so that a
	// replay ends the run the same way instead of counting an attempt.
	ProviderError *ProviderError `json:"provider_error,omitempty"`
}

// Recorder passes requests to a model and appends every exchange, failed
// ones included, to a JSONL transcript.
type Recorder struct {
	Model Model
	Path  string

	mu  sync.Mutex
	seq int
}

// Complete implements Model.
func (r *Recorder) Complete(ctx context.Context, req Request) (Response, error) {
	return r.record(ctx, r.Model, req)
}

// Wrap returns a Model that passes calls to model and records them in r's
// transcript, numbered with r's own: one transcript for several clients,
// such as a build's planner and its work orders' model.
func (r *Recorder) Wrap(model Model) Model {
	return modelFunc(func(ctx context.Context, req Request) (Response, error) { return r.record(ctx, model, req) })
}

func (r *Recorder) record(ctx context.Context, model Model, req Request) (Response, error) {
	resp, err := model.Complete(ctx, req)
	if ctx.Err() != nil {
		return resp, err // an interrupted call is not an answer worth replaying
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	ex := Exchange{Seq: r.seq, RequestSHA256: req.Hash(), Request: req}
	if err != nil {
		ex.Error = err.Error()
		ex.ProviderError, _ = AsProviderError(err)
	} else {
		ex.Response = &resp
	}
	if werr := appendLine(r.Path, ex); werr != nil {
		return Response{}, &RecordError{Path: r.Path, Err: werr}
	}
	return resp, err
}

// RecordError is a failure to write the transcript. It is not a model
// failure: a run that cannot keep its record must stop, not retry.
type RecordError struct {
	Path string
	Err  error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record transcript %s: %v", e.Path, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

func appendLine(path string, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Replayer answers requests from a transcript, in order, without a network.
type Replayer struct {
	path      string
	exchanges []Exchange

	mu   sync.Mutex
	next int
}

// ReplayMismatchError reports the first request that is not the one the
// transcript recorded. A run that hits it cannot be a faithful replay.
type ReplayMismatchError struct {
	Path   string
	Seq    int
	Detail string
}

func (e *ReplayMismatchError) Error() string {
	return fmt.Sprintf("replay %s: request #%d differs from the transcript: %s", e.Path, e.Seq, e.Detail)
}

// LoadReplayer reads a transcript written by Recorder.
func LoadReplayer(path string) (*Replayer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	r := &Replayer{path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, min(len(data)+1, 1<<20)), 64<<20) // grown for a longer line
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ex Exchange
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ex); err != nil {
			return nil, fmt.Errorf("transcript %s line %d: %w", path, n, err)
		}
		if ex.Response == nil && ex.Error == "" {
			return nil, fmt.Errorf("transcript %s line %d: exchange has neither a response nor an error", path, n)
		}
		if ex.Response != nil && (ex.Error != "" || ex.ProviderError != nil) {
			return nil, fmt.Errorf("transcript %s line %d: exchange has both a response and an error", path, n)
		}
		if ex.ProviderError != nil && ex.Error == "" {
			return nil, fmt.Errorf("transcript %s line %d: exchange has a provider_error but no error text", path, n)
		}
		// A request that does not hash to request_sha256 was edited or
		// damaged: replaying it would report a mismatch with no difference.
		if got := ex.Request.Hash(); got != ex.RequestSHA256 {
			return nil, fmt.Errorf("transcript %s line %d: request_sha256 is %s, but the recorded request hashes to %s (the line was edited or damaged)", path, n, clipHash(ex.RequestSHA256), got)
		}
		r.exchanges = append(r.exchanges, ex)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", path, err)
	}
	if len(r.exchanges) == 0 {
		return nil, fmt.Errorf("transcript %s holds no exchanges", path)
	}
	return r, nil
}

// clipHash quotes a recorded hash, shortened if it is not one.
func clipHash(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Complete implements Model.
func (r *Replayer) Complete(_ context.Context, req Request) (Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.next + 1
	if r.next >= len(r.exchanges) {
		return Response{}, &ReplayMismatchError{Path: r.path, Seq: seq,
			Detail: fmt.Sprintf("the transcript holds only %d exchange(s)", len(r.exchanges))}
	}
	ex := r.exchanges[r.next]
	if got := req.Hash(); got != ex.RequestSHA256 && !sameButDurations(ex.Request, req) {
		return Response{}, &ReplayMismatchError{Path: r.path, Seq: seq, Detail: firstDifference(ex.Request, req)}
	}
	r.next++
	if ex.ProviderError != nil {
		pe := *ex.ProviderError
		return Response{}, &pe
	}
	if ex.Error != "" {
		// The same text as when recorded: it reaches the next prompt.
		return Response{}, errors.New(ex.Error)
	}
	return *ex.Response, nil
}

// durations are what commands print of their own wall time ("Ran 1 test
// in 0.021s", "ok calc 0.012s", "(12.3ms)"), which reaches a prompt in a
// failure's output and which no two runs repeat.
var durations = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?(ns|µs|us|ms|s)\b`)

// sameButDurations reports whether two requests differ only in the
// durations they quote: a replay of a run whose commands took another
// time is still the same run.
func sameButDurations(recorded, now Request) bool {
	a, errA := json.Marshal(recorded)
	b, errB := json.Marshal(now)
	return errA == nil && errB == nil && bytes.Equal(durations.ReplaceAll(a, []byte("#")), durations.ReplaceAll(b, []byte("#")))
}

// firstDifference names the first field where two requests differ.
func firstDifference(recorded, now Request) string {
	switch {
	case recorded.Model != now.Model:
		return fmt.Sprintf("model is %q, recorded %q", now.Model, recorded.Model)
	case recorded.Temperature != now.Temperature:
		return fmt.Sprintf("temperature is %v, recorded %v", now.Temperature, recorded.Temperature)
	case recorded.ReasoningEffort != now.ReasoningEffort:
		return fmt.Sprintf("reasoning_effort is %q, recorded %q", now.ReasoningEffort, recorded.ReasoningEffort)
	case recorded.MaxOutputTokens != now.MaxOutputTokens:
		return fmt.Sprintf("max_output_tokens is %d, recorded %d", now.MaxOutputTokens, recorded.MaxOutputTokens)
	case len(recorded.Messages) != len(now.Messages):
		return fmt.Sprintf("%d messages, recorded %d", len(now.Messages), len(recorded.Messages))
	}
	for i := range now.Messages {
		a, b := recorded.Messages[i], now.Messages[i]
		if a.Role != b.Role {
			return fmt.Sprintf("messages[%d].role is %q, recorded %q", i, b.Role, a.Role)
		}
		if a.Content != b.Content {
			at := commonPrefix(a.Content, b.Content)
			return fmt.Sprintf("messages[%d].content differs at byte %d: now %q, recorded %q",
				i, at, window(b.Content, at), window(a.Content, at))
		}
	}
	if recorded.CacheKey != now.CacheKey {
		return fmt.Sprintf("cache_key is %q, recorded %q", now.CacheKey, recorded.CacheKey)
	}
	if recorded.SchemaName != now.SchemaName {
		return fmt.Sprintf("schema_name is %q, recorded %q", now.SchemaName, recorded.SchemaName)
	}
	return "the response schema differs"
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func window(s string, at int) string {
	end := min(at+60, len(s))
	return s[at:end]
}
