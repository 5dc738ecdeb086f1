package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// BaselineCaller is the caller a baseline call carries ([llm.CallInfo]):
// a replay transcript answers the baseline from the calls recorded under
// it, and the loop's turns from those recorded as "root".
const BaselineCaller = "baseline"

// CharsPerToken converts a model's window in tokens to the characters of
// context the baseline is given (a rough average for English text).
const CharsPerToken = 4

// Runner runs tasks through the RLM loop and the baseline.
type Runner struct {
	// Engine is the RLM loop's configuration (provider, models, sandbox,
	// budget); Trace and OnEvent are set per task from TraceTo.
	Engine engine.Options
	// WindowChars is how much of the context the baseline is given.
	WindowChars int
	// TraceTo, when set, returns the writer a task's trace goes to.
	TraceTo func(Task) (io.WriteCloser, error)
	// SkipBaseline runs the RLM loop only.
	SkipBaseline bool
}

// Outcome is one task's two runs.
type Outcome struct {
	Task     Task         `json:"task"`
	RLM      Attempt      `json:"rlm"`
	Baseline *Attempt     `json:"baseline,omitempty"`
	Usage    engine.Usage `json:"rlm_usage"`
}

// Attempt is one way of answering a task.
type Attempt struct {
	Answer       string  `json:"answer"`
	Score        float64 `json:"score"`
	Error        string  `json:"error,omitempty"`
	Calls        int     `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	Unpriced     bool    `json:"unpriced,omitempty"`
	// Cut is how many characters of context the baseline did not get.
	Cut int `json:"context_cut,omitempty"`
}

// Run answers t both ways. A run that fails (a budget, the provider)
// scores 0 and says why; only the context's end stops it with an error.
func (r *Runner) Run(ctx context.Context, t Task) (Outcome, error) {
	out := Outcome{Task: t}
	opts := r.Engine
	// The trace says which task it ran.
	opts.Record.Extra = maps.Clone(opts.Record.Extra)
	if opts.Record.Extra == nil {
		opts.Record.Extra = map[string]string{}
	}
	opts.Record.Extra["bench_task"] = t.ID
	var trace io.WriteCloser
	if r.TraceTo != nil {
		w, err := r.TraceTo(t)
		if err != nil {
			return out, err
		}
		trace, opts.Trace = w, w
	}
	eng, err := engine.New(opts)
	if err != nil {
		return out, err
	}
	res, err := eng.Run(ctx, t.Question, &core.Context{Data: []byte(t.Context), Kind: "text"})
	if trace != nil {
		if cerr := trace.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writing the trace: %w", cerr)
		}
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	u := res.Usage
	out.Usage = u
	out.RLM = Attempt{Answer: res.Answer, Calls: u.Calls, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CostUSD: u.CostUSD, Unpriced: u.UnpricedCalls > 0}
	switch {
	case err != nil:
		out.RLM.Error = err.Error()
	case res.NoFinal:
		// As rlm run says (exit 3): the forced reply is no answer.
		out.RLM.Error = "the turns ran out and the forced answer had no FINAL(...): no answer"
	default:
		out.RLM.Score = Score(t, res.Answer)
	}
	if r.SkipBaseline {
		return out, nil
	}
	b, err := r.baseline(ctx, t)
	if err != nil {
		return out, err
	}
	out.Baseline = &b
	return out, nil
}

// baseline asks the model the question with the context in the prompt,
// cut to the window.
func (r *Runner) baseline(ctx context.Context, t Task) (Attempt, error) {
	o := r.Engine
	prompt, cut := BaselinePrompt(t, r.WindowChars)
	req := llm.Request{Model: o.Model, Messages: []llm.Message{{Role: "user", Content: prompt}},
		MaxTokens: o.MaxTokensPerCall, Temperature: o.Temperature}
	cctx := llm.WithCallInfo(ctx, llm.CallInfo{Depth: 0, Caller: BaselineCaller})
	resp, err := o.Provider.Complete(cctx, req)
	a := Attempt{Cut: cut}
	if err != nil {
		if ctx.Err() != nil {
			return a, ctx.Err()
		}
		a.Error = err.Error()
		return a, nil
	}
	var priced bool
	a.CostUSD, priced = llm.CallCost(o.Model, resp)
	a.Unpriced = !priced
	a.Answer, a.Calls = strings.TrimSpace(resp.Text), 1
	a.InputTokens, a.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	a.Score = Score(t, a.Answer)
	return a, nil
}

// BaselinePrompt is the baseline's prompt: the context, cut to window
// characters (its head kept, the cut said), then the question. It also
// returns how many characters were cut.
func BaselinePrompt(t Task, window int) (string, int) {
	c, cut := t.Context, 0
	if window > 0 && len(c) > window {
		cut = len(c) - window
		c = c[:window] + fmt.Sprintf("\n[… %d characters of the context cut: they do not fit in the window]", cut)
	}
	return "Here is the context:\n\n" + c + "\n\n" + t.Question, cut
}
