package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// Runs: POST /runs (and MCP's rlm_run) start a Recursive Language Model
// loop (core/engine) on this server, the loop `rlm run` drives on the
// command line, and stream its events as they happen.
//
// The model, and with it the API key, is the server's (RunsConfig.LLM,
// what `rlm serve --provider` gives its sessions): a request may only
// name one of the models the operator allows. The loop's REPL sessions
// are the server's sessions (same runtime, limits, isolation), and each
// root code block takes a run slot as a session cell does, so runs share the
// slots and queue with everything else; waiting for the model takes none.
// A run's budget is the request's, each part capped by the operator's.
// (A child loop's blocks run on the slot of the root's block that waits
// for it: see runSandbox.)

// RunsConfig lets a Server run RLM loops. Nil Config.Runs: POST /runs is
// answered 501, saying how the operator turns runs on.
type RunsConfig struct {
	// LLM is the server's model: the provider, the default model, the
	// models a request may choose, and the operator's caps (Budget:
	// tokens, cost and model calls of one run; MaxCallTokens of each
	// reply).
	LLM *engine.SessionLLM
	// Defaults is a run's budget when the request gives none of a part
	// (rlm.toml's [run] table): iterations, depth, errors. Its tokens,
	// cost and time are defaults too, never above the caps.
	Defaults engine.Budget
	// MaxOutputChars is how much of a block's output the model sees
	// (default engine.DefaultMaxOutputChars).
	MaxOutputChars int
	// MaxRuns bounds the runs in progress (default 4); more are 429.
	MaxRuns int
	// Keep is how long a finished run stays readable (GET /runs/{id})
	// (default 10 min).
	Keep time.Duration
	// Heartbeat is the quiet spell after which a run's stream gets a line
	// {"type": "heartbeat"}, so that proxies and clients with an idle
	// timeout (nginx's is 60 s) keep it through a long model call
	// (default 15 s).
	Heartbeat time.Duration
	// Language is the runtime of the loop's REPL (default python).
	Language string
	// Priced says whether a cost cap can be enforced for a model (rlm
	// knows its price, or its provider reports each call's cost): a
	// request's max_cost_usd is refused for one that is not. Nil: every
	// model is taken as priced.
	Priced func(model string) bool
}

// RunRequest is the body of POST /runs (and rlm_run's arguments).
type RunRequest struct {
	// Task is what the model is asked; required.
	Task string `json:"task" jsonschema:"the question or task; the model sees it, never the context itself"`
	// Context becomes the REPL's variable context: a JSON string as text,
	// any other JSON value decoded (a list, a dict).
	Context json.RawMessage `json:"context,omitempty" jsonschema:"the input the model explores with code: a string, or any JSON value (a list or object becomes a Python list or dict)"`
	// Model drives the loop, SubcallModel answers llm_query: each one the
	// operator allows (default: the server's model).
	Model        string `json:"model,omitempty" jsonschema:"the model driving the loop, among those the server allows (default: the server's)"`
	SubcallModel string `json:"subcall_model,omitempty" jsonschema:"the model answering llm_query (default: model)"`
	// The budget; each part is capped by the server's (see GET /openapi.json).
	MaxIterations *int `json:"max_iterations,omitempty" jsonschema:"model turns per loop before a best answer is asked for"`
	MaxDepth      *int `json:"max_depth,omitempty" jsonschema:"deepest rlm_query recursion; 0 disables it (with protocol reference, the reference's max_depth, which counts the root: 1 is no recursion, its default)"`
	// Protocol is "rlm" (the default: FINAL, rlm_query(task, ctx)) or
	// "reference" (the reference implementation's answer dict,
	// rlm_query(prompt, model) and max_depth): engine/protocol.go.
	Protocol       string   `json:"protocol,omitempty" jsonschema:"rlm (default) or reference"`
	MaxErrors      *int     `json:"max_errors,omitempty" jsonschema:"failed code blocks in a row before a best answer is asked for"`
	MaxTokens      *int64   `json:"max_tokens,omitempty" jsonschema:"token cap of the whole run, sub-calls included"`
	MaxCostUSD     *float64 `json:"max_cost_usd,omitempty" jsonschema:"cost cap of the whole run in US dollars"`
	MaxTimeSeconds *float64 `json:"max_time_seconds,omitempty" jsonschema:"wall-time cap of the whole run in seconds"`
	// Keep keeps the run's REPL and history after it ends, for a later
	// run to continue (runskept.go); Continue is that earlier run's id.
	Keep     bool   `json:"keep,omitempty" jsonschema:"keep the run's REPL and history after it ends, for a run that continues it"`
	Continue string `json:"continue,omitempty" jsonschema:"the id of an ended run started with keep: this run continues its REPL and history"`
	// Stream false answers with the final RunStatus only (POST /runs).
	Stream *bool `json:"stream,omitempty" jsonschema:"-"`
}

