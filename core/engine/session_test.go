package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/core/llm"
	"github.com/rlmkit/rlm/core/llm/llmtest"
)

// sessionLLM puts a real openai provider in front of a fake server that
// answers "MODEL: PROMPT" and reports in+out tokens a call.
func sessionLLM(t *testing.T, b SessionBudget, in, out int64) (*SessionLLM, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string { return r.Model + ": " + r.LastUser() },
		llmtest.WithAPIKey(testKey), llmtest.WithUsage(in, out))
	prov, err := llm.New("openai", fastRetries(srv.BaseURL()))
	if err != nil {
		t.Fatal(err)
	}
	return &SessionLLM{Provider: prov, ProviderName: "openai", Model: "gpt-4o", Allowed: []string{"gpt-4o-mini"}, Budget: b}, srv
}

func TestSessionLLMModelsAndAllowList(t *testing.T) {
	s, srv := sessionLLM(t, SessionBudget{MaxCallTokens: 32}, 1, 1)
	br, err := s.Bridges("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, err := br.LLMQuery(ctx, "a", ""); err != nil || got != "gpt-4o: a" {
		t.Fatalf("default model: %q %v", got, err)
	}
	if got, err := br.LLMQuery(ctx, "b", "gpt-4o-mini"); err != nil || got != "gpt-4o-mini: b" {
		t.Fatalf("allowed model: %q %v", got, err)
	}
	if _, err := br.LLMQuery(ctx, "c", "o3"); !errors.Is(err, ErrModelNotAllowed) || !strings.Contains(err.Error(), `"o3" is not among the models this server allows (gpt-4o, gpt-4o-mini)`) {
		t.Fatalf("a model not allowed: %v", err)
	}
	if _, err := s.Bridges("o3"); !errors.Is(err, ErrModelNotAllowed) {
		t.Fatalf("a session asking for a model not allowed: %v", err)
	}
	mini, err := s.Bridges("gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := mini.LLMQuery(ctx, "d", ""); got != "gpt-4o-mini: d" {
		t.Fatalf("the session's model answers: %q", got)
	}
	if _, err := br.RLMQuery(ctx, "task", nil, ""); err == nil || !strings.Contains(err.Error(), "rlm_query is not available in this session") {
		t.Fatalf("rlm_query: %v", err)
	}
	if srv.Count() != 3 {
		t.Fatalf("the server got %d calls, want 3 (the refused model never reaches it)", srv.Count())
	}
	for _, r := range srv.Requests() {
		if r.MaxTokens != 32 {
			t.Fatalf("MaxCallTokens not sent: max_tokens %d", r.MaxTokens)
		}
	}
}

// Each session has its own budget; a batch cannot overrun MaxCalls by
// having its calls in flight together.
func TestSessionLLMCallBudgetHoldsUnderConcurrency(t *testing.T) {
	s, srv := sessionLLM(t, SessionBudget{MaxCalls: 3}, 1, 1)
	br, _ := s.Bridges("")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := br.LLMQuery(context.Background(), "p", "")
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if strings.Contains(err.Error(), "budget of 3 model calls is used up") {
				refused++
			} else {
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 3 || refused != 7 || srv.Count() != 3 {
		t.Fatalf("%d answered, %d refused, %d reached the server; want 3, 7, 3", ok, refused, srv.Count())
	}
	other, _ := s.Bridges("")
	if _, err := other.LLMQuery(context.Background(), "p", ""); err != nil {
		t.Fatalf("a new session has a fresh budget: %v", err)
	}
}

func TestSessionLLMTokenAndCostBudgets(t *testing.T) {
	s, _ := sessionLLM(t, SessionBudget{MaxTokens: 250}, 100, 50)
	br, _ := s.Bridges("")
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := br.LLMQuery(ctx, "p", ""); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if _, err := br.LLMQuery(ctx, "p", ""); err == nil || !strings.Contains(err.Error(), "this session's tokens budget is used up (used 300 of 250)") {
		t.Fatalf("past the token budget: %v", err)
	}

	// gpt-4o costs $2.50 / $10 per million tokens: 1M in + 0 out is $2.50.
	s, _ = sessionLLM(t, SessionBudget{MaxCostUSD: 4}, 1_000_000, 0)
	br, _ = s.Bridges("")
	for i := 0; i < 2; i++ {
		if _, err := br.LLMQuery(ctx, "p", ""); err != nil {
			t.Fatalf("cost call %d: %v", i+1, err)
		}
	}
	if _, err := br.LLMQuery(ctx, "p", ""); err == nil || !strings.Contains(err.Error(), "this session's cost budget is used up (used $5.0000 of $4.0000)") {
		t.Fatalf("past the cost budget: %v", err)
	}
}
