package llm

import (
	"context"
	"net/http"
	"os"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

const defaultAnthropicURL = "https://api.anthropic.com"

// anthropicBackend calls the Messages API through the official SDK. The SDK
// is built without its environment defaults (so only our key resolution
// applies) and with retries off (the wrapper retries).
type anthropicBackend struct {
	client  anthropic.Client
	baseURL string
	apiKey  string
}

func newAnthropic(o Options) (completer, error) {
	key := o.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	if key == "" {
		return nil, missingKeyError("anthropic")
	}
	base := o.BaseURL
	if base == "" {
		base = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = defaultAnthropicURL
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	client := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithMiddleware(captureHTTPError),
		option.WithHTTPClient(&http.Client{}),
		// The wrapper's context bounds each attempt; setting the SDK's own
		// timeout a little longer only stops it from refusing large
		// max_tokens values in non-streaming mode.
		option.WithRequestTimeout(timeout+timeout/10),
	)
	return &anthropicBackend{client: client, baseURL: base, apiKey: key}, nil
}

func (b *anthropicBackend) endpoint() string {
	return redactURL(strings.TrimSuffix(b.baseURL, "/") + "/v1/messages")
}

func (b *anthropicBackend) key() string { return b.apiKey }

func (b *anthropicBackend) complete(ctx context.Context, req Request) (Response, error) {
	if req.Model == "" {
		return Response{}, &Error{Kind: ErrBadRequest, Msg: "no model given (set --model or [providers.anthropic] model)"}
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(maxTokens),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	for _, m := range req.Messages {
		block := anthropic.NewTextBlock(m.Content)
		if m.Role == "assistant" {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(block))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
		}
	}
	msg, err := b.client.Messages.New(ctx, params)
	if err != nil {
		return Response{}, err
	}
	var text strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return Response{
		Text:  text.String(),
		Model: msg.Model,
		Usage: Usage{
			InputTokens:  msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens,
			OutputTokens: msg.Usage.OutputTokens,
		},
	}, nil
}
