// Package llmtest provides fake model servers on 127.0.0.1 that speak the real
// wire formats of the Anthropic Messages API, OpenAI Chat Completions and
// Ollama's /api/chat, so tests and benchmarks exercise the real client code
// (official SDKs included) without a network or a key.
//
// A server answers with whatever the test's handler returns for each request
// and reports usage as whitespace-separated word counts, which is
// deterministic and close enough to tokens for budget tests. Options add
// latency, require an API key, or intercept requests to return errors.
//
// The package does not import core/llm, so core/llm's own tests can use it.
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Message is one turn as the fake server decoded it.
type Message struct {
	Role    string
	Content string
}

// ChatRequest is a decoded request, the same shape for every wire format.
type ChatRequest struct {
	Model       string
	System      string // Anthropic's system field, or OpenAI/Ollama system messages joined
	Messages    []Message
	MaxTokens   int
	Temperature *float64
	Stream      bool
	// Path and Header are as received, for assertions on what a client sends.
	Path   string
	Header http.Header
	// Body is the raw JSON body.
	Body []byte
}

// LastUser returns the content of the last user message ("" if none).
func (r ChatRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Turn is the number of assistant messages already in the conversation:
// which step of its script a scripted model is at.
func (r ChatRequest) Turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// Hook may answer a request itself (returning true), typically with an
// error status; n is the request's 1-based sequence number.
type Hook func(w http.ResponseWriter, r *http.Request, n int) bool

// Option configures a Server.
type Option func(*Server)

// WithLatency delays every answer by d (cut short if the client goes away).
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency = d } }

// WithHook installs h, called before the request is decoded.
func WithHook(h Hook) Option { return func(s *Server) { s.hook = h } }

// WithAPIKey makes the server reject requests that do not carry key the way
// the real API expects (x-api-key for Anthropic, Authorization: Bearer for
// OpenAI and Ollama), with the real 401 body.
func WithAPIKey(key string) Option { return func(s *Server) { s.key = key } }

// WithModel makes every reply name model as the model that answered, as
// an OpenAI-compatible server (vLLM, LiteLLM, a proxy) may do whatever the
// request asked for; by default a reply names the requested model.
func WithModel(model string) Option { return func(s *Server) { s.model = model } }

// WithUsage makes every reply report in input and out output tokens
// instead of the words counted (to reach a cost budget in a few calls).
func WithUsage(in, out int64) Option {
	return func(s *Server) { s.usage = &[2]int64{in, out} }
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	kind    string
	latency time.Duration
	hook    Hook
	key     string
	model   string    // the model replies name ("": the requested one)
	usage   *[2]int64 // the input and output tokens replies report (nil: words)
	handler func(ChatRequest) string

	seq      atomic.Int64
	mu       sync.Mutex
	reqs     []ChatRequest
	inFlight int
	maxIn    int
}

// NewAnthropicServer serves POST /v1/messages like api.anthropic.com
// (non-streaming). Use s.URL as the provider's base URL.
func NewAnthropicServer(t testing.TB, handler func(ChatRequest) string, opts ...Option) *Server {
	return start(t, "anthropic", handler, opts)
}

// NewOpenAIServer serves POST /v1/chat/completions like api.openai.com
// (non-streaming). Use s.BaseURL() (which ends in /v1) as the base URL.
func NewOpenAIServer(t testing.TB, handler func(ChatRequest) string, opts ...Option) *Server {
	return start(t, "openai", handler, opts)
}

// NewOllamaServer serves POST /api/chat like a local Ollama with
// "stream": false. Use s.URL as the base URL.
func NewOllamaServer(t testing.TB, handler func(ChatRequest) string, opts ...Option) *Server {
	return start(t, "ollama", handler, opts)
}

func start(t testing.TB, kind string, handler func(ChatRequest) string, opts []Option) *Server {
	t.Helper()
	s := &Server{kind: kind, handler: handler}
	for _, o := range opts {
		o(s)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the value to configure as the provider's base URL.
func (s *Server) BaseURL() string {
	if s.kind == "openai" {
		return s.URL + "/v1"
	}
	return s.URL
}

// Requests returns the decoded requests received so far, in arrival order
// (including ones a hook answered, with only Path, Header and Body set).
func (s *Server) Requests() []ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatRequest(nil), s.reqs...)
}

// Count is the number of requests received.
func (s *Server) Count() int { return int(s.seq.Load()) }

// MaxInFlight is the largest number of requests that were being served at
// the same time.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	n := int(s.seq.Add(1))
	s.mu.Lock()
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	body, _ := io.ReadAll(r.Body)
	raw := ChatRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-r.Context().Done():
			s.record(raw)
			return
		}
	}
	if s.hook != nil && s.hook(w, r, n) {
		s.record(raw)
		return
	}
	switch s.kind {
	case "anthropic":
		s.anthropic(w, r, raw)
	case "openai":
		s.openai(w, r, raw)
	case "ollama":
		s.ollama(w, r, raw)
	}
}

func (s *Server) record(req ChatRequest) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

// replyModel is the model a reply to req names.
func (s *Server) replyModel(req ChatRequest) string {
	if s.model != "" {
		return s.model
	}
	return req.Model
}

// tokens are the input and output tokens a reply of text to req reports.
func (s *Server) tokens(req ChatRequest, text string) (in, out int64) {
	if s.usage != nil {
		return s.usage[0], s.usage[1]
	}
	return inputWords(req), Words(text)
}

// Words counts whitespace-separated words: the fake servers' token count.
func Words(s string) int64 { return int64(len(strings.Fields(s))) }

