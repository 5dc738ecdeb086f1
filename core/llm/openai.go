package llm

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const defaultOpenAIURL = "https://api.openai.com/v1"

// openaiBackend calls Chat Completions through the official SDK, with the
// SDK's retries off (the wrapper retries). With a custom base URL it serves
// any OpenAI-compatible server: vLLM, llama.cpp, OpenRouter, LM Studio.
type openaiBackend struct {
	client   openai.Client
	baseURL  string
	apiKey   string
	official bool // api.openai.com: needs a key, wants max_completion_tokens
}

func newOpenAI(o Options) (completer, error) {
	base := o.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = defaultOpenAIURL
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, &Error{Provider: "openai", Kind: ErrBadRequest,
			Msg: "base URL " + redactURL(base) + " is not an absolute http(s) URL"}
	}
	// A bare host (http://localhost:8000) means its /v1, which is where
	// every OpenAI-compatible server mounts the API.
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1"
		base = u.String()
	}
	official := u.Host == "api.openai.com"
	key := o.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	if key == "" && official {
		return nil, missingKeyError("openai")
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithMiddleware(captureHTTPError),
		option.WithHTTPClient(&http.Client{}),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	return &openaiBackend{client: openai.NewClient(opts...), baseURL: base, apiKey: key, official: official}, nil
}

func (b *openaiBackend) endpoint() string {
	return redactURL(strings.TrimSuffix(b.baseURL, "/") + "/chat/completions")
}

func (b *openaiBackend) key() string { return b.apiKey }

func (b *openaiBackend) complete(ctx context.Context, req Request) (Response, error) {
	if req.Model == "" {
		return Response{}, &Error{Kind: ErrBadRequest, Msg: "no model given (set --model or [providers.openai] model)"}
	}
	params := openai.ChatCompletionNewParams{Model: req.Model}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			params.Messages = append(params.Messages, openai.AssistantMessage(m.Content))
		} else {
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		}
	}
	if req.MaxTokens > 0 {
		// OpenAI's reasoning models reject max_tokens; many compatible
		// servers only know max_tokens.
		if b.official {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	cc, err := b.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return Response{}, err
	}
	if len(cc.Choices) == 0 {
		return Response{}, &Error{Kind: ErrProvider, Msg: "the server returned no choices"}
	}
	msg := cc.Choices[0].Message
	text := msg.Content
	if text == "" && msg.Refusal != "" {
		text = msg.Refusal
	}
	return Response{
		Text:  text,
		Model: cc.Model,
		Usage: Usage{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens},
	}, nil
}
