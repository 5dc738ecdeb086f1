package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Budget bounds one run. Zero fields are unlimited, except MaxIterations
// and MaxDepth (see [Defaults]).
//
// # Notes
//
// Tokens, cost and time are shared by the whole recursion: a sub-call at any
// depth spends from the same totals as the root, so a deep tree cannot
// overrun what the user allowed. MaxIterations and MaxErrors are per loop:
// each child engine gets its own allowance of iterations, as an
// independent sub-task would, and running out of them makes that loop give
// its best answer (answer_source "forced") rather than fail.
type Budget struct {
	// MaxIterations is the number of model turns of one loop before the
	// model is asked for its best final answer.
	MaxIterations int `json:"max_iterations"`
	// MaxDepth is the deepest level at which rlm_query still starts a child
	// engine (the root is depth 0); beyond it rlm_query is answered by a
	// plain model call. 0 disables recursion.
	MaxDepth int `json:"max_depth"`
	// MaxTokens caps input+output tokens of every model call of the run.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD caps the cost of the run in US dollars. A call is priced
	// by the model that answered, else by the model asked for
	// ([llm.CallCost]); a call neither prices counts as free, and a warning
	// event says so once per model (`rlm run` refuses a cap it knows no
	// price for before it starts).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// MaxTime caps the wall time of the run.
	MaxTime time.Duration `json:"max_time_ns,omitempty"`
	// MaxErrors is how many code blocks in a row may fail (exception,
	// timeout) before the loop stops and asks for the best final answer.
	MaxErrors int `json:"max_errors,omitempty"`
	// MaxSubcalls caps the llm_query and rlm_query calls made from code,
	// at every depth (a batch of n counts n). Past it a query fails in the
	// cell with a message saying so, and the loop goes on: the model can
	// still finish with what it has.
	MaxSubcalls int `json:"max_subcalls,omitempty"`
}

// Validate refuses a budget no run can have: fewer than one iteration, or
// a negative part. The messages name the flags of rlm run and rlm bench.
func (b Budget) Validate() error {
	switch {
	case b.MaxIterations < 1:
		return fmt.Errorf("--max-iterations must be at least 1 (got %d)", b.MaxIterations)
	case b.MaxDepth < 0:
		return fmt.Errorf("--max-depth must not be negative (got %d)", b.MaxDepth)
	case b.MaxTokens < 0 || b.MaxCostUSD < 0 || b.MaxTime < 0 || b.MaxErrors < 0 || b.MaxSubcalls < 0:
		return fmt.Errorf("budgets must not be negative")
	}
	return nil
}

// Defaults for the budget's per-loop fields.
const (
	DefaultMaxIterations = 20
	DefaultMaxDepth      = 1
	// WarnFraction is the share of a budget after which a warning event is
	// emitted (once per kind).
	WarnFraction = 0.8
)

// ErrBudgetExhausted matches (errors.Is) every [*BudgetError].
var ErrBudgetExhausted = errors.New("budget exhausted")

// BudgetError says which budget ran out before an answer was found.
type BudgetError struct {
	// Kind is "tokens", "cost" or "time".
	Kind  string
	Used  string
	Limit string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s budget exhausted before an answer was found: used %s of %s", e.Kind, e.Used, e.Limit)
}

// Is makes errors.Is(err, ErrBudgetExhausted) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// Usage is what a run spent, sub-calls at every depth included.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// Calls is the number of model calls that succeeded.
	Calls int `json:"calls"`
	// UnpricedCalls counts the calls no price was known for: CostUSD counts
	// them as free, so it is a lower bound when this is not 0.
	UnpricedCalls int `json:"unpriced_calls,omitempty"`
	// Iterations counts model turns of every loop (root and children).
	Iterations int `json:"iterations"`
	// Subcalls counts llm_query and rlm_query calls made from code, at
	// every depth (a batched call of n prompts counts n).
	Subcalls        int   `json:"subcalls"`
	MaxDepthReached int   `json:"max_depth_reached"`
	DurationMs      int64 `json:"duration_ms"`
}

// CostText is the cost as people should read it: "$0.0123"; "price
// unknown" when no call had a known price (not "$0.0000", which would say
// the run was free); "$0.0123 + price unknown for 2 of 5 calls" when some
// had none.
func (u Usage) CostText() string {
	switch {
	case u.UnpricedCalls == 0 || u.Calls == 0:
		return usd(u.CostUSD)
	case u.UnpricedCalls >= u.Calls:
		return "price unknown"
	}
	return fmt.Sprintf("%s + price unknown for %d of %d calls", usd(u.CostUSD), u.UnpricedCalls, u.Calls)
}

// Tokens is input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// meter is the run's shared, concurrency-safe accounting.
type meter struct {
	mu      sync.Mutex
	b       Budget
	start   time.Time
	u       Usage
	warned  map[string]bool
	unknown map[string]bool // models without a price, warned once each
}

func newMeter(b Budget, start time.Time) *meter {
	return &meter{b: b, start: start, warned: map[string]bool{}, unknown: map[string]bool{}}
}

