package engine

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/llm"
)

// Event types, the "type" field of a trace line.
const (
	EventRunStart      = "run_start"
	EventIteration     = "iteration"
	EventLLMCall       = llm.CallEventType // "llm_call": one successful model call
	EventLLMError      = "llm_error"       // a model call that failed
	EventCode          = "code"
	EventSubcall       = "subcall"     // llm_query or rlm_query called from code
	EventSubcallEnd    = "subcall_end" // its answer
	EventBudgetWarning = "budget_warning"
	EventWarning       = "warning" // something the user should know, not a budget (replay mismatch)
	EventFinal         = "final"   // a loop's answer (root or child)
	EventRunEnd        = "run_end"
)

// Event is one line of a trace, and what [Options.OnEvent] receives.
//
// # Notes
//
// Every event names its loop: Node is the loop's number (0 is the root; a
// child started by rlm_query gets the next free number), Parent the loop
// that started it, Depth its level. A trace is therefore a tree that
// `rlm trace show` can print, and its llm_call lines carry the request and
// the response in the form core/llm's replay provider reads
// ([llm.CallEvent]: type, depth, caller, request, response), so a trace is
// also a transcript. API keys are never part of an event.
type Event struct {
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Node      int       `json:"node"`
	Parent    *int      `json:"parent,omitempty"`
	Depth     int       `json:"depth"`
	Iteration int       `json:"iteration,omitempty"`

	// run_start
	Task    string     `json:"task,omitempty"`
	Config  *RunConfig `json:"config,omitempty"`
	Context *CtxInfo   `json:"context,omitempty"`

	// llm_call, llm_error: Caller is what made the call: "root" or "child"
	// (a loop's turn), "forced" (the best-answer request), "llm_query",
	// "rlm_fallback" (rlm_query past the maximum depth).
	Caller    string        `json:"caller,omitempty"`
	Request   *llm.Request  `json:"request,omitempty"`
	Response  *llm.Response `json:"response,omitempty"`
	LatencyMs float64       `json:"latency_ms,omitempty"`
	Error     string        `json:"error,omitempty"`

	// code
	Block  int         `json:"block,omitempty"`
	Code   string      `json:"code,omitempty"`
	Output string      `json:"output,omitempty"`
	Result *CodeResult `json:"result,omitempty"`

	// subcall, subcall_end: Kind is "llm_query" or "rlm_query"; Child is
	// the loop an rlm_query started (absent when it fell back to a model
	// call).
	Kind         string `json:"kind,omitempty"`
	Child        *int   `json:"child,omitempty"`
	Prompt       string `json:"prompt,omitempty"`
	ContextChars int    `json:"context_chars,omitempty"`

	// budget_warning
	Budget  string `json:"budget,omitempty"`
	Used    string `json:"used,omitempty"`
	Limit   string `json:"limit,omitempty"`
	Message string `json:"message,omitempty"`

	// final, subcall_end, run_end
	Answer string `json:"answer,omitempty"`
	Source string `json:"source,omitempty"`

	// Totals is the run's usage so far (llm_call, final, run_end).
	Totals *Usage `json:"totals,omitempty"`
}

// CodeResult is the part of a cell's result a trace keeps.
type CodeResult struct {
	EndedBy    ending.Reason `json:"ended_by"`
	Error      string        `json:"error,omitempty"`
	DurationMs int64         `json:"duration_ms"`
	TimedOut   bool          `json:"timed_out,omitempty"`
	StateLost  bool          `json:"state_lost,omitempty"`
	Truncated  bool          `json:"truncated,omitempty"`
}

// RunConfig is the configuration recorded in run_start.
type RunConfig struct {
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model"`
	SubcallModel string `json:"subcall_model"`
	Budget       Budget `json:"budget"`
	// Protocol is the run's Options.Protocol, so that a replay of the
	// trace can say when it speaks another one (replaywarn.go).
	Protocol string `json:"protocol,omitempty"`
	// Extra holds what the caller wants on record (backend, runtime...).
	// It must not hold secrets.
	Extra map[string]string `json:"extra,omitempty"`
}

// CtxInfo describes the context without copying it.
type CtxInfo struct {
	Kind  string `json:"kind"`
	Chars int    `json:"chars"`
	Type  string `json:"type"`
	// SHA256 is the hex SHA-256 of the context's bytes ("" for no
	// context): a replay of a recording compares it, since another context
	// of the same size and type gives the same prompts and would otherwise
	// replay unnoticed.
	SHA256 string `json:"sha256,omitempty"`
}

// tracer writes events as JSON lines; safe for concurrent use.
type tracer struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	on  func(Event)
}

func newTracer(w io.Writer, on func(Event)) *tracer {
	t := &tracer{w: w, on: on}
	if w != nil {
		t.enc = json.NewEncoder(w)
		t.enc.SetEscapeHTML(false)
	}
	return t
}

func (t *tracer) emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.enc != nil {
		// A failing trace writer must not end a run: the caller's writer
		// remembers its own error and reports it.
		_ = t.enc.Encode(ev)
	}
	if t.on != nil {
		t.on(ev)
	}
}
