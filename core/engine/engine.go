// Package engine runs Recursive Language Model loops: a model that never
// sees its (possibly huge) input directly, but explores it through a Python
// REPL whose `context` variable holds it, asks sub-questions with
// llm_query, hands sub-tasks to recursive copies of itself with rlm_query,
// and finishes with FINAL(answer) or FINAL_VAR(variable).
//
// The engine imports no backend: it is given a [core.SandboxFactory] (the
// CLI builds one after resolving the backend; a library user may pass their
// own) and an [llm.Provider].
//
// # Notes
//
// One Run is one tree of loops. The root loop (depth 0) and every child
// started by rlm_query share one meter, so tokens, cost, time and the usage
// totals include sub-calls at every depth, whatever goroutine they run on
// (batched queries run concurrently). Each loop has its own sandbox session,
// opened from the same factory, and closes it when the loop ends.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/llm"
)

// Options configure an [Engine]. Provider, Model and Sandbox are required.
type Options struct {
	// Provider answers every model call of the run.
	Provider llm.Provider
	// Model drives the loops; SubcallModel answers llm_query (and
	// rlm_query past the maximum depth). SubcallModel defaults to Model.
	Model        string
	SubcallModel string
	// Sandbox opens one REPL session per loop.
	Sandbox core.SandboxFactory
	// Budget bounds the run; zero MaxIterations takes
	// [DefaultMaxIterations]. MaxDepth is used as given (0: no recursion).
	Budget Budget
	// CellLimits bound each code block (wall time, memory, output...).
	CellLimits core.Limits
	// Env is passed to every session.
	Env map[string]string
	// MaxOutputChars is how much of a block's output the model sees, head
	// and tail (default [DefaultMaxOutputChars]).
	MaxOutputChars int
	// MaxConcurrent bounds the queries of one batched call in flight
	// (default [defaults.BatchConcurrency]).
	MaxConcurrent int
	// MaxTokensPerCall caps each model reply (0: the provider default).
	MaxTokensPerCall int
	// Temperature is passed to every call (nil: the model's default).
	Temperature *float64
	// SystemPrompt replaces [SystemPrompt].
	SystemPrompt string
	// Trace receives the run's events as JSON lines.
	Trace io.Writer
	// OnEvent receives every event as it happens (progress display). Calls
	// are serialised; keep it fast.
	OnEvent func(Event)
	// Record is added to the run_start event (never put secrets here).
	Record RunConfig
	// Tools are preloaded into every loop's REPL and listed in the system
	// prompt (see [Tools]).
	Tools Tools
	// Protocol is ProtocolRLM (the default) or ProtocolReference
	// (protocol.go).
	Protocol string
	// BindContextVars makes each key of a dict context a variable of the
	// root loop's REPL too (rlm run --var NAME=FILE).
	BindContextVars bool
	// CompactAfterChars, when positive, summarises a loop's older turns
	// once its history is longer than that many characters (compact.go).
	CompactAfterChars int
}

// Defaults for [Options].
const (
	DefaultMaxOutputChars = 20_000
)

// Answer sources.
const (
	SourceFinal    = "final"     // FINAL(answer)
	SourceFinalVar = "final_var" // FINAL_VAR(name)
	SourceForced   = "forced"    // asked for after the iterations or errors ran out
)

// Result is a run's outcome.
type Result struct {
	Answer string `json:"answer"`
	// Source is how the answer was given: final, final_var or forced.
	// Empty when the run ended without an answer.
	Source string `json:"answer_source"`
	// NoFinal: the forced answer had no FINAL or FINAL_VAR, or a FINAL_VAR
	// of a variable the REPL does not have (see MissingVar), so Answer is
	// the model's whole last reply, which may be no answer at all; the CLI
	// says so and exits non-zero.
	NoFinal bool `json:"no_final,omitempty"`
	// MissingVar is the variable a forced FINAL_VAR named that the REPL
	// does not have (NoFinal is then true).
	MissingVar string `json:"missing_var,omitempty"`
	Usage      Usage  `json:"usage"`
}

