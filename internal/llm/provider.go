package llm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// ProviderErrorKind says what went wrong between factory and the model
// server.
type ProviderErrorKind string

// The kinds of ProviderError. The first group fails at once: retrying
// cannot help. The second group is what a transient failure becomes when
// its retries run out.
const (
	KindUnauthorized     ProviderErrorKind = "unauthorized"       // HTTP 401 or 403
	KindModelNotFound    ProviderErrorKind = "model_not_found"    // HTTP 404 (or 400) naming the model
	KindEndpointNotFound ProviderErrorKind = "endpoint_not_found" // HTTP 404 that does not name a model: wrong base URL
	KindUnreachable      ProviderErrorKind = "unreachable"        // connection refused, DNS failure, TLS failure
	KindContextTooLong   ProviderErrorKind = "context_too_long"   // HTTP 400 context_length_exceeded, or 413
	KindQuotaExceeded    ProviderErrorKind = "quota_exceeded"     // HTTP 429 insufficient_quota
	KindBadRequest       ProviderErrorKind = "bad_request"        // any other HTTP 4xx

	KindRateLimited    ProviderErrorKind = "rate_limited"    // HTTP 429, retries exhausted
	KindServerError    ProviderErrorKind = "server_error"    // HTTP 5xx, retries exhausted
	KindTimeout        ProviderErrorKind = "timeout"         // HTTP 408 or no answer in time, retries exhausted
	KindConnectionLost ProviderErrorKind = "connection_lost" // connection reset or closed early, retries exhausted
)

// ProviderError is a failure of the model provider, not of the model's
// answer: a run that gets one ends with an error instead of counting a
// failed attempt, and nothing of it goes into a prompt. Both clients return
// it for every HTTP or connection failure, after retries where those apply.
type ProviderError struct {
	Kind     ProviderErrorKind `json:"kind"`
	Status   int               `json:"status,omitempty"` // HTTP status; 0 when there was no answer
	Code     string            `json:"code,omitempty"`   // the server's error code, e.g. context_length_exceeded
	URL      string            `json:"url"`              // the base URL
	Model    string            `json:"model"`
	Attempts int               `json:"attempts"` // HTTP tries made, 1 when not retried
	// Msg is the server's message or the transport error, shortened, for
	// the terminal and logs. It is shown only for kinds whose hint alone
	// would not say what to fix, and never for 401/403 (OpenAI echoes part
	// of the key there).
	Msg string `json:"msg,omitempty"`
	// Provider is ProviderAnthropic for the Anthropic client and empty for
	// OpenAI and OpenAI-compatible servers (so that transcripts recorded
	// before it existed replay unchanged); it picks the environment
	// variables the hints name.
	Provider string `json:"provider,omitempty"`
}

