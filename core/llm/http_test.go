package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/llm/llmtest"
)

const testKey = "sk-test-SECRET-0123456789"

// fakeSleep records the waits the wrapper asks for and returns at once.
type fakeSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fakeSleep) got() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

func echo(r llmtest.ChatRequest) string { return "echo: " + r.LastUser() }

// httpProviders builds, for each HTTP provider, a fake server and a provider
// pointed at it, so that behaviour shared through the wrapper is tested
// against every wire format.
type httpCase struct {
	name   string
	server func(t *testing.T, h func(llmtest.ChatRequest) string, o ...llmtest.Option) *llmtest.Server
	model  string
	// errBody writes the provider's error format.
	errBody func(w http.ResponseWriter, status int, msg string)
}

var httpCases = []httpCase{
	{"anthropic", func(t *testing.T, h func(llmtest.ChatRequest) string, o ...llmtest.Option) *llmtest.Server {
		return llmtest.NewAnthropicServer(t, h, o...)
	}, "claude-sonnet-4-5", func(w http.ResponseWriter, status int, msg string) {
		typ := map[int]string{404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
		llmtest.AnthropicError(w, status, typ, msg)
	}},
	{"openai", func(t *testing.T, h func(llmtest.ChatRequest) string, o ...llmtest.Option) *llmtest.Server {
		return llmtest.NewOpenAIServer(t, h, o...)
	}, "gpt-4o-mini", func(w http.ResponseWriter, status int, msg string) {
		llmtest.OpenAIError(w, status, "code", msg)
	}},
	{"ollama", func(t *testing.T, h func(llmtest.ChatRequest) string, o ...llmtest.Option) *llmtest.Server {
		return llmtest.NewOllamaServer(t, h, o...)
	}, "llama3.2", func(w http.ResponseWriter, status int, msg string) {
		llmtest.OllamaError(w, status, msg)
	}},
}

func newFor(t *testing.T, name string, s *llmtest.Server, o Options) Provider {
	t.Helper()
	o.BaseURL = s.BaseURL()
	if name != "ollama" && o.APIKey == "" {
		o.APIKey = testKey
	}
	p, err := New(name, o)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	return p
}

func userReq(model, text string) Request {
	return Request{Model: model, Messages: []Message{{Role: "user", Content: text}}}
}

func TestAnthropicWireFormat(t *testing.T) {
	s := llmtest.NewAnthropicServer(t, echo, llmtest.WithAPIKey(testKey))
	p := newFor(t, "anthropic", s, Options{})
	temp := 0.25
	resp, err := p.Complete(context.Background(), Request{
		Model:  "claude-sonnet-4-5",
		System: "be brief",
		Messages: []Message{
			{Role: "user", Content: "hello there"},
			{Role: "assistant", Content: "hi"},
			{Role: "user", Content: "say something"},
		},
		MaxTokens:   100,
		Temperature: &temp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: say something" {
		t.Errorf("text = %q", resp.Text)
	}
	// input: "be brief"(2) + "hello there"(2) + "hi"(1) + "say something"(2)
	if resp.Usage != (Usage{InputTokens: 7, OutputTokens: 3}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Model != "claude-sonnet-4-5" || resp.Attempts != 1 || resp.Latency <= 0 {
		t.Errorf("resp = %+v", resp)
	}
	if want := (7*3.0 + 3*15.0) / 1e6; resp.CostUSD != want {
		t.Errorf("cost = %v, want %v", resp.CostUSD, want)
	}
	got := s.Requests()[0]
	if got.Path != "/v1/messages" {
		t.Errorf("path = %s", got.Path)
	}
	if got.Header.Get("X-Api-Key") != testKey {
		t.Errorf("x-api-key = %q", got.Header.Get("X-Api-Key"))
	}
	if got.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("anthropic-version = %q", got.Header.Get("Anthropic-Version"))
	}
	if got.System != "be brief" || got.MaxTokens != 100 || got.Temperature == nil || *got.Temperature != 0.25 || got.Stream {
		t.Errorf("decoded request = %+v", got)
	}
	if len(got.Messages) != 3 || got.Messages[1].Role != "assistant" {
		t.Errorf("messages = %+v", got.Messages)
	}
}

func TestAnthropicDefaultMaxTokens(t *testing.T) {
	s := llmtest.NewAnthropicServer(t, echo)
	p := newFor(t, "anthropic", s, Options{})
	if _, err := p.Complete(context.Background(), userReq("claude-haiku-4-5", "x")); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()[0].MaxTokens; got != DefaultMaxTokens {
		t.Errorf("max_tokens = %d, want %d", got, DefaultMaxTokens)
	}
}

func TestOpenAIWireFormat(t *testing.T) {
	s := llmtest.NewOpenAIServer(t, echo, llmtest.WithAPIKey(testKey))
	p := newFor(t, "openai", s, Options{})
	resp, err := p.Complete(context.Background(), Request{
		Model: "gpt-4o-mini", System: "sys prompt",
		Messages:  []Message{{Role: "user", Content: "one two three"}},
		MaxTokens: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: one two three" || resp.Usage != (Usage{InputTokens: 5, OutputTokens: 4}) {
		t.Errorf("resp = %+v", resp)
	}
	got := s.Requests()[0]
	if got.Path != "/v1/chat/completions" {
		t.Errorf("path = %s", got.Path)
	}
	if got.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("authorization = %q", got.Header.Get("Authorization"))
	}
	if got.System != "sys prompt" || got.MaxTokens != 50 || got.Temperature != nil {
		t.Errorf("decoded = %+v", got)
	}
	// A compatible server gets max_tokens (api.openai.com would get
	// max_completion_tokens).
	if !bytes.Contains(got.Body, []byte(`"max_tokens":50`)) {
		t.Errorf("body = %s", got.Body)
	}
}

func TestOpenAICompatibleServers(t *testing.T) {
	// vLLM, llama.cpp, LM Studio: no key needed, and a bare host means /v1.
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	s := llmtest.NewOpenAIServer(t, echo)
	p, err := New("openai", Options{BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), userReq("qwen", "hi")); err != nil {
		t.Fatal(err)
	}
	got := s.Requests()[0]
	if got.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "" {
		t.Errorf("path %s auth %q", got.Path, got.Header.Get("Authorization"))
	}
}

func TestOllamaWireFormat(t *testing.T) {
	s := llmtest.NewOllamaServer(t, echo)
	p := newFor(t, "ollama", s, Options{})
	temp := 0.0
	resp, err := p.Complete(context.Background(), Request{
		Model: "llama3.2", System: "sys",
		Messages:  []Message{{Role: "user", Content: "why is the sky blue"}},
		MaxTokens: 64, Temperature: &temp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: why is the sky blue" || resp.Usage != (Usage{InputTokens: 6, OutputTokens: 6}) || resp.Model != "llama3.2" {
		t.Errorf("resp = %+v", resp)
	}
	got := s.Requests()[0]
	if got.Stream || got.MaxTokens != 64 || got.Temperature == nil || *got.Temperature != 0 || got.System != "sys" {
		t.Errorf("decoded = %+v body %s", got, got.Body)
	}
	if !bytes.Contains(got.Body, []byte(`"stream":false`)) {
		t.Errorf("body = %s", got.Body)
	}
}

func TestOllamaHostEnv(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"0.0.0.0":              "http://127.0.0.1:11434",
		"127.0.0.1:8080":       "http://127.0.0.1:8080",
		"https://ollama.local": "https://ollama.local:11434",
	} {
		if got := ollamaHostEnv(in); got != want {
			t.Errorf("ollamaHostEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// statusHook answers the first `times` requests (all when times < 0) with
// status and header.
func statusHook(c httpCase, times int, status int, header map[string]string) llmtest.Hook {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		if times >= 0 && n > times {
			return false
		}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		c.errBody(w, status, fmt.Sprintf("simulated %d number %d", status, n))
		return true
	}
}

func TestRetryAfterSecondsHonoured(t *testing.T) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.server(t, echo, llmtest.WithHook(statusHook(c, 2, 429, map[string]string{"Retry-After": "2"})))
			fs := &fakeSleep{}
			p := newFor(t, c.name, s, Options{sleep: fs.sleep})
			resp, err := p.Complete(context.Background(), userReq(c.model, "hi"))
			if err != nil {
				t.Fatal(err)
			}
			if s.Count() != 3 || resp.Attempts != 3 {
				t.Errorf("requests %d attempts %d, want 3", s.Count(), resp.Attempts)
			}
			if w := fs.got(); len(w) != 2 || w[0] != 2*time.Second || w[1] != 2*time.Second {
				t.Errorf("waits = %v, want [2s 2s]", w)
			}
		})
	}
}

func TestRetryAfterHTTPDateAndCap(t *testing.T) {
	c := httpCases[0]
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	date := now.Add(7 * time.Second).Format(http.TimeFormat)
	s := c.server(t, echo, llmtest.WithHook(func(w http.ResponseWriter, r *http.Request, n int) bool {
		switch n {
		case 1:
			w.Header().Set("Retry-After", date)
		case 2:
			w.Header().Set("Retry-After", "3600") // capped at MaxBackoff
		case 3:
			w.Header().Set("Retry-After-Ms", "250")
		default:
			return false
		}
		c.errBody(w, 529, "overloaded")
		return true
	}))
	fs := &fakeSleep{}
	p := newFor(t, c.name, s, Options{sleep: fs.sleep, now: func() time.Time { return now }, MaxBackoff: 20 * time.Second})
	if _, err := p.Complete(context.Background(), userReq(c.model, "hi")); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{7 * time.Second, 20 * time.Second, 250 * time.Millisecond}
	if got := fs.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

func TestServerErrorForever(t *testing.T) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.server(t, echo, llmtest.WithHook(statusHook(c, -1, 500, nil)))
			fs := &fakeSleep{}
			p := newFor(t, c.name, s, Options{sleep: fs.sleep, MaxRetries: 3, MinBackoff: time.Second, MaxBackoff: 3 * time.Second})
			_, err := p.Complete(context.Background(), userReq(c.model, "hi"))
			if !errors.Is(err, ErrServer) {
				t.Fatalf("err = %v, want ErrServer", err)
			}
			t.Log(err)
			if s.Count() != 4 {
				t.Errorf("requests = %d, want 4", s.Count())
			}
			var e *Error
			if !errors.As(err, &e) || e.StatusCode != 500 || e.Attempts != 4 {
				t.Errorf("error = %#v", e)
			}
			msg := err.Error()
			for _, want := range []string{"HTTP 500", "after 4 attempts", "simulated 500 number 4"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			// Exponential with equal jitter: [0.5s,1s], [1s,2s], [1.5s,3s] (capped).
			w := fs.got()
			bounds := [][2]time.Duration{{500 * time.Millisecond, time.Second}, {time.Second, 2 * time.Second}, {1500 * time.Millisecond, 3 * time.Second}}
			if len(w) != 3 {
				t.Fatalf("waits = %v", w)
			}
			for i, b := range bounds {
				if w[i] < b[0] || w[i] > b[1] {
					t.Errorf("wait %d = %v, want in %v", i, w[i], b)
				}
			}
		})
	}
}