// Errors a run can end with besides [ErrBudgetExhausted]; errors.Is tells
// them apart.
var (
	// ErrProvider: a model call failed (after the provider's retries).
	ErrProvider = errors.New("model call failed")
	// ErrSandbox: a session could not be opened or stopped answering.
	ErrSandbox = errors.New("sandbox failure")
)

type failure struct {
	kind error
	msg  string
	err  error
}

func (f *failure) Error() string   { return f.msg + ": " + f.err.Error() }
func (f *failure) Unwrap() []error { return []error{f.kind, f.err} }

// Engine runs RLM loops. It is safe to Run concurrently.
type Engine struct {
	o Options
}

// New checks opts and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.Provider == nil {
		return nil, errors.New("engine: no model provider")
	}
	if opts.Sandbox == nil {
		return nil, errors.New("engine: no sandbox factory")
	}
	if opts.Model == "" && opts.Provider.Name() != "replay" && opts.Provider.Name() != "claude-code" {
		return nil, errors.New("engine: no model named")
	}
	if opts.SubcallModel == "" {
		opts.SubcallModel = opts.Model
	}
	if opts.Budget.MaxIterations <= 0 {
		opts.Budget.MaxIterations = DefaultMaxIterations
	}
	if opts.Budget.MaxDepth < 0 {
		opts.Budget.MaxDepth = 0
	}
	if opts.MaxOutputChars <= 0 {
		opts.MaxOutputChars = DefaultMaxOutputChars
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = defaults.BatchConcurrency
	}
	if err := CheckProtocol(opts.Protocol); err != nil {
		return nil, err
	}
	if opts.Protocol == "" {
		opts.Protocol = ProtocolRLM
	}
	if opts.SystemPrompt == "" {
		opts.SystemPrompt = SystemPrompt
		if opts.Protocol == ProtocolReference {
			opts.SystemPrompt = ReferenceSystemPrompt
		}
	}
	if err := opts.Tools.check(); err != nil {
		return nil, err
	}
	return &Engine{o: opts}, nil
}

// run is the state shared by every loop of one Run.
type run struct {
	e      *Engine
	o      *Options
	parent context.Context // the caller's context: its end is a cancellation, not a budget
	meter  *meter
	trace  *tracer
	nodes  atomic.Int64
	tools  toolsRun
	conv   *Conversation // the root loop's, when kept (RunIn)
	providerWarnings
}

// Run answers task about c (nil: no context). The Result is never nil: on
// error it holds the usage spent so far. The error is nil when an answer
// was found, else it matches one of [ErrBudgetExhausted], [ErrProvider],
// [ErrSandbox] or the context's error.
func (e *Engine) Run(ctx context.Context, task string, c *core.Context) (*Result, error) {
	return e.run(ctx, task, c, nil)
}

func (e *Engine) run(ctx context.Context, task string, c *core.Context, cv *Conversation) (*Result, error) {
	start := time.Now()
	r := &run{e: e, o: &e.o, parent: ctx, meter: newMeter(e.o.Budget, start), trace: newTracer(e.o.Trace, e.o.OnEvent)}
	rctx := ctx
	if e.o.Budget.MaxTime > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, start.Add(e.o.Budget.MaxTime))
		defer cancel()
	}
	info := describe(c)
	cfg := e.o.Record
	cfg.Model, cfg.SubcallModel, cfg.Budget, cfg.Protocol = e.o.Model, e.o.SubcallModel, e.o.Budget, e.o.Protocol
	if cfg.Provider == "" {
		cfg.Provider = e.o.Provider.Name()
	}
	r.trace.emit(Event{Type: EventRunStart, Time: start.UTC(), Task: task, Config: &cfg, Context: &info})
	r.checkRecording(task, info)

	r.conv = cv
	res, err := r.loop(rctx, 0, nil, 0, task, c, &info, "")
	err = r.explain(err)
	out := &Result{Usage: r.meter.snapshot()}
	// A partial answer (answer.go) comes with the budget error that cut
	// the run short.
	if res != nil && (err == nil || res.Source == SourcePartial) {
		out.Answer, out.Source, out.NoFinal, out.MissingVar = res.Answer, res.Source, res.NoFinal, res.MissingVar
	}
	end := Event{Type: EventRunEnd, Answer: out.Answer, Source: out.Source, Totals: &out.Usage}
	if err != nil {
		end.Error = err.Error()
	}
	r.trace.emit(end)
	return out, err
}