// Provider names, as written before the colon of --llm-model.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// KeyEnv is the environment variable holding provider's API key.
func KeyEnv(provider string) string {
	if provider == ProviderAnthropic {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// BaseURLEnv is the environment variable holding provider's base URL when
// --llm-base-url is not given.
func BaseURLEnv(provider string) string {
	if provider == ProviderAnthropic {
		return "ANTHROPIC_BASE_URL"
	}
	return "OPENAI_BASE_URL"
}

// Error is one line: what happened, where, and what to check.
func (e *ProviderError) Error() string {
	where := "the model server at " + e.URL
	key := KeyEnv(e.Provider)
	switch e.Kind {
	case KindUnauthorized:
		if e.Status == http.StatusForbidden {
			return fmt.Sprintf("%s refused the request for model %q (HTTP 403): check that the key in %s may use this model", where, e.Model, key)
		}
		return fmt.Sprintf("%s rejected the API key (HTTP %d): check %s", where, e.Status, key)
	case KindModelNotFound:
		return fmt.Sprintf("%s does not know model %q (HTTP %d): check --llm-model", where, e.Model, e.Status)
	case KindEndpointNotFound:
		return fmt.Sprintf("%s has no such endpoint (HTTP %d): check --llm-base-url (OpenAI-compatible servers usually end in /v1) and --llm-model", where, e.Status)
	case KindUnreachable:
		return fmt.Sprintf("cannot connect to the model server at %s (%s): check --llm-base-url (or %s) and that the server is running", e.URL, e.Msg, BaseURLEnv(e.Provider))
	case KindContextTooLong:
		return fmt.Sprintf("the context is too long for model %q (HTTP %d%s): send fewer or smaller files, or use a model with a larger context window", e.Model, e.Status, codeSuffix(e.Code))
	case KindQuotaExceeded:
		return fmt.Sprintf("%s reports that the quota or credit of the key is used up (HTTP %d%s): check the billing of the key in %s", where, e.Status, codeSuffix(e.Code), key)
	case KindRateLimited:
		return fmt.Sprintf("%s is still rate-limiting requests (HTTP 429, %s): wait a while and try again, or lower the request rate", where, e.tries())
	case KindServerError:
		return fmt.Sprintf("%s keeps failing (HTTP %d, %s): try again later%s", where, e.Status, e.tries(), e.said())
	case KindTimeout:
		return fmt.Sprintf("%s did not answer in time (%s): try again later, or allow more time per request (--llm-timeout-seconds)", where, e.tries())
	case KindConnectionLost:
		return fmt.Sprintf("the connection to the model server at %s keeps dropping (%s): check the network and any proxy%s", e.URL, e.tries(), e.said())
	default: // KindBadRequest
		return fmt.Sprintf("%s rejected the request for model %q (HTTP %d%s)%s", where, e.Model, e.Status, codeSuffix(e.Code), e.said())
	}
}

// Misconfigured reports whether no call can succeed until the user fixes
// the key, the model name, the base URL or the account: unlike the other
// kinds, waiting or a smaller request will not help.
func (e *ProviderError) Misconfigured() bool {
	switch e.Kind {
	case KindUnauthorized, KindModelNotFound, KindEndpointNotFound, KindUnreachable, KindQuotaExceeded:
		return true
	}
	return false
}

func (e *ProviderError) tries() string {
	if e.Attempts == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("gave up after %d attempts", e.Attempts)
}

func (e *ProviderError) said() string {
	if e.Msg == "" {
		return ""
	}
	return "; the server said: " + e.Msg
}

func codeSuffix(code string) string {
	if code == "" {
		return ""
	}
	return " " + code
}

// AsProviderError reports whether err is or wraps a *ProviderError.
func AsProviderError(err error) (*ProviderError, bool) {
	var pe *ProviderError
	ok := errors.As(err, &pe)
	return pe, ok
}

// maxMsg bounds ProviderError.Msg: a server may answer with a whole page.
const maxMsg = 200

func shortMsg(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMsg {
		s = strings.ToValidUTF8(s[:maxMsg], "") + "…" // no half rune
	}
	return s
}

// failure is one failed HTTP call, classified.
type failure struct {
	kind      ProviderErrorKind // the kind it becomes if it is final
	transient bool              // worth retrying
}

// errorReply is what either SDK's error type says about a failed HTTP call,
// so that one classification and one retry policy serve both clients.
type errorReply struct {
	status  int
	code    string // OpenAI's error code; Anthropic's error type, e.g. overloaded_error
	message string
	header  http.Header // of the HTTP response; nil when there was none
}

// asErrorReply extracts the server's answer from an error of either SDK.
func asErrorReply(err error) (errorReply, bool) {
	var oe *openai.Error
	if errors.As(err, &oe) {
		a := errorReply{status: oe.StatusCode, code: oe.Code, message: oe.Message}
		if oe.Response != nil {
			a.header = oe.Response.Header
		}
		return a, true
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return anthropicErrorReply(ae), true
	}
	return errorReply{}, false
}

// classify sorts an error of one SDK call. ok is false for errors that are
// not the provider's (an oversized reply, a cancelled context, a decoding
// problem): those are returned as they are.
func classify(err error) (f failure, ok bool) {
	if a, ok := asErrorReply(err); ok {
		return classifyStatus(a), true
	}
	if errors.Is(err, ErrReplyTooLarge) || errors.Is(err, context.Canceled) {
		return failure{}, false
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr), errors.As(err, &certErr):
		// Deterministic: the URL or the server is wrong, and a retry
		// would only delay saying so.
		return failure{kind: KindUnreachable}, true
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		// The per-request timeout of the SDK; the caller has checked that
		// its own context is still live.
		return failure{kind: KindTimeout, transient: true}, true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), isNetOp(err):
		return failure{kind: KindConnectionLost, transient: true}, true
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return failure{kind: KindUnreachable}, true
	}
	return failure{}, false
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

func isNetOp(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// classifyStatus sorts an HTTP error answer. The message tests cover how
// OpenAI, Anthropic, vLLM, Ollama and LM Studio word the same failure.
func classifyStatus(e errorReply) failure {
	code := strings.ToLower(e.code)
	msg := strings.ToLower(e.message)
	switch s := e.status; {
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return failure{kind: KindUnauthorized}
	case code == "context_length_exceeded", s == http.StatusRequestEntityTooLarge,
		s/100 == 4 && (strings.Contains(msg, "context length") || strings.Contains(msg, "context window") ||
			strings.Contains(msg, "prompt is too long")):
		return failure{kind: KindContextTooLong}
	case code == "model_not_found", (s == http.StatusNotFound || s == http.StatusBadRequest) && namesMissingModel(msg):
		return failure{kind: KindModelNotFound}
	case s == http.StatusNotFound:
		return failure{kind: KindEndpointNotFound}
	case s == http.StatusTooManyRequests && code == "insufficient_quota",
		code == "billing_error", s == http.StatusBadRequest && strings.Contains(msg, "credit balance"):
		return failure{kind: KindQuotaExceeded}
	case s == http.StatusTooManyRequests:
		return failure{kind: KindRateLimited, transient: true}
	case s == http.StatusRequestTimeout:
		return failure{kind: KindTimeout, transient: true}
	case s >= 500:
		return failure{kind: KindServerError, transient: true}
	}
	return failure{kind: KindBadRequest}
}

// namesMissingModel matches how OpenAI, vLLM, Ollama, LM Studio and
// Anthropic ("model: claude-x", with HTTP 404) say that a model does not
// exist.
func namesMissingModel(msg string) bool {
	return strings.HasPrefix(msg, "model: ") || strings.Contains(msg, "model") &&
		(strings.Contains(msg, "not found") || strings.Contains(msg, "does not exist") || strings.Contains(msg, "no such model"))
}

// providerError builds the error for a final failure of an SDK call.
func providerError(err error, f failure, provider, baseURL, model string, attempts int) *ProviderError {
	pe := &ProviderError{Kind: f.kind, URL: baseURL, Model: model, Attempts: attempts, Provider: provider}
	if a, ok := asErrorReply(err); ok {
		// The code is the server's text too: a body that is no error
		// object can make it anything, line breaks included.
		pe.Status, pe.Code = a.status, shortMsg(a.code)
		if pe.Kind != KindUnauthorized {
			pe.Msg = shortMsg(a.message)
		}
		return pe
	}
	pe.Msg = shortMsg(transportReason(err))
	return pe
}

// transportReason names a connection failure briefly; the full *url.Error
// text repeats the method and URL, which the message already has.
func transportReason(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return "host " + dnsErr.Name + " not found"
	case errors.As(err, &certErr):
		return "TLS certificate not trusted: " + certErr.Err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "request timed out"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err.Error()
	}
	return err.Error()
}