// Run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded" // an answer was found
	RunFailed    = "failed"    // no answer: see error_kind and error
	RunCancelled = "cancelled" // cancelled (POST /runs/{id}/cancel, DELETE, the client went away)
)

// RunStatus is GET /runs/{id}, the last line of POST /runs' stream (with
// "type": "result") and rlm_run's structured result.
type RunStatus struct {
	ID           string `json:"run_id"`
	Status       string `json:"status"`
	Task         string `json:"task"`
	Model        string `json:"model"`
	SubcallModel string `json:"subcall_model"`
	// Answer and AnswerSource are engine.Result's: the answer and how it
	// was given (final, final_var, forced).
	Answer       string `json:"answer"`
	AnswerSource string `json:"answer_source"`
	NoFinal      bool   `json:"no_final,omitempty"`
	MissingVar   string `json:"missing_var,omitempty"`
	// Usage is the run's, sub-calls included (so far, while running);
	// UsageByModel splits its model calls by the model asked for.
	Usage        engine.Usage          `json:"usage"`
	UsageByModel map[string]ModelUsage `json:"usage_by_model"`
	// Error says why there is no answer; ErrorKind is budget, provider,
	// sandbox, cancelled or internal, and BudgetKind (tokens, cost, time)
	// which budget ran out.
	Error      string    `json:"error,omitempty"`
	ErrorKind  string    `json:"error_kind,omitempty"`
	BudgetKind string    `json:"budget_kind,omitempty"`
	Created    time.Time `json:"created"`
	// Events is how many events the run has emitted.
	Events int `json:"events"`
}