// explain turns the end of the run's deadline into the time budget error.
func (r *run) explain(err error) error {
	if err == nil || r.parent.Err() != nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) && r.o.Budget.MaxTime > 0 {
		var be *BudgetError
		if errors.As(err, &be) {
			return err
		}
		return r.meter.timeError()
	}
	return err
}

// loopResult is one loop's answer.
type loopResult struct {
	Answer, Source string
	NoFinal        bool   // forced, and the reply had no usable FINAL
	MissingVar     string // forced, and its FINAL_VAR named no variable
}

// node is one loop: its place in the tree and its session.
type node struct {
	r      *run
	id     int
	parent *int
	depth  int
	ctx    context.Context
	c      *core.Context
	sess   core.Session
	model  string // the loop's model: Options.Model, or rlm_query's model=
	// history is the loop's messages: a conversation's before the run,
	// the loop's own when it ends (what a kept conversation keeps).
	history []llm.Message
}

// loop runs one loop to its answer; info describes c (nil: compute it).
func (r *run) loop(ctx context.Context, id int, parent *int, depth int, task string, c *core.Context, info *CtxInfo, model string) (*loopResult, error) {
	if model == "" {
		model = r.o.Model
	}
	n := &node{r: r, id: id, parent: parent, depth: depth, ctx: ctx, c: c, model: model}
	cv := r.conv
	if depth != 0 {
		cv = nil
	}
	if cv != nil {
		if err := cv.acquire(n); err != nil {
			return nil, err
		}
		defer func() { cv.release(n.history) }()
		cv.mu.Lock()
		n.sess, n.history = cv.sess, cv.msgs
		cv.mu.Unlock()
	}
	if n.sess == nil {
		bridges := core.Bridges{
			LLMQuery:      n.llmQuery,
			RLMQuery:      n.rlmQuery,
			ToolCall:      n.toolBridge(),
			MaxConcurrent: r.o.MaxConcurrent,
		}
		if cv != nil {
			bridges = cv.bridges(r.o.MaxConcurrent, bridges.ToolCall != nil)
		}
		sess, err := r.o.Sandbox(ctx, core.SessionOptions{
			Context: c,
			Limits:  r.o.CellLimits,
			Env:     r.o.Env,
			Bridges: bridges,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &failure{kind: ErrSandbox, msg: fmt.Sprintf("opening the REPL session (depth %d)", depth), err: err}
		}
		if cv != nil {
			cv.mu.Lock()
			cv.sess = sess
			cv.mu.Unlock()
		} else {
			defer sess.Close()
		}
		n.sess = sess
		if err := n.loadTools(); err != nil {
			return nil, err
		}
		if err := n.setProtocol(); err != nil {
			return nil, err
		}
		if err := n.bindVars(); err != nil {
			return nil, err
		}
	}
	res, err := n.turns(task, info)
	if err != nil && res == nil {
		return n.partialAnswer(err)
	}
	return res, err
}

// turns runs the loop's model turns until an answer or an error.
func (n *node) turns(task string, info *CtxInfo) (*loopResult, error) {
	r, c, depth := n.r, n.c, n.depth
	caller := "root"
	if depth > 0 {
		caller = "child"
	}
	if info == nil {
		d := describe(c)
		info = &d
	}
	msgs := []llm.Message{{Role: "user", Content: FirstMessage(task, *info, depth)}}
	if len(n.history) > 0 {
		// A continued conversation: its history, then the next task (joined
		// to a last user message: roles must alternate for some servers).
		msgs = append([]llm.Message(nil), n.history...)
		if last := len(msgs) - 1; msgs[last].Role == "user" {
			msgs[last].Content += "\n\n" + continueMessage(task)
		} else {
			msgs = append(msgs, llm.Message{Role: "user", Content: continueMessage(task)})
		}
	}
	defer func() { n.history = msgs }()
	errorsInRow := 0
	for it := 1; ; it++ {
		if it > r.o.Budget.MaxIterations {
			return n.forced(msgs, fmt.Sprintf("all %d iterations used", r.o.Budget.MaxIterations))
		}
		if err := n.check(); err != nil {
			return nil, err
		}
		for _, w := range r.meter.iteration(depth, it) {
			n.warn(w)
		}
		n.emit(Event{Type: EventIteration, Iteration: it})
		var cerr error
		if msgs, cerr = n.compact(it, msgs); cerr != nil {
			return nil, cerr
		}
		resp, err := n.call(it, caller, n.model, r.system(), msgs)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, llm.Message{Role: "assistant", Content: resp.Text})
		reply := ParseReply(resp.Text)

		var fb strings.Builder
		for i, code := range reply.Code {
			final := callsFinal(code)
			if final {
				if err := n.prepareFinal(); err != nil {
					return nil, err
				}
			}
			out, failed, err := n.execute(it, i+1, code)
			if err != nil {
				return nil, err
			}
			if final {
				if answer, source, ok, err := n.finalFromCode(); err != nil {
					return nil, err
				} else if ok {
					return n.finish(it, answer, source), nil
				}
			}
			if failed {
				errorsInRow++
			} else {
				errorsInRow = 0
			}
			if len(reply.Code) > 1 {
				fmt.Fprintf(&fb, "Output of block %d of %d:\n", i+1, len(reply.Code))
			} else {
				fb.WriteString("Output:\n")
			}
			fb.WriteString(out)
			fb.WriteString("\n\n")
		}
		if f := reply.Final; f != nil {
			if !f.Var {
				return n.finish(it, f.Value, SourceFinal), nil
			}
			val, found, err := n.variable(f.Value)
			if err != nil {
				return nil, err
			}
			if found {
				return n.finish(it, val, SourceFinalVar), nil
			}
			fmt.Fprintf(&fb, "FINAL_VAR(%s): the REPL has no variable named %s. Set it in a ```repl block first, then finish again.\n\n", f.Value, f.Value)
		}
		if len(reply.Code) == 0 && reply.Final == nil {
			fb.WriteString(noCodeMessage)
		}
		if max := r.o.Budget.MaxErrors; max > 0 && errorsInRow >= max {
			msgs = append(msgs, llm.Message{Role: "user", Content: strings.TrimSpace(fb.String())})
			return n.forced(msgs, fmt.Sprintf("%d code blocks in a row failed", errorsInRow))
		}
		fmt.Fprintf(&fb, "(iteration %d of %d done)", it, r.o.Budget.MaxIterations)
		msgs = append(msgs, llm.Message{Role: "user", Content: strings.TrimSpace(fb.String())})
	}
}

