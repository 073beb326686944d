package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// Retry policy of both clients, for one HTTP call.
const (
	// DefaultRetries is how often a call is retried after HTTP 408, 429 or
	// 5xx, a timeout, or a dropped connection. A refused connection, a DNS
	// failure and every other 4xx fail at once.
	DefaultRetries = 3
	// DefaultRetryBase is the first backoff; each later one doubles it.
	DefaultRetryBase = time.Second
	// MaxRetryWait caps one wait, whether from the backoff or from the
	// server's Retry-After.
	MaxRetryWait = 60 * time.Second
)

// MaxReplyBytes caps one HTTP response body: a larger reply is refused with
// ErrReplyTooLarge instead of being held in memory and stored.
const MaxReplyBytes = 8 << 20

// ErrReplyTooLarge is returned (wrapped) by both clients when a response
// body exceeds MaxReplyBytes. It is not a ProviderError and not retried.
var ErrReplyTooLarge = errors.New("the model server's reply is larger than 8 MiB")

// SleepFunc waits d or until ctx is done; tests inject one that records
// the waits and returns at once.
type SleepFunc func(ctx context.Context, d time.Duration) error

// retrier runs one HTTP call with the retry policy.
type retrier struct {
	retries  int
	base     time.Duration
	sleep    SleepFunc
	provider string // ProviderError.Provider
	baseURL  string
	// logf, when set, is told about each retry.
	logf func(format string, args ...any)
}

// newRetrier returns the policy for calls to baseURL, which the caller has
// defaulted.
func newRetrier(retries int, base time.Duration, sleep SleepFunc, provider, baseURL string) retrier {
	if retries <= 0 {
		retries = DefaultRetries
	}
	if base <= 0 {
		base = DefaultRetryBase
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	return retrier{retries: retries, base: base, sleep: sleep, provider: provider, baseURL: baseURL}
}

// do runs f until it succeeds, fails for good, or the retries run out. A
// provider failure is returned as a *ProviderError; an error for which keep
// is true is returned as it is, unclassified, so that the caller can react
// to it (Chat Completions drops a feature the server rejects).
func (r retrier) do(ctx context.Context, what, model string, keep func(error) bool, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if keep != nil && keep(err) {
			return err
		}
		fl, ok := classify(err)
		if !ok {
			return err
		}
		if !fl.transient || attempt > r.retries {
			return providerError(err, fl, r.provider, r.baseURL, model, attempt)
		}
		delay := r.delay(err, attempt)
		if r.logf != nil {
			r.logf("%s: %s; retry %d of %d in %s", what, brief(err), attempt, r.retries, delay)
		}
		if err := r.sleep(ctx, delay); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
	}
}

// delay is the wait before retry n (1-based): the server's Retry-After if
// it sent one, else base·2^(n-1), capped at MaxRetryWait either way.
func (r retrier) delay(err error, n int) time.Duration {
	if a, ok := asErrorReply(err); ok && a.header != nil {
		if d, ok := retryAfter(a.header, time.Now()); ok {
			return min(d, MaxRetryWait)
		}
	}
	d := r.base << (n - 1)
	if d <= 0 || d > MaxRetryWait { // <= 0: the shift overflowed
		return MaxRetryWait
	}
	return d
}

// retryAfter reads the server's requested wait: retry-after-ms (OpenAI's),
// else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, MaxRetryWait.Seconds()) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// brief describes a failed call for a progress line.
func brief(err error) string {
	if a, ok := asErrorReply(err); ok {
		if a.message != "" {
			return fmt.Sprintf("HTTP %d: %s", a.status, shortMsg(a.message))
		}
		return fmt.Sprintf("HTTP %d", a.status)
	}
	return shortMsg(transportReason(err))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// capReplies makes every response body fail with ErrReplyTooLarge past
// MaxReplyBytes, so an endless or huge answer is never read whole.
func capReplies(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	return capReply(next(req))
}

// capReply is capReplies for either SDK's middleware type.
func capReply(res *http.Response, err error) (*http.Response, error) {
	if err == nil && res.Body != nil {
		res.Body = &cappedBody{ReadCloser: res.Body, left: MaxReplyBytes}
	}
	return res, err
}

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrReplyTooLarge
	}
	// Read one byte past the cap to tell "exactly the cap" from "more".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, ErrReplyTooLarge
	}
	return n, err
}
