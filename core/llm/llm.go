// Package llm talks to language models for the RLM engine.
//
// One small interface, [Provider], hides five backends that the CLI picks by
// name through [New]:
//
//   - "anthropic": the Messages API through the official anthropic-sdk-go.
//   - "openai": the Chat Completions API through the official openai-go; the
//     base URL is configurable, so vLLM, llama.cpp's server, OpenRouter and
//     LM Studio work too.
//   - "ollama": Ollama's local /api/chat (non-streaming).
//   - "claude-code": the `claude` CLI in print mode with JSON output.
//   - "replay": answers from a recorded transcript, for deterministic demos
//     and tests (see [CallEvent] for the format).
//
// Every provider is wrapped by the same machinery (one place, one behaviour,
// one set of tests): a per-provider concurrency limit, a per-attempt timeout,
// and retries with exponential backoff and jitter on 408, 429 and 5xx that
// honour Retry-After. The SDKs' own retries are switched off so that this is
// the only retry loop. Failures come back as [*Error] values that
// errors.Is-match one of the sentinel errors ([ErrMissingKey],
// [ErrUnknownModel], [ErrConnection], ...), and never contain an API key.
//
// The engine only needs [Request], [Response] and [Provider]; everything else
// is configuration.
package llm

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/defaults"
)

// Message is one turn of a conversation. Role is "user" or "assistant"; the
// system prompt travels separately in [Request.System] because the providers
// disagree on where it goes.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one completion request. It is deliberately plain text only: the
// RLM loop exchanges code and its output as text, nothing more.
type Request struct {
	// Model is the provider's model name. It may be empty for claude-code
	// (the CLI's default model) and replay.
	Model    string    `json:"model"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	// MaxTokens caps the reply; 0 means the provider default
	// ([DefaultMaxTokens] where the API requires a value).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is a pointer so that "not set" (the model's default) differs
	// from 0 (greedy).
	Temperature *float64 `json:"temperature,omitempty"`
}

// Usage counts tokens as the provider reported them.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Response is a completed request.
type Response struct {
	Text  string `json:"text"`
	Usage Usage  `json:"usage"`
	// Model is the model that answered, as the provider named it (often a
	// dated snapshot of the requested alias).
	Model string `json:"model,omitempty"`
	// Latency is the duration of the attempt that succeeded, excluding time
	// spent waiting for a concurrency slot or between retries.
	Latency time.Duration `json:"latency_ns,omitempty"`
	// Attempts is how many attempts the call took (1 without retries).
	Attempts int `json:"attempts,omitempty"`
	// CostUSD is the cost of the call as [CallCost] decides it: what the
	// provider reported when it reports one (claude-code), otherwise the
	// price of Model, or of the requested model when Model has none, and 0
	// when neither price is known.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Provider answers completion requests. Implementations are safe for
// concurrent use; the concurrency limit is applied inside Complete.
type Provider interface {
	// Name is the registry name ("anthropic", "openai", ...).
	Name() string
	// Complete sends one request and waits for the whole answer.
	Complete(ctx context.Context, req Request) (Response, error)
}

// Defaults used when the matching [Options] field is zero.
const (
	DefaultTimeout       = defaults.LLMTimeout
	DefaultMaxRetries    = defaults.LLMMaxRetries
	DefaultMaxConcurrent = 4
	DefaultMinBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff    = 60 * time.Second
	DefaultMaxTokens     = 8192
	DefaultOllamaURL     = "http://127.0.0.1:11434"
)

// Options configure a provider. The zero value is usable: every zero field
// takes its default.
type Options struct {
	// BaseURL overrides the provider's endpoint (openai: include the /v1;
	// one is added when the URL has no path at all).
	BaseURL string
	// APIKey overrides the key from the environment (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY). It is sent only to BaseURL and never logged.
	APIKey string
	// Timeout bounds each attempt (not the whole call, which the caller's
	// context bounds). A timed-out attempt is not retried: a model that did
	// not answer in Timeout is unlikely to on the next try, and retrying
	// would multiply the wait. Default [DefaultTimeout].
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt for 408,
	// 429, 5xx and dropped connections. 0 means [DefaultMaxRetries]; a
	// negative value disables retries.
	MaxRetries int
	// MaxConcurrent caps the calls in flight through this provider value.
	// A call keeps its slot while it waits to retry, so a rate-limited
	// provider slows everyone down instead of being hammered. Default
	// [DefaultMaxConcurrent]; negative means unlimited.
	MaxConcurrent int
	// MinBackoff and MaxBackoff shape the exponential backoff
	// (MinBackoff·2^n with jitter, capped at MaxBackoff). MaxBackoff also caps
	// a server's Retry-After.
	MinBackoff, MaxBackoff time.Duration
	// Transcript is the file the replay provider answers from.
	Transcript string
	// Command is the claude-code executable (default "claude" from PATH).
	Command string
	// Logger receives one line per retry (never a key or a prompt).
	// Nil discards.
	Logger *slog.Logger

	// Test hooks: sleep between retries and the clock used for HTTP-date
	// Retry-After values.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
}

type factory func(opts Options) (completer, error)

var registry = map[string]factory{
	"anthropic":   newAnthropic,
	"openai":      newOpenAI,
	"ollama":      newOllama,
	"claude-code": newClaudeCode,
	"replay":      newReplay,
}

// Providers lists the names [New] accepts, sorted.
func Providers() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns the named provider, configured by opts and wrapped with
// retries, timeouts and the concurrency limit. Configuration errors (an
// unknown name, a missing key, an unreadable transcript) are reported here
// rather than on the first call.
func New(name string, opts Options) (Provider, error) {
	f, ok := registry[name]
	if !ok {
		return nil, &Error{Provider: name, Kind: ErrUnknownProvider,
			Msg: fmt.Sprintf("unknown provider %q (known: %s)", name, strings.Join(Providers(), ", "))}
	}
	c, err := f(opts)
	if err != nil {
		return nil, err
	}
	return wrap(name, c, opts), nil
}

// completer is what a backend implements; the wrapper in retry.go turns it
// into a Provider.
type completer interface {
	complete(ctx context.Context, req Request) (Response, error)
	// endpoint names where requests go, for error messages (no secrets).
	endpoint() string
}