func (n *node) emit(ev Event) {
	ev.Node, ev.Parent, ev.Depth = n.id, n.parent, n.depth
	n.r.trace.emit(ev)
}

func (n *node) warn(w warning) {
	n.emit(Event{Type: EventBudgetWarning, Budget: w.Kind, Used: w.Used, Limit: w.Limit, Message: w.Msg})
}

// check returns the error that stops the loop before another model call:
// a shared budget used up, or the run's context ended.
func (n *node) check() error {
	if err := n.r.meter.exhausted(); err != nil {
		return err
	}
	return n.ctx.Err()
}

// call makes one model call, accounts for it and traces it.
func (n *node) call(it int, caller, model, system string, msgs []llm.Message) (llm.Response, error) {
	req := llm.Request{Model: model, System: system, Messages: msgs, MaxTokens: n.r.o.MaxTokensPerCall, Temperature: n.r.o.Temperature}
	// The trace keeps the request as sent; later appends to msgs must not
	// show up in it.
	req.Messages = append([]llm.Message(nil), msgs...)
	cctx := llm.WithWarn(llm.WithCallInfo(n.ctx, llm.CallInfo{Depth: n.depth, Caller: caller}), n.providerWarning)
	resp, err := n.r.o.Provider.Complete(cctx, req)
	if err != nil {
		n.emit(Event{Type: EventLLMError, Iteration: it, Caller: caller, Request: &req, Error: err.Error()})
		if n.ctx.Err() != nil {
			return resp, n.ctx.Err()
		}
		return resp, &failure{kind: ErrProvider, msg: fmt.Sprintf("model call failed (depth %d, %s)", n.depth, caller), err: err}
	}
	// The same decision as the provider wrapper's (llm.CallCost), made
	// again here for a provider that does not go through it, so that what
	// the meter counts, what the trace shows and whether the call is priced
	// never disagree: a call priced by the requested model's price counts
	// that price, not 0.
	var priced bool
	resp.CostUSD, priced = llm.CallCost(model, resp)
	ws := n.r.meter.add(resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.CostUSD, priced, model, resp.Model)
	totals := n.r.meter.snapshot()
	n.emit(Event{Type: EventLLMCall, Iteration: it, Caller: caller, Request: &req, Response: &resp,
		LatencyMs: float64(resp.Latency.Microseconds()) / 1000, Totals: &totals})
	for _, w := range ws {
		n.warn(w)
	}
	return resp, nil
}