func TestRateLimitedAfterRetries(t *testing.T) {
	c := httpCases[1]
	s := c.server(t, echo, llmtest.WithHook(statusHook(c, -1, 429, map[string]string{"Retry-After": "1"})))
	fs := &fakeSleep{}
	p := newFor(t, c.name, s, Options{sleep: fs.sleep, MaxRetries: 2})
	_, err := p.Complete(context.Background(), userReq(c.model, "hi"))
	if !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("err = %v", err)
	}
	if s.Count() != 3 {
		t.Errorf("requests = %d", s.Count())
	}
}

func TestNoRetriesWhenDisabled(t *testing.T) {
	c := httpCases[0]
	s := c.server(t, echo, llmtest.WithHook(statusHook(c, -1, 503, nil)))
	p := newFor(t, c.name, s, Options{MaxRetries: -1})
	if _, err := p.Complete(context.Background(), userReq(c.model, "hi")); !errors.Is(err, ErrServer) {
		t.Fatalf("err = %v", err)
	}
	if s.Count() != 1 {
		t.Errorf("requests = %d, want 1", s.Count())
	}
}

func TestUnknownModel(t *testing.T) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.server(t, echo, llmtest.WithHook(func(w http.ResponseWriter, r *http.Request, n int) bool {
				c.errBody(w, 404, "model: no-such-model")
				return true
			}))
			p := newFor(t, c.name, s, Options{sleep: (&fakeSleep{}).sleep})
			_, err := p.Complete(context.Background(), userReq("no-such-model", "hi"))
			if !errors.Is(err, ErrUnknownModel) {
				t.Fatalf("err = %v, want ErrUnknownModel", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), `model "no-such-model" not found`) {
				t.Errorf("message = %q", err)
			}
			if s.Count() != 1 {
				t.Errorf("404 retried: %d requests", s.Count())
			}
		})
	}
}

