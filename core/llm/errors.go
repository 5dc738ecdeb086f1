package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors. Every error a provider returns is an [*Error] whose Kind is
// one of these, so callers test with errors.Is and print err.Error(), which
// already says what to do.
var (
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrMissingKey: no API key in Options nor in the environment.
	ErrMissingKey = errors.New("missing API key")
	// ErrAuth: the server rejected the key (HTTP 401 or 403).
	ErrAuth = errors.New("authentication failed")
	// ErrUnknownModel: the server does not know the model (HTTP 404).
	ErrUnknownModel = errors.New("unknown model")
	// ErrBadRequest: any other 4xx; not retried.
	ErrBadRequest = errors.New("bad request")
	// ErrConnection: the server could not be reached (refused, DNS, reset).
	ErrConnection = errors.New("connection failed")
	// ErrRateLimited: still HTTP 429 after every retry.
	ErrRateLimited = errors.New("rate limited")
	// ErrServer: still 5xx (or 408) after every retry.
	ErrServer = errors.New("server error")
	// ErrTimeout: an attempt exceeded Options.Timeout.
	ErrTimeout = errors.New("request timed out")
	// ErrProvider: the provider answered but reported a failure of its own
	// (claude-code's is_error, an unparsable body, a missing binary).
	ErrProvider = errors.New("provider error")
	// ErrTranscript: replay could not read its transcript or has no answer
	// left for a request.
	ErrTranscript = errors.New("replay transcript")
)

// Error is the error type of this package.
type Error struct {
	Provider   string
	Model      string
	Kind       error // one of the sentinel errors, or context.Canceled
	StatusCode int   // HTTP status when there was one
	Attempts   int   // attempts made (0 when no request was sent)
	Msg        string
	Err        error // underlying cause, if any
}

func (e *Error) Error() string {
	if e.Provider == "" {
		return e.Msg
	}
	return e.Provider + ": " + e.Msg
}

// Unwrap exposes both the sentinel kind and the cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	errs := []error{e.Kind}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// keyEnv names the environment variable each keyed provider reads.
var keyEnv = map[string]string{
	"anthropic": "ANTHROPIC_API_KEY",
	"openai":    "OPENAI_API_KEY",
}

func missingKeyError(provider string) error {
	env := keyEnv[provider]
	return &Error{Provider: provider, Kind: ErrMissingKey,
		Msg: fmt.Sprintf("%s is not set: export it or set [providers.%s] api_key in rlm.toml", env, provider)}
}

// statusError is what an HTTP backend returns for a non-2xx response; the
// wrapper decides from it whether to retry and how to explain.
type statusError struct {
	code   int
	header http.Header
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.code, excerpt(e.body))
}

// retryable reports whether another attempt may succeed.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusRequestTimeout || se.code == http.StatusTooManyRequests || se.code >= 500
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Nothing is listening: fail fast with a clear message rather than
		// waiting through the backoff schedule.
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

// classify turns whatever a backend returned into an *Error with a message a
// user can act on.
func classify(provider, endpoint string, req Request, attempts int, timeout time.Duration, err error) *Error {
	e := &Error{Provider: provider, Model: req.Model, Attempts: attempts, Err: err}
	var own *Error
	if errors.As(err, &own) {
		c := *own
		c.Provider, c.Attempts = provider, attempts
		if c.Model == "" {
			c.Model = req.Model
		}
		return &c
	}
	after := ""
	if attempts > 1 {
		after = fmt.Sprintf(" after %d attempts", attempts)
	}
	var se *statusError
	switch {
	case errors.As(err, &se):
		e.StatusCode = se.code
		body := errorDetail(se.body)
		switch {
		case se.code == http.StatusUnauthorized || se.code == http.StatusForbidden:
			e.Kind = ErrAuth
			hint := "check the API key"
			if env, ok := keyEnv[provider]; ok {
				hint = fmt.Sprintf("check %s or [providers.%s] api_key in rlm.toml", env, provider)
			}
			e.Msg = fmt.Sprintf("HTTP %d from %s: the API key was rejected; %s: %s", se.code, endpoint, hint, body)
		case se.code == http.StatusNotFound:
			e.Kind = ErrUnknownModel
			e.Msg = fmt.Sprintf("model %q not found (HTTP 404 from %s); check the model name (and the base URL): %s", req.Model, endpoint, body)
		case se.code == http.StatusTooManyRequests:
			e.Kind = ErrRateLimited
			e.Msg = fmt.Sprintf("rate limited (HTTP 429)%s: %s", after, body)
		case se.code >= 500 || se.code == http.StatusRequestTimeout:
			e.Kind = ErrServer
			e.Msg = fmt.Sprintf("server error HTTP %d%s from %s: %s", se.code, after, endpoint, body)
		default:
			e.Kind = ErrBadRequest
			e.Msg = fmt.Sprintf("HTTP %d from %s: %s", se.code, endpoint, body)
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Kind = ErrConnection
		e.Msg = fmt.Sprintf("cannot connect to %s: connection refused; check that the server is running and the base URL is right", endpoint)
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind = ErrTimeout
		e.Msg = fmt.Sprintf("no answer from %s within %s (raise the provider timeout if the model is slow)", endpoint, timeout)
	case errors.Is(err, context.Canceled):
		e.Kind = context.Canceled
		e.Msg = "request cancelled"
	default:
		var dnsErr *net.DNSError
		var opErr *net.OpError
		var urlErr *url.Error
		switch {
		case errors.As(err, &dnsErr):
			e.Kind = ErrConnection
			e.Msg = fmt.Sprintf("cannot resolve the host of %s: %v", endpoint, dnsErr)
		case errors.As(err, &opErr), errors.As(err, &urlErr), retryable(err):
			e.Kind = ErrConnection
			e.Msg = fmt.Sprintf("connection to %s failed%s: %v", endpoint, after, rootCause(err))
		default:
			e.Kind = ErrProvider
			e.Msg = err.Error()
		}
	}
	return e
}

// rootCause drops the layers (url.Error repeats the URL, possibly with a
// query string) and keeps the innermost message.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// errorDetail pulls the human message out of the usual error bodies
// ({"error":{"message":...}} for Anthropic and OpenAI, {"error":"..."} for
// Ollama, {"message":...} for some compatible servers) and falls back to an
// excerpt of the raw body.
func errorDetail(body string) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal([]byte(body), &v) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return excerpt(obj.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return excerpt(s)
		case v.Message != "":
			return excerpt(v.Message)
		}
	}
	return excerpt(body)
}

// excerpt shortens a response body for an error message.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// redactURL removes credentials and the query string from a URL for
// messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}

// scrub replaces any occurrence of secret in err's message. It is the last
// line of defence: messages are built not to contain keys in the first place.
func scrub(err *Error, secret string) *Error {
	if secret == "" || len(secret) < 4 {
		return err
	}
	if strings.Contains(err.Msg, secret) {
		err.Msg = strings.ReplaceAll(err.Msg, secret, "[REDACTED]")
	}
	if err.Err != nil && strings.Contains(err.Err.Error(), secret) {
		err.Err = errors.New(strings.ReplaceAll(err.Err.Error(), secret, "[REDACTED]"))
	}
	return err
}

// captureHTTPError is an SDK middleware (both official SDKs use the same
// signature) that turns any non-2xx response into a *statusError carrying
// the status, headers and body. Doing it below the SDK keeps one error path
// for all HTTP providers and does not depend on the body being in the shape
// the SDK expects (OpenAI-compatible servers differ).
func captureHTTPError(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return nil, &statusError{code: res.StatusCode, header: res.Header, body: string(body)}
}
