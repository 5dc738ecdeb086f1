package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// ollamaBackend speaks Ollama's native /api/chat without streaming. There is
// no official Go SDK outside Ollama's own module (which pulls in the whole
// server), and the API is four fields, so plain net/http it is.
type ollamaBackend struct {
	base   string
	apiKey string
	client *http.Client
}

func newOllama(o Options) (completer, error) {
	base := o.BaseURL
	if base == "" {
		base = ollamaHostEnv(os.Getenv("OLLAMA_HOST"))
	}
	if base == "" {
		base = DefaultOllamaURL
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, &Error{Provider: "ollama", Kind: ErrBadRequest,
			Msg: "base URL " + redactURL(base) + " is not an absolute http(s) URL"}
	}
	return &ollamaBackend{base: strings.TrimSuffix(base, "/"), apiKey: o.APIKey, client: &http.Client{}}, nil
}

// ollamaHostEnv accepts OLLAMA_HOST the way the ollama CLI does: host,
// host:port or a URL.
func ollamaHostEnv(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return ""
	}
	if u.Port() == "" {
		u.Host += ":11434"
	}
	if u.Hostname() == "0.0.0.0" {
		u.Host = "127.0.0.1:" + u.Port()
	}
	return u.String()
}

func (b *ollamaBackend) endpoint() string { return redactURL(b.base + "/api/chat") }
func (b *ollamaBackend) key() string      { return b.apiKey }

type ollamaRequest struct {
	Model    string         `json:"model"`
	Messages []Message      `json:"messages"`
	Stream   bool           `json:"stream"`
	Options  map[string]any `json:"options,omitempty"`
}

type ollamaResponse struct {
	Model   string `json:"model"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int64  `json:"prompt_eval_count"`
	EvalCount       int64  `json:"eval_count"`
	Error           string `json:"error"`
}

func (b *ollamaBackend) complete(ctx context.Context, req Request) (Response, error) {
	if req.Model == "" {
		return Response{}, &Error{Kind: ErrBadRequest, Msg: "no model given (set --model or [providers.ollama] model)"}
	}
	body := ollamaRequest{Model: req.Model, Stream: false}
	if req.System != "" {
		body.Messages = append(body.Messages, Message{Role: "system", Content: req.System})
	}
	body.Messages = append(body.Messages, req.Messages...)
	if req.Temperature != nil || req.MaxTokens > 0 {
		body.Options = map[string]any{}
		if req.Temperature != nil {
			body.Options["temperature"] = *req.Temperature
		}
		if req.MaxTokens > 0 {
			body.Options["num_predict"] = req.MaxTokens
		}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return Response{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/api/chat", bytes.NewReader(data))
	if err != nil {
		return Response{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if b.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.apiKey)
	}
	res, err := captureHTTPError(hreq, b.client.Do)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return Response{}, err
	}
	var out ollamaResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return Response{}, &Error{Kind: ErrProvider, Msg: fmt.Sprintf("unparsable answer from %s: %v: %s", b.endpoint(), err, excerpt(string(raw)))}
	}
	if out.Error != "" {
		return Response{}, &Error{Kind: ErrProvider, Msg: out.Error}
	}
	return Response{
		Text:  out.Message.Content,
		Model: out.Model,
		Usage: Usage{InputTokens: out.PromptEvalCount, OutputTokens: out.EvalCount},
	}, nil
}