func TestAuthRejected(t *testing.T) {
	s := llmtest.NewAnthropicServer(t, echo, llmtest.WithAPIKey("the-right-key"))
	p := newFor(t, "anthropic", s, Options{})
	_, err := p.Complete(context.Background(), userReq("claude-sonnet-4-5", "hi"))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("key leaked: %v", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, name := range []string{"anthropic", "openai", "ollama"} {
		t.Run(name, func(t *testing.T) {
			fs := &fakeSleep{}
			p, err := New(name, Options{BaseURL: "http://" + addr, APIKey: testKey, sleep: fs.sleep})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), userReq("m", "hi"))
			if !errors.Is(err, ErrConnection) {
				t.Fatalf("err = %v, want ErrConnection", err)
			}
			t.Log(err)
			msg := err.Error()
			if !strings.Contains(msg, "http://"+addr) || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "server is running") {
				t.Errorf("message = %q", msg)
			}
			if len(fs.got()) != 0 {
				t.Errorf("refused connection was retried: %v", fs.got())
			}
		})
	}
}

func TestConcurrencyLimit(t *testing.T) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.server(t, echo, llmtest.WithLatency(40*time.Millisecond))
			p := newFor(t, c.name, s, Options{MaxConcurrent: 2})
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := p.Complete(context.Background(), userReq(c.model, fmt.Sprint("q", i)))
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if s.MaxInFlight() != 2 {
				t.Errorf("max in flight = %d, want 2", s.MaxInFlight())
			}
			if s.Count() != 8 {
				t.Errorf("requests = %d", s.Count())
			}
		})
	}
}