func (n *node) finish(it int, answer, source string) *loopResult {
	totals := n.r.meter.snapshot()
	n.emit(Event{Type: EventFinal, Iteration: it, Answer: answer, Source: source, Totals: &totals})
	return &loopResult{Answer: answer, Source: source}
}

// forced asks once for the best final answer.
func (n *node) forced(msgs []llm.Message, why string) (*loopResult, error) {
	if err := n.check(); err != nil {
		return nil, err
	}
	ask := fmt.Sprintf(forcedMessage, why)
	// Roles must alternate for some servers: join a pending user message.
	if last := len(msgs) - 1; last >= 0 && msgs[last].Role == "user" {
		msgs = append(msgs[:last:last], llm.Message{Role: "user", Content: msgs[last].Content + "\n\n" + ask})
	} else {
		msgs = append(msgs, llm.Message{Role: "user", Content: ask})
	}
	resp, err := n.r.call(n, "forced", msgs)
	if err != nil {
		return nil, err
	}
	reply := strings.TrimSpace(resp.Text)
	f := ParseReply(resp.Text).Final
	switch {
	case f == nil:
		res := n.finish(0, reply, SourceForced)
		res.NoFinal = true
		return res, nil
	case !f.Var:
		return n.finish(0, f.Value, SourceForced), nil
	}
	val, found, err := n.variable(f.Value)
	if err != nil {
		return nil, err
	}
	if found {
		return n.finish(0, val, SourceForced), nil
	}
	// A FINAL_VAR of a variable the REPL does not have (never set, or set
	// by code that failed) is no answer: in a turn the model is told so and
	// tries again, but here there is no turn left, and the variable's name
	// must not pass for the answer. The run ends as a forced reply without
	// a usable FINAL does: the whole reply, marked NoFinal, and MissingVar
	// says why.
	res := n.finish(0, reply, SourceForced)
	res.NoFinal, res.MissingVar = true, f.Value
	return res, nil
}

func (r *run) call(n *node, caller string, msgs []llm.Message) (llm.Response, error) {
	return n.call(0, caller, n.model, r.system(), msgs)
}

// jsonText renders a variable's JSON: a string unquoted, anything else as
// compact JSON.
func jsonText(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}