// ModelUsage is one model's share of a run.
type ModelUsage struct {
	Calls        int     `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Error codes of runs.
const (
	CodeRunsDisabled = "runs_disabled"
	CodeRunNotFound  = "run_not_found"
	CodeTooManyRuns  = "too_many_runs"
)

// runsOff is the answer of a server without RunsConfig.
func runsOff() *APIError {
	return apiErr(http.StatusNotImplemented, CodeRunsDisabled,
		"this server runs no RLM loops: its operator gives it a model with --provider (and --model, --base-url), or [run] provider in rlm.toml")
}

// StartRun checks req, starts its loop and returns it at once; the loop
// ends with ctx (a client that goes away cancels its run), with Cancel, or
// when it has its answer. Errors are *APIError, as POST /runs answers them.
func (s *Server) StartRun(ctx context.Context, req *RunRequest) (*Run, error) {
	r, e := s.startRun(ctx, req)
	if e != nil {
		return nil, e
	}
	return r, nil
}

func (s *Server) startRun(ctx context.Context, req *RunRequest) (*Run, *APIError) {
	if s.cfg.Runs == nil {
		return nil, runsOff()
	}
	opts, c, e := s.runOptions(req)
	if e != nil {
		return nil, e
	}
	if s.draining.Load() {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	}
	table := s.runs()
	var cv *engine.Conversation
	giveBack := func() {
		if cv != nil {
			_ = cv.Close()
		}
	}
	if req.Continue != "" {
		if cv, giveBack, e = s.takeConversation(req.Continue, req); e != nil {
			return nil, e
		}
	} else if req.Keep {
		cv = &engine.Conversation{}
	}
	run, ok := table.add(req.Task, opts.Model, opts.SubcallModel)
	if !ok {
		giveBack()
		return nil, &APIError{Status: http.StatusTooManyRequests, Code: CodeTooManyRuns, RetryAfter: s.retryAfter(),
			Message: fmt.Sprintf("the server already has its maximum of %d runs in progress: wait for one to end, or cancel one (POST /runs/{id}/cancel)", table.max)}
	}
	opts.OnEvent = run.record
	eng, err := engine.New(opts)
	if err != nil {
		run.finish(nil, err)
		giveBack()
		return nil, apiErr(http.StatusInternalServerError, CodeInternal, err.Error())
	}
	rctx, cancel := context.WithCancel(ctx)
	run.mu.Lock()
	run.cancel = cancel
	run.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		// The server stopping (Close) ends the run too.
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-rctx.Done():
			}
		}()
		res, err := eng.RunIn(rctx, req.Task, c, cv)
		// Kept before the run is seen to end, so that a client that
		// continues it at once finds its conversation.
		run.keepOrClose(cv, req.Keep && rctx.Err() == nil)
		run.finish(res, err)
	}()
	return run, nil
}

// runOptions checks a request and builds the engine's options: the model
// and budget, capped by the operator's, and a sandbox of this server's.
func (s *Server) runOptions(req *RunRequest) (engine.Options, *core.Context, *APIError) {
	rc := s.cfg.Runs
	var o engine.Options
	if strings.TrimSpace(req.Task) == "" {
		return o, nil, badField("task", "is required: the question or task the model works on")
	}
	lang := Canonical(cmp.Or(rc.Language, "python"))
	if _, ok := s.slots[lang]; !ok {
		return o, nil, apiErr(http.StatusNotImplemented, CodeRunsDisabled,
			"runs need the "+lang+" runtime for their REPL, and this server does not serve it: its operator adds it to --mode")
	}
	lm := rc.LLM
	for _, m := range []struct{ field, name string }{{"model", req.Model}, {"subcall_model", req.SubcallModel}} {
		if err := lm.Check(m.name); err != nil {
			return o, nil, badField(m.field, "%s", err.Error())
		}
	}
	c, e := requestContext(req.Context)
	if e != nil {
		return o, nil, e
	}
	b, e := s.runBudget(req)
	if e != nil {
		return o, nil, e
	}
	if err := engine.CheckProtocol(req.Protocol); err != nil {
		return o, nil, badField("protocol", "%v", err)
	}
	if req.Protocol == engine.ProtocolReference {
		// The reference's max_depth counts the root (1: no recursion, its
		// default); the engine's counts the levels of children.
		b.MaxDepth = 0
		if req.MaxDepth != nil {
			if *req.MaxDepth < 1 {
				return o, nil, badField("max_depth", "with protocol reference, max_depth counts the root: 1 is no recursion, 2 one level of children; got %d", *req.MaxDepth)
			}
			b.MaxDepth = *req.MaxDepth - 1
		}
	}
	o = engine.Options{
		Protocol:         req.Protocol,
		Provider:         &countedProvider{Provider: lm.Provider, max: lm.Budget.MaxCalls},
		Model:            cmp.Or(req.Model, lm.Model),
		Sandbox:          s.runSandbox(lang),
		Budget:           b,
		CellLimits:       s.sessionLimits(),
		MaxOutputChars:   rc.MaxOutputChars,
		MaxConcurrent:    lm.MaxConcurrent,
		MaxTokensPerCall: lm.Budget.MaxCallTokens,
		Record:           engine.RunConfig{Provider: lm.ProviderName, Extra: map[string]string{"via": "server"}},
	}
	o.SubcallModel = cmp.Or(req.SubcallModel, req.Model, lm.Model)
	return o, c, nil
}

// runBudget is the request's budget over the defaults, each part within
// the operator's cap: a request may ask for less, never for more.
func (s *Server) runBudget(req *RunRequest) (engine.Budget, *APIError) {
	rc := s.cfg.Runs
	b := rc.Defaults
	caps := rc.LLM.Budget
	maxTime := s.cfg.MaxTimeout
	if b.MaxTime <= 0 || b.MaxTime > maxTime {
		b.MaxTime = maxTime
	}
	if caps.MaxTokens > 0 && (b.MaxTokens <= 0 || b.MaxTokens > caps.MaxTokens) {
		b.MaxTokens = caps.MaxTokens
	}
	if caps.MaxCostUSD > 0 && (b.MaxCostUSD <= 0 || b.MaxCostUSD > caps.MaxCostUSD) {
		b.MaxCostUSD = caps.MaxCostUSD
	}
	nonNeg := func(field string, v *int, least int, dst *int) *APIError {
		if v == nil {
			return nil
		}
		if *v < least {
			return badField(field, "must be at least %d, got %d", least, *v)
		}
		*dst = *v
		return nil
	}
	for _, e := range []*APIError{
		nonNeg("max_iterations", req.MaxIterations, 1, &b.MaxIterations),
		nonNeg("max_depth", req.MaxDepth, 0, &b.MaxDepth),
		nonNeg("max_errors", req.MaxErrors, 0, &b.MaxErrors),
	} {
		if e != nil {
			return b, e
		}
	}
	if v := req.MaxTokens; v != nil {
		if *v <= 0 {
			return b, badField("max_tokens", "must be positive, got %d (omit it for the server's)", *v)
		}
		if caps.MaxTokens > 0 && *v > caps.MaxTokens {
			return b, badField("max_tokens", "%d is over this server's cap of %d tokens a run: ask for less, or ask the operator for a larger --max-tokens", *v, caps.MaxTokens)
		}
		b.MaxTokens = *v
	}
	if v := req.MaxCostUSD; v != nil {
		if !(*v > 0) || math.IsInf(*v, 0) {
			return b, badField("max_cost_usd", "must be a positive number of dollars, got %v (omit it for the server's)", *v)
		}
		if caps.MaxCostUSD > 0 && *v > caps.MaxCostUSD {
			return b, badField("max_cost_usd", "$%g is over this server's cap of $%g a run: ask for less, or ask the operator for a larger --max-cost", *v, caps.MaxCostUSD)
		}
		if rc.Priced != nil {
			for _, m := range []string{cmp.Or(req.Model, rc.LLM.Model), cmp.Or(req.SubcallModel, req.Model, rc.LLM.Model)} {
				if !rc.Priced(m) {
					return b, badField("max_cost_usd", "cannot be enforced: the server knows no price for model %q (its operator adds one under [pricing] in rlm.toml); drop max_cost_usd", m)
				}
			}
		}
		b.MaxCostUSD = *v
	}
	if v := req.MaxTimeSeconds; v != nil {
		if !(*v > 0) || math.IsInf(*v, 0) {
			return b, badField("max_time_seconds", "must be a positive number of seconds, got %v (omit it for the server's)", *v)
		}
		d := time.Duration(*v * float64(time.Second))
		if d > maxTime {
			return b, badField("max_time_seconds", "%v is over this server's cap of %gs (--max-timeout): ask for less", *v, maxTime.Seconds())
		}
		b.MaxTime = d
	}
	if b.MaxIterations <= 0 {
		b.MaxIterations = engine.DefaultMaxIterations
	}
	return b, nil
}

// runSandbox opens the loop's REPL sessions as POST /sessions opens one
// (the server's runtime, limits and isolation). The root loop's blocks
// each take a run slot, as a session cell does. A child loop (rlm_query)
// runs while the root's block waits for it, on the slot that block holds:
// were its blocks to wait for a slot of their own, a server with one slot
// would have the child wait for its parent, which waits for the child. So
// the first session a run opens (the root's) is slotted, the others not.
// One factory serves one run.
func (s *Server) runSandbox(lang string) core.SandboxFactory {
	var opened atomic.Int64
	return func(ctx context.Context, so core.SessionOptions) (core.Session, error) {
		so.Runtime = lang
		sess, err := withRuntime(ctx, s.slots[lang], func(rt *client.Runtime) (core.Session, error) {
			return rt.OpenSession(ctx, so)
		})
		if err != nil {
			return nil, err
		}
		if opened.Add(1) > 1 {
			return sess, nil
		}
		return &slottedSession{Session: sess, s: s}, nil
	}
}

// slottedSession takes a run slot for each cell. It waits for one as long
// as the run may last (its context's deadline), without the queue's
// bound: a run cannot be answered 429 halfway, and a full server only
// slows it down.
type slottedSession struct {
	core.Session
	s *Server
}

func (ss *slottedSession) Execute(ctx context.Context, code string, timeout time.Duration) (*core.Result, error) {
	wait := ss.s.cfg.MaxTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	release, err := ss.s.limit.acquireFor(ctx, wait, false)
	if err != nil {
		if errors.Is(err, errBusy) {
			return nil, fmt.Errorf("no run slot of %d freed before the run's time ran out", ss.s.cfg.MaxConcurrent)
		}
		return nil, err
	}
	defer release()
	return ss.Session.Execute(ctx, code, timeout)
}

// countedProvider fails a run's model calls past the operator's cap of
// calls (RunsConfig.LLM.Budget.MaxCalls), as a session's are.
type countedProvider struct {
	llm.Provider
	max int
	n   atomic.Int64
}

func (p *countedProvider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if p.max > 0 && p.n.Add(1) > int64(p.max) {
		return llm.Response{}, fmt.Errorf("this run's budget of %d model calls is used up (the server's --max-calls): ask the operator for a larger one", p.max)
	}
	return p.Provider.Complete(ctx, req)
}

// RunsEnabled says whether the server runs RLM loops (Config.Runs), so
// that a front end offers them only then (MCP's rlm_run).
func (s *Server) RunsEnabled() bool { return s.cfg.Runs != nil }