// warning is a budget warning to emit.
type warning struct {
	Kind, Used, Limit, Msg string
}

// add records one model call of model (answered as answered) and returns
// the warnings it triggered. A call without a known price (priced false)
// counts as free, so under a cost budget it is warned about, once per
// requested model: the cap cannot hold for it.
func (m *meter) add(in, out int64, cost float64, priced bool, model, answered string) []warning {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.InputTokens += in
	m.u.OutputTokens += out
	m.u.CostUSD += cost
	m.u.Calls++
	if !priced {
		m.u.UnpricedCalls++
	}
	var ws []warning
	if !priced && m.b.MaxCostUSD > 0 && !m.unknown[model] {
		m.unknown[model] = true
		name := fmt.Sprintf("%q", model)
		if answered != "" && answered != model {
			name += fmt.Sprintf(" (answered as %q)", answered)
		}
		ws = append(ws, warning{Kind: "cost", Msg: fmt.Sprintf("no price is known for model %s: its calls count as free against the cost budget, which cannot hold (add it to [pricing] in rlm.toml)", name)})
	}
	return append(ws, m.warnLocked()...)
}

// warnLocked returns the 80 % warnings not yet given.
func (m *meter) warnLocked() []warning {
	var ws []warning
	w := func(kind string, frac float64, used, limit string) {
		if frac >= WarnFraction && !m.warned[kind] {
			m.warned[kind] = true
			ws = append(ws, warning{Kind: kind, Used: used, Limit: limit,
				Msg: fmt.Sprintf("%.0f%% of the %s budget used (%s of %s)", 100*frac, kind, used, limit)})
		}
	}
	if m.b.MaxTokens > 0 {
		w("tokens", float64(m.u.Tokens())/float64(m.b.MaxTokens), fmt.Sprint(m.u.Tokens()), fmt.Sprint(m.b.MaxTokens))
	}
	if m.b.MaxCostUSD > 0 {
		w("cost", m.u.CostUSD/m.b.MaxCostUSD, usd(m.u.CostUSD), usd(m.b.MaxCostUSD))
	}
	if m.b.MaxTime > 0 {
		el := time.Since(m.start)
		w("time", float64(el)/float64(m.b.MaxTime), el.Round(time.Millisecond).String(), m.b.MaxTime.String())
	}
	return ws
}

// iteration counts one model turn at depth and returns warnings: the
// iteration warning concerns the root loop only (children have their own
// allowance), and the time warning is checked here too.
func (m *meter) iteration(depth, it int) []warning {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.Iterations++
	ws := m.warnLocked()
	if depth == 0 && m.b.MaxIterations > 0 && !m.warned["iterations"] &&
		float64(it)/float64(m.b.MaxIterations) >= WarnFraction {
		m.warned["iterations"] = true
		ws = append(ws, warning{Kind: "iterations", Used: fmt.Sprint(it), Limit: fmt.Sprint(m.b.MaxIterations),
			Msg: fmt.Sprintf("iteration %d of %d", it, m.b.MaxIterations)})
	}
	return ws
}

// subcall counts one llm_query or rlm_query, or refuses it past
// MaxSubcalls.
func (m *meter) subcall() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b.MaxSubcalls > 0 && m.u.Subcalls >= m.b.MaxSubcalls {
		return fmt.Errorf("the run's budget of %d sub-calls (llm_query and rlm_query, --max-subcalls) is used up: finish with what you have", m.b.MaxSubcalls)
	}
	m.u.Subcalls++
	return nil
}

func (m *meter) reachDepth(d int) {
	m.mu.Lock()
	m.u.MaxDepthReached = max(m.u.MaxDepthReached, d)
	m.mu.Unlock()
}

// exhausted reports the first shared budget (tokens, cost, time) that is
// used up, or nil.
func (m *meter) exhausted() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b.MaxTokens > 0 && m.u.Tokens() >= m.b.MaxTokens {
		return &BudgetError{Kind: "tokens", Used: fmt.Sprint(m.u.Tokens()), Limit: fmt.Sprint(m.b.MaxTokens)}
	}
	if m.b.MaxCostUSD > 0 && m.u.CostUSD >= m.b.MaxCostUSD {
		return &BudgetError{Kind: "cost", Used: usd(m.u.CostUSD), Limit: usd(m.b.MaxCostUSD)}
	}
	if m.b.MaxTime > 0 {
		if el := time.Since(m.start); el >= m.b.MaxTime {
			return m.timeErrorLocked(el)
		}
	}
	return nil
}

func (m *meter) timeError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.timeErrorLocked(time.Since(m.start))
}

func (m *meter) timeErrorLocked(el time.Duration) error {
	return &BudgetError{Kind: "time", Used: el.Round(time.Millisecond).String(), Limit: m.b.MaxTime.String()}
}

// snapshot returns the usage so far.
func (m *meter) snapshot() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	u.DurationMs = time.Since(m.start).Milliseconds()
	return u
}

func usd(v float64) string { return fmt.Sprintf("$%.4f", v) }
