package reftrace

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// ErrNoRunStart is the error of a trace without its run_start event
// (the run's task and configuration), which export needs.
var ErrNoRunStart = errors.New("the trace has no run_start event: it is not the trace of a run (rlm run --trace FILE writes one)")

// Exportable says whether evs can be exported (nil) or why not.
func Exportable(evs []engine.Event) error {
	for _, ev := range evs {
		if ev.Type == engine.EventRunStart {
			return nil
		}
	}
	return ErrNoRunStart
}

// Export writes evs (a trace, as `rlm run --trace` writes it) as the
// reference's log: the metadata line, then the root loop's iterations;
// child loops are nested in the sub-calls that started them.
func Export(w io.Writer, evs []engine.Event) error {
	x := newExporter(evs)
	if x.start == nil {
		return ErrNoRunStart
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	meta := x.metadata(0)
	meta.Type, meta.Timestamp = TypeMetadata, stamp(x.start.Time)
	ext := meta.RLM
	ext.Task, ext.Context = x.start.Task, x.start.Context
	ext.Node, ext.Depth = 0, 0
	if e := x.end; e != nil {
		ext.Answer, ext.Source, ext.Error, ext.Totals = e.Answer, e.Source, e.Error, e.Totals
		t := e.Time
		ext.End = &t
	}
	if err := enc.Encode(meta); err != nil {
		return err
	}
	for _, it := range x.node(0) {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

type exporter struct {
	start, end *engine.Event
	byNode     map[int][]*engine.Event
	ends       map[int]*engine.Event // subcall_end by child
}

func newExporter(evs []engine.Event) *exporter {
	x := &exporter{byNode: map[int][]*engine.Event{}, ends: map[int]*engine.Event{}}
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case engine.EventRunStart:
			if x.start == nil {
				x.start = ev
			}
		case engine.EventRunEnd:
			x.end = ev
		case engine.EventSubcallEnd:
			if ev.Child != nil {
				x.ends[*ev.Child] = ev
			}
			x.byNode[ev.Node] = append(x.byNode[ev.Node], ev)
		default:
			x.byNode[ev.Node] = append(x.byNode[ev.Node], ev)
		}
	}
	return x
}

// metadata is the run's configuration in the reference's terms, for the
// loop at depth.
func (x *exporter) metadata(depth int) Metadata {
	cfg := x.start.Config
	if cfg == nil {
		cfg = &engine.RunConfig{}
	}
	m := Metadata{
		RootModel:         cfg.Model,
		MaxDepth:          cfg.Budget.MaxDepth + 1,
		MaxIterations:     cfg.Budget.MaxIterations,
		Backend:           cfg.Provider,
		BackendKwargs:     map[string]any{"model_name": cfg.Model},
		EnvironmentType:   "rlm",
		EnvironmentKwargs: map[string]any{},
		RLM:               &RunExt{Config: cfg, Depth: depth},
	}
	for k, v := range cfg.Extra {
		m.EnvironmentKwargs[k] = v
	}
	if cfg.SubcallModel != "" && cfg.SubcallModel != cfg.Model {
		m.OtherBackends = []string{cfg.Provider}
		m.BackendKwargs["subcall_model_name"] = cfg.SubcallModel
	}
	return m
}

// node returns the iterations of loop id, its sub-calls (and child loops)
// inside the code blocks that made them.
func (x *exporter) node(id int) []Iteration {
	var (
		its      []Iteration
		cur      *Iteration
		began    time.Time
		last     time.Time
		pending  []ChatCompletion
		fallback []*engine.Event // rlm_query subcalls answered by one model call, in order
		seen     int             // the loop's events so far, warnings aside
		held     []Warning       // warnings before the first turn
	)
	flush := func() {
		if cur == nil {
			return
		}
		d := secs(last.Sub(began))
		cur.IterationTime = &d
		its = append(its, *cur)
		cur = nil
	}
	open := func(ev *engine.Event, rlmIt int, caller string) {
		flush()
		cur = &Iteration{Type: TypeIteration, Iteration: len(its) + 1, Timestamp: stamp(ev.Time), Prompt: Prompt{},
			CodeBlocks: []CodeBlock{}, RLM: &IterExt{Iteration: rlmIt, Caller: caller}}
		began, last = ev.Time, ev.Time
		cur.RLM.Warnings, held = held, nil
	}
	for _, ev := range x.byNode[id] {
		if ev.Type == engine.EventWarning || ev.Type == engine.EventBudgetWarning {
			w := Warning{At: seen, Event: *ev}
			if cur != nil {
				cur.RLM.Warnings = append(cur.RLM.Warnings, w)
			} else {
				held = append(held, w)
			}
			continue
		}
		seen++
		switch ev.Type {
		case engine.EventIteration:
			caller := "root"
			if ev.Depth > 0 {
				caller = "child"
			}
			open(ev, ev.Iteration, caller)
		case engine.EventLLMCall, engine.EventLLMError:
			switch ev.Caller {
			case "llm_query", "rlm_fallback":
				c := callOf(ev)
				if ev.Caller == "rlm_fallback" && len(fallback) > 0 {
					c.RLM.Kind, c.RLM.Task, c.RLM.ContextChars, c.RLM.Message = "rlm_query", fallback[0].Prompt, fallback[0].ContextChars, fallback[0].Message
					fallback = fallback[1:]
				}
				pending = append(pending, c)
			default:
				if ev.Caller == "forced" || cur == nil {
					open(ev, ev.Iteration, ev.Caller)
				}
				x.turn(cur, ev)
			}
		case engine.EventSubcall:
			switch {
			case ev.Kind != "rlm_query":
			case ev.Child != nil:
				pending = append(pending, x.child(ev))
			case ev.Error != "":
				msg := "Error: " + ev.Error
				pending = append(pending, ChatCompletion{Prompt: ev.Prompt, Response: msg, Error: &ev.Error,
					UsageSummary: UsageSummary{ModelUsageSummaries: map[string]ModelUsage{}},
					RLM:          &CallExt{Kind: "rlm_query", Caller: "refused", Task: ev.Prompt, ContextChars: ev.ContextChars}})
			default:
				fallback = append(fallback, ev)
			}
		case engine.EventCode:
			if cur == nil {
				open(ev, ev.Iteration, "root")
			}
			res := REPLResult{Stdout: ev.Output, Locals: map[string]any{}, RLMCalls: pending,
				RLM: &BlockExt{Block: ev.Block, Result: ev.Result}}
			if res.RLMCalls == nil {
				res.RLMCalls = []ChatCompletion{}
			}
			if r := ev.Result; r != nil {
				res.Stderr = r.Error
				res.ExecutionTime = float64(r.DurationMs) / 1000
			}
			pending = nil
			cur.CodeBlocks = append(cur.CodeBlocks, CodeBlock{Code: ev.Code, Result: res})
		case engine.EventFinal:
			if cur == nil {
				open(ev, ev.Iteration, "root")
			}
			a := Final(ev.Answer)
			cur.FinalAnswer = &a
			cur.RLM.Source = ev.Source
		}
		if cur != nil {
			last = ev.Time // events are in the order they happened
		}
	}
	flush()
	if len(held) > 0 && len(its) > 0 {
		last := its[len(its)-1].RLM
		last.Warnings = append(last.Warnings, held...)
	}
	return its
}

// turn fills it with the model call of a loop's turn.
func (x *exporter) turn(it *Iteration, ev *engine.Event) {
	it.RLM.Iteration, it.RLM.Caller = ev.Iteration, ev.Caller
	if req := ev.Request; req != nil {
		if req.System != "" {
			it.Prompt = append(it.Prompt, Message{Role: "system", Content: req.System})
		}
		for _, m := range req.Messages {
			it.Prompt = append(it.Prompt, Message(m))
		}
		r := *req
		r.System, r.Messages = "", nil
		it.RLM.Request = &r
	}
	if ev.Type == engine.EventLLMError {
		it.RLM.Error = ev.Error
		return
	}
	if resp := ev.Response; resp != nil {
		it.Response = resp.Text
		r := *resp
		r.Text = ""
		it.RLM.Response = &r
	}
	it.RLM.LatencyMs = ev.LatencyMs
}

// callOf is a plain model call made from code (llm_query, or rlm_query
// past the maximum depth).
func callOf(ev *engine.Event) ChatCompletion {
	c := ChatCompletion{UsageSummary: UsageSummary{ModelUsageSummaries: map[string]ModelUsage{}},
		RLM: &CallExt{Kind: "llm_query", Caller: ev.Caller, LatencyMs: ev.LatencyMs}}
	if req := ev.Request; req != nil {
		c.RootModel = req.Model
		if len(req.Messages) > 0 {
			c.Prompt = req.Messages[len(req.Messages)-1].Content
		}
		r := *req
		r.Messages = nil
		c.RLM.Request = &r
	}
	if ev.Type == engine.EventLLMError {
		msg := ev.Error
		c.Error = &msg
		c.Response = "Error: " + msg
		return c
	}
	if resp := ev.Response; resp != nil {
		c.Response = resp.Text
		c.ExecutionTime = ev.LatencyMs / 1000
		c.UsageSummary = summary(c.RootModel, []llm.Response{*resp})
		c.PromptTokens, c.CompletionTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
		r := *resp
		r.Text = ""
		c.RLM.Response = &r
	}
	return c
}

// child is an rlm_query that started a loop: its answer, and the loop's
// trajectory with the usage of every model call under it.
func (x *exporter) child(ev *engine.Event) ChatCompletion {
	id := *ev.Child
	meta := x.metadata(ev.Depth + 1)
	meta.RLM.Config = nil
	meta.RLM.Node = id
	traj := &Trajectory{RunMetadata: meta, Iterations: x.node(id)}
	c := ChatCompletion{RootModel: meta.RootModel, Prompt: ev.Prompt, Metadata: traj,
		RLM: &CallExt{Kind: "rlm_query", Caller: "child", Task: ev.Prompt, ContextChars: ev.ContextChars}}
	var resps []llm.Response
	x.responses(id, &resps)
	c.UsageSummary = summary(meta.RootModel, resps)
	for _, r := range resps {
		c.PromptTokens += r.Usage.InputTokens
		c.CompletionTokens += r.Usage.OutputTokens
	}
	if end := x.ends[id]; end != nil {
		c.Response, c.RLM.Source = end.Answer, end.Source
		c.ExecutionTime = secs(end.Time.Sub(ev.Time))
		if end.Error != "" {
			msg := end.Error
			c.Error = &msg
			c.Response = "Error: Child RLM completion failed - " + msg
		}
	}
	return c
}

// responses collects the model responses of loop id and its children.
func (x *exporter) responses(id int, out *[]llm.Response) {
	for _, ev := range x.byNode[id] {
		switch {
		case ev.Type == engine.EventLLMCall && ev.Response != nil:
			r := *ev.Response
			if r.Model == "" && ev.Request != nil {
				r.Model = ev.Request.Model
			}
			*out = append(*out, r)
		case ev.Type == engine.EventSubcall && ev.Child != nil:
			x.responses(*ev.Child, out)
		}
	}
}

// summary is the reference's usage summary of some responses, by model.
func summary(model string, resps []llm.Response) UsageSummary {
	s := UsageSummary{ModelUsageSummaries: map[string]ModelUsage{}}
	var total float64
	for _, r := range resps {
		name := r.Model
		if name == "" {
			name = model
		}
		u := s.ModelUsageSummaries[name]
		u.TotalCalls++
		u.TotalInputTokens += r.Usage.InputTokens
		u.TotalOutputTokens += r.Usage.OutputTokens
		if r.CostUSD > 0 {
			c := r.CostUSD
			if u.TotalCost != nil {
				c += *u.TotalCost
			}
			u.TotalCost = &c
			total += r.CostUSD
		}
		s.ModelUsageSummaries[name] = u
	}
	if total > 0 {
		s.TotalCost = &total
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format(timeFormat) }

// secs is d in seconds to the microsecond, the precision of the
// reference's timestamps (so that a log re-imported exports the same).
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }

// dur is the inverse of secs.
func dur(s float64) time.Duration { return time.Duration(math.Round(s*1e6)) * time.Microsecond }
