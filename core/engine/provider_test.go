package engine

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/llm"
	"github.com/rlmkit/rlm/core/llm/llmtest"
)

// These tests put the real providers of core/llm between the engine and a
// fake server speaking the provider's wire format, so retries and error
// reporting are those a user gets.

const testKey = "sk-test-do-not-log-0123456789"

func fastRetries(base string) llm.Options {
	return llm.Options{BaseURL: base, APIKey: testKey, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

func scriptedServer(req llmtest.ChatRequest) string {
	if strings.Contains(req.LastUser(), "Output:") {
		return "FINAL(done)"
	}
	return "```repl\nprint x\n```"
}

func TestProvider429ThenSuccess(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			hook := llmtest.WithHook(func(w http.ResponseWriter, r *http.Request, n int) bool {
				if n == 1 {
					w.Header().Set("Retry-After", "0")
					if kind == "openai" {
						llmtest.OpenAIError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached")
					} else {
						llmtest.AnthropicError(w, http.StatusTooManyRequests, "rate_limit_error", "Rate limit reached")
					}
					return true
				}
				return false
			})
			var srv *llmtest.Server
			if kind == "openai" {
				srv = llmtest.NewOpenAIServer(t, scriptedServer, hook)
			} else {
				srv = llmtest.NewAnthropicServer(t, scriptedServer, hook)
			}
			p, err := llm.New(kind, fastRetries(srv.BaseURL()))
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, nil)
			h.opts.Provider = p
			res, err := h.run("t", "c")
			if err != nil || res.Answer != "done" {
				t.Fatalf("%+v %v", res, err)
			}
			if srv.Count() != 3 || res.Usage.Calls != 2 {
				t.Fatalf("%d requests, usage %+v", srv.Count(), res.Usage)
			}
			evs := h.events()
			if n := count(evs, EventLLMCall, func(e Event) bool { return e.Response.Attempts == 2 }); n != 1 {
				t.Fatalf("%d calls traced with 2 attempts", n)
			}
			if strings.Contains(h.trace.String(), testKey) {
				t.Fatal("the API key is in the trace")
			}
		})
	}
}

func TestProvider500ForeverIsAClearError(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, scriptedServer, llmtest.WithHook(func(w http.ResponseWriter, r *http.Request, n int) bool {
		llmtest.OpenAIError(w, http.StatusInternalServerError, "server_error", "The server had an error while processing your request.")
		return true
	}))
	o := fastRetries(srv.BaseURL())
	o.MaxRetries = 3
	p, err := llm.New("openai", o)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.opts.Provider = p
	res, err := h.run("t", "c")
	if !errors.Is(err, ErrProvider) || !errors.Is(err, llm.ErrServer) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"model call failed", "HTTP 500", "after 4 attempts", "The server had an error"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, testKey) || strings.Contains(h.trace.String(), testKey) {
		t.Fatal("the API key leaked")
	}
	if srv.Count() != 4 || res.Answer != "" {
		t.Fatalf("%d requests, %+v", srv.Count(), res)
	}
}

// TestCostOfAServerThatNamesItsModelItsOwnWay: an OpenAI-compatible server
// that answers as "m" for a requested gpt-4o-mini is priced as gpt-4o-mini,
// so the cost budget stops the run after the first call (10M+10M tokens at
// $0.15+$0.60 per million is $7.50) instead of counting every call as free.
func TestCostOfAServerThatNamesItsModelItsOwnWay(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, func(llmtest.ChatRequest) string { return "```repl\nprint x\n```" },
		llmtest.WithModel("m"), llmtest.WithUsage(10_000_000, 10_000_000))
	p, err := llm.New("openai", fastRetries(srv.BaseURL()))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.opts.Provider, h.opts.Model = p, "gpt-4o-mini"
	h.opts.Budget.MaxCostUSD, h.opts.Budget.MaxIterations = 0.5, 5
	res, err := h.run("t", "c")
	var be *BudgetError
	if !errors.As(err, &be) || be.Kind != "cost" {
		t.Fatalf("err = %v, usage %+v", err, res.Usage)
	}
	if srv.Count() != 1 || res.Usage.Calls != 1 || math.Abs(res.Usage.CostUSD-7.5) > 1e-9 {
		t.Fatalf("%d requests, usage %+v", srv.Count(), res.Usage)
	}
	evs := h.events()
	if n := count(evs, EventBudgetWarning, func(e Event) bool { return strings.Contains(e.Message, "no price") }); n != 0 {
		t.Fatalf("%d unknown-price warnings for a priced request", n)
	}
	if n := count(evs, EventLLMCall, func(e Event) bool { return e.Response.Model == "m" && e.Response.CostUSD == 7.5 }); n != 1 {
		t.Fatalf("the traced call does not show the cost counted (%d)", n)
	}
}

// TestNoPriceAtAllWarns: when neither the model that answered nor the one
// asked for has a price, the call counts as free and the cost budget warns
// that it cannot hold, naming both.
func TestNoPriceAtAllWarns(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, func(req llmtest.ChatRequest) string {
		if req.Turn() < 2 {
			return "```repl\nprint x\n```"
		}
		return "FINAL(ok)"
	}, llmtest.WithModel("m"), llmtest.WithUsage(10_000_000, 10_000_000))
	p, err := llm.New("openai", fastRetries(srv.BaseURL()))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.opts.Provider, h.opts.Model = p, "unpriced-model-rlm17"
	h.opts.Budget.MaxCostUSD = 0.5
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "ok" || res.Usage.CostUSD != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n := count(h.events(), EventBudgetWarning, func(e Event) bool {
		return strings.Contains(e.Message, `no price is known for model "unpriced-model-rlm17" (answered as "m")`)
	}); n != 1 {
		t.Fatalf("%d warnings about the unpriced model", n)
	}
}