func TestConcurrencySlotWaitRespectsContext(t *testing.T) {
	s := llmtest.NewOllamaServer(t, echo, llmtest.WithLatency(400*time.Millisecond))
	p := newFor(t, "ollama", s, Options{MaxConcurrent: 1})
	go p.Complete(context.Background(), userReq("m", "occupy the slot"))
	for s.Count() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, userReq("m", "waits"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestMissingKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	_, err := New("anthropic", Options{})
	if !errors.Is(err, ErrMissingKey) {
		t.Fatalf("err = %v", err)
	}
	if want := "anthropic: ANTHROPIC_API_KEY is not set: export it or set [providers.anthropic] api_key in rlm.toml"; err.Error() != want {
		t.Errorf("message = %q\nwant      %q", err, want)
	}
	if _, err := New("openai", Options{}); !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "OPENAI_API_KEY is not set") {
		t.Errorf("openai err = %v", err)
	}
	// From the environment it is found.
	t.Setenv("ANTHROPIC_API_KEY", testKey)
	s := llmtest.NewAnthropicServer(t, echo, llmtest.WithAPIKey(testKey))
	p, err := New("anthropic", Options{BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), userReq("claude-sonnet-4-5", "hi")); err != nil {
		t.Fatal(err)
	}
}

func TestTimeout(t *testing.T) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.server(t, echo, llmtest.WithLatency(3*time.Second))
			fs := &fakeSleep{}
			p := newFor(t, c.name, s, Options{Timeout: 100 * time.Millisecond, sleep: fs.sleep})
			start := time.Now()
			_, err := p.Complete(context.Background(), userReq(c.model, "hi"))
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			t.Log(err)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if !strings.Contains(err.Error(), "within 100ms") {
				t.Errorf("message = %q", err)
			}
			if s.Count() != 1 || len(fs.got()) != 0 {
				t.Errorf("timed-out attempt retried: %d requests", s.Count())
			}
		})
	}
}

func TestCallerCancelStopsRetrying(t *testing.T) {
	c := httpCases[0]
	s := c.server(t, echo, llmtest.WithHook(statusHook(c, -1, 503, map[string]string{"Retry-After": "30"})))
	p := newFor(t, c.name, s, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, userReq(c.model, "hi"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestKeyNeverInErrorsOrLogs(t *testing.T) {
	c := httpCases[1]
	// A misbehaving proxy echoes the Authorization header in its body.
	s := c.server(t, echo, llmtest.WithHook(func(w http.ResponseWriter, r *http.Request, n int) bool {
		status := 502
		if n > 1 {
			status = 400
		}
		c.errBody(w, status, "bad header: "+r.Header.Get("Authorization"))
		return true
	}))
	var logs bytes.Buffer
	p := newFor(t, c.name, s, Options{sleep: (&fakeSleep{}).sleep, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err := p.Complete(context.Background(), userReq(c.model, "hi"))
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
	if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testKey) {
		t.Errorf("key in error: %v", err)
	}
	if !strings.Contains(logs.String(), "retrying") || strings.Contains(logs.String(), testKey) {
		t.Errorf("logs = %q", logs.String())
	}
}

func TestUnknownProvider(t *testing.T) {
	_, err := New("gemini", Options{})
	if !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("err = %v", err)
	}
	if want := `unknown provider "gemini" (known: anthropic, claude-code, ollama, openai, replay)`; !strings.Contains(err.Error(), want) {
		t.Errorf("message = %q", err)
	}
}

func TestNoModel(t *testing.T) {
	s := llmtest.NewOpenAIServer(t, echo)
	p := newFor(t, "openai", s, Options{})
	if _, err := p.Complete(context.Background(), userReq("", "hi")); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
	if s.Count() != 0 {
		t.Errorf("request sent without a model")
	}
}
