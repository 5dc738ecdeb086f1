package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// SessionLLM gives REPL sessions that no RLM loop drives (rlm serve, rlm
// mcp, rlm exec --context, a library user's sessions) a model for
// llm_query, with a budget per session.
//
// The provider, and with it the API key, stays in the host process: a
// cell's llm_query reaches it through the session's bridge (a host-side
// callback), so nothing a cell can read holds the key.
type SessionLLM struct {
	// Provider answers the calls.
	Provider llm.Provider
	// ProviderName is the provider's registry name, for messages.
	ProviderName string
	// Model answers llm_query when neither the session nor the cell chose
	// one.
	Model string
	// Allowed are the other models a session (or a cell, with
	// llm_query(prompt, model=...)) may choose; Model is always allowed.
	Allowed []string
	// Budget bounds each session on its own.
	Budget SessionBudget
	// MaxConcurrent bounds a batched call's prompts in flight (0: the
	// bridges' default).
	MaxConcurrent int
}

// SessionBudget bounds the model calls of one session. Zero fields are
// unlimited. A call that would go past one fails inside the cell with an
// LLMQueryError naming the budget; the session and its variables stay.
type SessionBudget struct {
	// MaxTokens caps the input+output tokens of the session's calls.
	MaxTokens int64
	// MaxCostUSD caps their cost (priced as in a run, see [Budget]).
	MaxCostUSD float64
	// MaxCalls caps how many calls the session may start.
	MaxCalls int
	// MaxCallTokens caps the reply of each call (the request's max_tokens).
	MaxCallTokens int
}

// ErrModelNotAllowed matches (errors.Is) the error of a model the operator
// did not allow.
var ErrModelNotAllowed = errors.New("model not allowed")

// Check reports whether model ("" meaning the default) may be chosen.
func (s *SessionLLM) Check(model string) error {
	if model == "" || model == s.Model || slices.Contains(s.Allowed, model) {
		return nil
	}
	return fmt.Errorf("%w: %q is not among the models this server allows (%s); the operator adds one with --allow-model or [sessions] allow_models in rlm.toml",
		ErrModelNotAllowed, model, strings.Join(s.models(), ", "))
}

func (s *SessionLLM) models() []string {
	out := []string{s.Model}
	for _, m := range s.Allowed {
		if m != s.Model {
			out = append(out, m)
		}
	}
	return out
}

// Bridges returns the bridges of one new session whose llm_query answers
// with model ("": s.Model) unless a cell names another allowed one. Each
// call of Bridges starts a fresh budget. rlm_query is refused with a
// message saying so: a session has no loop to recurse into (`rlm run`
// runs recursive loops).
func (s *SessionLLM) Bridges(model string) (core.Bridges, error) {
	if err := s.Check(model); err != nil {
		return core.Bridges{}, err
	}
	if model == "" {
		model = s.Model
	}
	sm := &sessionMeter{s: s, model: model, m: newMeter(Budget{MaxTokens: s.Budget.MaxTokens, MaxCostUSD: s.Budget.MaxCostUSD}, time.Now())}
	return core.Bridges{
		LLMQuery: sm.query,
		RLMQuery: func(context.Context, string, *string, string) (string, error) {
			return "", errors.New("rlm_query is not available in this session: only llm_query is (recursive sub-tasks need `rlm run`)")
		},
		MaxConcurrent: s.MaxConcurrent,
	}, nil
}

// sessionMeter is one session's accounting.
type sessionMeter struct {
	s     *SessionLLM
	model string
	m     *meter

	mu      sync.Mutex
	started int // calls started, failed ones included
}

// reserve takes one call of the MaxCalls budget, so that a batched call
// cannot overrun it by having many calls in flight at once.
func (sm *sessionMeter) reserve() error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if max := sm.s.Budget.MaxCalls; max > 0 && sm.started >= max {
		return fmt.Errorf("this session's budget of %d model calls is used up (max_calls): open a new session, or ask the operator for a larger --max-calls", max)
	}
	sm.started++
	return nil
}

func (sm *sessionMeter) query(ctx context.Context, prompt, model string) (string, error) {
	if err := sm.s.Check(model); err != nil {
		return "", err
	}
	if model == "" {
		model = sm.model
	}
	if err := sm.m.exhausted(); err != nil {
		var be *BudgetError
		if errors.As(err, &be) {
			return "", fmt.Errorf("this session's %s budget is used up (used %s of %s): open a new session, or ask the operator for a larger one", be.Kind, be.Used, be.Limit)
		}
		return "", err
	}
	if err := sm.reserve(); err != nil {
		return "", err
	}
	req := llm.Request{Model: model, Messages: []llm.Message{{Role: "user", Content: prompt}}, MaxTokens: sm.s.Budget.MaxCallTokens}
	resp, err := sm.s.Provider.Complete(llm.WithCallInfo(ctx, llm.CallInfo{Caller: "llm_query"}), req)
	if err != nil {
		return "", fmt.Errorf("the model call failed (%s, model %s): %w", sm.s.ProviderName, model, err)
	}
	cost, priced := llm.CallCost(model, resp)
	sm.m.add(resp.Usage.InputTokens, resp.Usage.OutputTokens, cost, priced, model, resp.Model)
	return resp.Text, nil
}