func inputWords(req ChatRequest) int64 {
	n := Words(req.System)
	for _, m := range req.Messages {
		n += Words(m.Content)
	}
	return n
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request, req ChatRequest) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.record(req)
		AnthropicError(w, http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	if s.key != "" && r.Header.Get("X-Api-Key") != s.key {
		s.record(req)
		AnthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		s.record(req)
		AnthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var in struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    any    `json:"system"`
		Messages  []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Temperature *float64 `json:"temperature"`
		Stream      bool     `json:"stream"`
	}
	if err := json.Unmarshal(req.Body, &in); err != nil {
		s.record(req)
		AnthropicError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON: "+err.Error())
		return
	}
	req.Model, req.MaxTokens, req.Temperature, req.Stream = in.Model, in.MaxTokens, in.Temperature, in.Stream
	req.System = anthropicText(in.System)
	for _, m := range in.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: anthropicText(m.Content)})
	}
	s.record(req)
	if in.MaxTokens <= 0 {
		AnthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	}
	text := s.handler(req)
	in1, out := s.tokens(req, text)
	writeJSON(w, http.StatusOK, map[string]any{
		"id":            fmt.Sprintf("msg_%024d", s.seq.Load()),
		"type":          "message",
		"role":          "assistant",
		"model":         s.replyModel(req),
		"content":       []any{map[string]any{"type": "text", "text": text}},
		"stop_reason":   "end_turn",
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                in1,
			"output_tokens":               out,
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     0,
			"service_tier":                "standard",
		},
	})
}

// anthropicText flattens a string or a list of content blocks to text.
func anthropicText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, b := range x {
			if m, ok := b.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request, req ChatRequest) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.record(req)
		OpenAIError(w, http.StatusNotFound, "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		s.record(req)
		OpenAIError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		MaxTokens           int      `json:"max_tokens"`
		MaxCompletionTokens int      `json:"max_completion_tokens"`
		Temperature         *float64 `json:"temperature"`
		Stream              bool     `json:"stream"`
	}
	if err := json.Unmarshal(req.Body, &in); err != nil {
		s.record(req)
		OpenAIError(w, http.StatusBadRequest, "invalid_json", err.Error())
		return
	}
	req.Model, req.Temperature, req.Stream = in.Model, in.Temperature, in.Stream
	req.MaxTokens = max(in.MaxTokens, in.MaxCompletionTokens)
	var sys []string
	for _, m := range in.Messages {
		text := anthropicText(m.Content) // same string-or-parts shape
		if m.Role == "system" || m.Role == "developer" {
			sys = append(sys, text)
			continue
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: text})
	}
	req.System = strings.Join(sys, "\n")
	s.record(req)
	text := s.handler(req)
	in1, out := s.tokens(req, text)
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", s.seq.Load()),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   s.replyModel(req),
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": text, "refusal": nil, "annotations": []any{}},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]any{
			"prompt_tokens":             in1,
			"completion_tokens":         out,
			"total_tokens":              in1 + out,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
		},
		"service_tier":       "default",
		"system_fingerprint": "fp_llmtest",
	})
}

func (s *Server) ollama(w http.ResponseWriter, r *http.Request, req ChatRequest) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
		s.record(req)
		http.NotFound(w, r)
		return
	}
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		s.record(req)
		OllamaError(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	var in struct {
		Model    string    `json:"model"`
		Messages []Message `json:"messages"`
		Stream   *bool     `json:"stream"`
		Options  struct {
			Temperature *float64 `json:"temperature"`
			NumPredict  int      `json:"num_predict"`
		} `json:"options"`
	}
	if err := json.Unmarshal(req.Body, &in); err != nil {
		s.record(req)
		OllamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Ollama streams unless told not to.
	req.Model, req.Stream = in.Model, in.Stream == nil || *in.Stream
	req.Temperature, req.MaxTokens = in.Options.Temperature, in.Options.NumPredict
	var sys []string
	for _, m := range in.Messages {
		if m.Role == "system" {
			sys = append(sys, m.Content)
			continue
		}
		req.Messages = append(req.Messages, m)
	}
	req.System = strings.Join(sys, "\n")
	s.record(req)
	if req.Stream {
		OllamaError(w, http.StatusBadRequest, "llmtest: streaming is not supported; send \"stream\": false")
		return
	}
	text := s.handler(req)
	in1, out := s.tokens(req, text)
	writeJSON(w, http.StatusOK, map[string]any{
		"model":                s.replyModel(req),
		"created_at":           time.Now().UTC().Format(time.RFC3339Nano),
		"message":              map[string]any{"role": "assistant", "content": text},
		"done":                 true,
		"done_reason":          "stop",
		"total_duration":       5191566416,
		"load_duration":        2154458,
		"prompt_eval_count":    in1,
		"prompt_eval_duration": 383809000,
		"eval_count":           out,
		"eval_duration":        4799921000,
	})
}

// AnthropicError writes an error in the Anthropic API's format, e.g.
// AnthropicError(w, 404, "not_found_error", "model: claude-x").
func AnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_llmtest",
	})
}

// OpenAIError writes an error in the OpenAI API's format, e.g.
// OpenAIError(w, 404, "model_not_found", "The model `x` does not exist").
func OpenAIError(w http.ResponseWriter, status int, code, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// OllamaError writes an error the way Ollama does: {"error": msg}.
func OllamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Sleep waits d or until ctx ends; handy in hooks that simulate a slow
// server.
func Sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
