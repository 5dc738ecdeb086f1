package traceview

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/engine"
)

// MaxText is the most characters (bytes) of one text the page embeds:
// a longer code block, output, reply or prompt keeps its head and tail
// with a note of what was left out. Outputs are already capped by the run
// (max_output_chars); this bounds what the run does not cap, such as an
// rlm_query fallback's prompt that carries a whole sub-context.
const MaxText = 256 << 10

// Page is what the HTML page shows: the trace reduced to a tree of loops,
// iterations, cells and sub-calls. Its JSON is embedded in the page.
type Page struct {
	Title        string            `json:"title"`
	Task         string            `json:"task"`
	Started      string            `json:"started,omitempty"`
	Provider     string            `json:"provider,omitempty"`
	Model        string            `json:"model,omitempty"`
	SubcallModel string            `json:"subcall_model,omitempty"`
	Budget       string            `json:"budget,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
	Context      string            `json:"context,omitempty"`

	// The run's end: Answer and Source (final, final_var, forced), How
	// the answer was given, or Error.
	Ended  bool   `json:"ended"`
	Answer string `json:"answer,omitempty"`
	Source string `json:"source,omitempty"`
	How    string `json:"how,omitempty"`
	Error  string `json:"error,omitempty"`
	// Totals is the run's usage: run_end's, or the last one seen
	// (TotalsPartial) when the trace ends early.
	Totals        *engine.Usage `json:"totals,omitempty"`
	TotalsPartial bool          `json:"totals_partial,omitempty"`

	// Notes say why the trace is incomplete.
	Notes  []string `json:"notes,omitempty"`
	Events int      `json:"events"`
	// Items counts the page's nodes (iterations, cells, sub-calls): a
	// small trace opens whole, a large one collapsed.
	Items int     `json:"items"`
	Loops []*Loop `json:"loops"`
}

// Stats are the tokens, cost and time of a node.
type Stats struct {
	In    int64   `json:"in"`
	Out   int64   `json:"out"`
	Cost  float64 `json:"cost"`
	Calls int     `json:"calls"`
	Ms    float64 `json:"ms"`
}

func (s *Stats) add(o Stats) {
	s.In += o.In
	s.Out += o.Out
	s.Cost += o.Cost
	s.Calls += o.Calls
	s.Ms += o.Ms
}

// Loop is one RLM loop: the root (0) or a child started by rlm_query.
type Loop struct {
	ID           int     `json:"id"`
	Parent       *int    `json:"parent,omitempty"`
	Depth        int     `json:"depth"`
	Task         string  `json:"task,omitempty"`
	ContextChars int     `json:"context_chars,omitempty"`
	Iters        []*Iter `json:"iters"`
	Done         bool    `json:"done"`
	Answer       string  `json:"answer,omitempty"`
	Source       string  `json:"source,omitempty"`
	Error        string  `json:"error,omitempty"`
	// Own is the loop's own model calls and code; Total adds its
	// children's. Ms of both is the loop's wall time, first event to last.
	Own   Stats `json:"own"`
	Total Stats `json:"total"`

	first, last time.Time
	cell        *Cell // the cell whose sub-calls are arriving
	byPrompt    map[string][]*Sub
}

// Iter is one model turn and the cells of its reply. N is 0 for the
// forced turn (the best answer asked for when iterations ran out).
type Iter struct {
	N        int      `json:"n"`
	Forced   bool     `json:"forced,omitempty"`
	Model    *Call    `json:"model,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Cells    []*Cell  `json:"cells,omitempty"`
	Final    *Final   `json:"final,omitempty"`
	Stats    Stats    `json:"stats"`
}

// Final is a loop's answer.
type Final struct {
	Answer string `json:"answer"`
	Source string `json:"source"`
	How    string `json:"how"`
}

// Call is one model call.
type Call struct {
	Caller   string  `json:"caller"`
	Model    string  `json:"model,omitempty"`
	Text     string  `json:"text"`
	In       int64   `json:"in"`
	Out      int64   `json:"out"`
	Cost     float64 `json:"cost"`
	Ms       float64 `json:"ms"`
	Attempts int     `json:"attempts,omitempty"`
}

// Cell is one code block and the sub-calls its code made. Running is set
// when the trace ends before the block's result.
type Cell struct {
	Block     int           `json:"block"`
	Code      string        `json:"code"`
	Output    string        `json:"output"`
	EndedBy   ending.Reason `json:"ended_by,omitempty"`
	Error     string        `json:"error,omitempty"`
	Ms        int64         `json:"ms"`
	TimedOut  bool          `json:"timed_out,omitempty"`
	StateLost bool          `json:"state_lost,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
	Running   bool          `json:"running,omitempty"`
	Subs      []*Sub        `json:"subs,omitempty"`
	Stats     Stats         `json:"stats"`
}

// Sub is a sub-call made from a cell: llm_query, or rlm_query (a child
// loop, or past the maximum depth one model call).
type Sub struct {
	Kind         string `json:"kind"`
	Prompt       string `json:"prompt"`
	Child        *int   `json:"child,omitempty"`
	ContextChars int    `json:"context_chars,omitempty"`
	Message      string `json:"message,omitempty"`
	Call         *Call  `json:"call,omitempty"`
	Answer       string `json:"answer,omitempty"`
	Source       string `json:"source,omitempty"`
	Error        string `json:"error,omitempty"`
	Done         bool   `json:"done"`
}

// Builder turns events, in trace order, into a [Page].
type Builder struct {
	p     Page
	loops map[int]*Loop
	subs  map[int]*Sub // by child loop
	last  *engine.Usage
}

// NewBuilder starts an empty page.
func NewBuilder() *Builder {
	return &Builder{loops: map[int]*Loop{}, subs: map[int]*Sub{}}
}

// Build reads a whole trace into a page; the report's notes become the
// page's notice.
func Build(evs []engine.Event, rep Report) *Page {
	b := NewBuilder()
	for _, ev := range evs {
		b.Add(ev)
	}
	return b.Page(rep.Notes()...)
}

func (b *Builder) loop(ev *engine.Event) *Loop {
	l := b.loops[ev.Node]
	if l == nil {
		l = &Loop{ID: ev.Node, Parent: ev.Parent, Depth: ev.Depth, byPrompt: map[string][]*Sub{}}
		if ev.Node == 0 {
			l.Task = b.p.Task
		}
		b.loops[ev.Node] = l
	}
	if !ev.Time.IsZero() {
		if l.first.IsZero() {
			l.first = ev.Time
		}
		l.last = ev.Time
	}
	return l
}

// iter is the loop's current iteration, made when an event needs one
// before any (a trace that starts in the middle).
func (l *Loop) iter() *Iter {
	if len(l.Iters) == 0 {
		l.Iters = append(l.Iters, &Iter{})
	}
	return l.Iters[len(l.Iters)-1]
}

// pending is the cell the next sub-call belongs to: sub-calls are traced
// while their cell runs, before the cell's own result.
func (l *Loop) pending() *Cell {
	if l.cell == nil {
		it := l.iter()
		l.cell = &Cell{Block: len(it.Cells) + 1, Running: true}
		it.Cells = append(it.Cells, l.cell)
	}
	return l.cell
}

func call(ev *engine.Event) *Call {
	c := &Call{Caller: ev.Caller, Ms: ev.LatencyMs}
	if r := ev.Response; r != nil {
		c.Model, c.Text, c.In, c.Out, c.Cost, c.Attempts = r.Model, capText(r.Text), r.Usage.InputTokens, r.Usage.OutputTokens, r.CostUSD, r.Attempts
	}
	if c.Model == "" && ev.Request != nil {
		c.Model = ev.Request.Model
	}
	return c
}

// Add adds one event. Events of unknown types are ignored, so that a
// newer rlm's trace still renders.
func (b *Builder) Add(ev engine.Event) {
	b.p.Events++
	if ev.Totals != nil {
		t := *ev.Totals
		b.last = &t
	}
	switch ev.Type {
	case engine.EventRunStart:
		b.start(&ev)
		return
	case engine.EventRunEnd:
		b.p.Ended = true
		b.p.Answer, b.p.Source, b.p.Error = capText(ev.Answer), ev.Source, ev.Error
		return
	case engine.EventIteration, engine.EventLLMCall, engine.EventLLMError, engine.EventCode,
		engine.EventSubcall, engine.EventSubcallEnd, engine.EventBudgetWarning, engine.EventWarning, engine.EventFinal:
	default:
		return
	}
	l := b.loop(&ev)
	switch ev.Type {
	case engine.EventIteration:
		l.Iters = append(l.Iters, &Iter{N: ev.Iteration})
		l.cell = nil
	case engine.EventLLMCall:
		c := call(&ev)
		switch ev.Caller {
		case "llm_query", "rlm_fallback":
			s := l.takeSub(ev.Caller, firstPrompt(&ev))
			s.Call, s.Answer, s.Done = c, c.Text, true
		case "forced":
			l.Iters = append(l.Iters, &Iter{Forced: true, Model: c})
			l.cell = nil
		default:
			l.iter().Model = c
			l.cell = nil
		}
	case engine.EventLLMError:
		switch ev.Caller {
		case "llm_query", "rlm_fallback":
			s := l.takeSub(ev.Caller, firstPrompt(&ev))
			s.Error, s.Done = ev.Error, true
		default:
			it := l.iter()
			if ev.Caller == "forced" {
				it = &Iter{Forced: true}
				l.Iters = append(l.Iters, it)
			}
			it.Errors = append(it.Errors, ev.Error)
		}
	case engine.EventCode:
		c := l.cell
		l.cell = nil
		if c == nil {
			it := l.iter()
			c = &Cell{}
			it.Cells = append(it.Cells, c)
		}
		c.Block, c.Code, c.Output, c.Running = ev.Block, capText(ev.Code), capText(ev.Output), false
		if r := ev.Result; r != nil {
			c.EndedBy, c.Error, c.Ms, c.TimedOut, c.StateLost, c.Truncated = r.EndedBy, capText(r.Error), r.DurationMs, r.TimedOut, r.StateLost, r.Truncated
		}
	case engine.EventSubcall:
		cell := l.pending()
		s := &Sub{Kind: ev.Kind, Prompt: capText(ev.Prompt), Child: ev.Child, ContextChars: ev.ContextChars, Message: ev.Message, Error: ev.Error}
		if s.Error != "" {
			s.Done = true
		}
		cell.Subs = append(cell.Subs, s)
		switch {
		case ev.Child != nil:
			b.subs[*ev.Child] = s
		case s.Error == "":
			// An llm_query's or a fallback's answer comes in a later
			// llm_call whose first message is the prompt.
			key := subKey(ev.Kind, ev.Prompt, ev.Message != "")
			l.byPrompt[key] = append(l.byPrompt[key], s)
		}
	case engine.EventSubcallEnd:
		if ev.Child != nil {
			if s := b.subs[*ev.Child]; s != nil {
				s.Answer, s.Source, s.Error, s.Done = capText(ev.Answer), ev.Source, ev.Error, true
			}
			if c := b.loops[*ev.Child]; c != nil && ev.Error != "" && c.Error == "" {
				c.Error = ev.Error
			}
		}
	case engine.EventBudgetWarning, engine.EventWarning:
		it := l.iter()
		it.Warnings = append(it.Warnings, ev.Message)
	case engine.EventFinal:
		it := l.iter()
		f := &Final{Answer: capText(ev.Answer), Source: ev.Source}
		f.How = how(ev.Source, it)
		it.Final = f
		l.Done, l.Answer, l.Source = true, f.Answer, f.Source
		l.cell = nil
	}
}

// subKey matches a sub-call with the model call that answers it. A
// fallback's call prompt is the task plus the context, so fallbacks match
// by order only.
func subKey(kind, prompt string, fallback bool) string {
	if fallback || kind == "rlm_fallback" {
		return "\x00fallback"
	}
	return prompt
}

// takeSub finds the sub-call a model call answers, or makes one when the
// trace lacks it.
func (l *Loop) takeSub(caller, prompt string) *Sub {
	key := subKey(caller, prompt, false)
	if q := l.byPrompt[key]; len(q) > 0 {
		l.byPrompt[key] = q[1:]
		return q[0]
	}
	kind := "llm_query"
	if caller == "rlm_fallback" {
		kind = "rlm_query"
	}
	s := &Sub{Kind: kind, Prompt: capText(prompt)}
	cell := l.pending()
	cell.Subs = append(cell.Subs, s)
	return s
}

// how says how a loop's answer was given.
func how(source string, it *Iter) string {
	where := fmt.Sprintf("iteration %d", it.N)
	if it.Forced {
		where = "the forced turn"
	}
	switch source {
	case engine.SourceFinal:
		return "FINAL(…) in " + where
	case engine.SourceFinalVar:
		if it.Model != nil {
			if f := engine.ParseReply(it.Model.Text).Final; f != nil && f.Var {
				return "FINAL_VAR(" + f.Value + ") in " + where
			}
		}
		return "FINAL_VAR in " + where
	case engine.SourceForced:
		return "forced: the model was asked for its best answer after its iterations or tries ran out"
	}
	return source
}

func (b *Builder) start(ev *engine.Event) {
	p := &b.p
	p.Task = capText(ev.Task)
	if l := b.loops[0]; l != nil && l.Task == "" {
		l.Task = p.Task
	}
	if !ev.Time.IsZero() {
		p.Started = ev.Time.UTC().Format("2006-01-02 15:04:05Z")
	}
	if c := ev.Config; c != nil {
		p.Provider, p.Model, p.SubcallModel, p.Extra = c.Provider, c.Model, c.SubcallModel, c.Extra
		bu := c.Budget
		s := fmt.Sprintf("%d iterations, depth %d", bu.MaxIterations, bu.MaxDepth)
		if bu.MaxTokens > 0 {
			s += fmt.Sprintf(", %d tokens", bu.MaxTokens)
		}
		if bu.MaxCostUSD > 0 {
			s += fmt.Sprintf(", $%.4f", bu.MaxCostUSD)
		}
		if bu.MaxTime > 0 {
			s += ", " + bu.MaxTime.String()
		}
		p.Budget = s
	}
	if c := ev.Context; c != nil {
		p.Context = fmt.Sprintf("%s, %d characters", c.Type, c.Chars)
	}
}

// Page finishes the page; notes say why the trace is incomplete.
func (b *Builder) Page(notes ...string) *Page {
	p := b.p
	p.Notes = notes
	if !p.Ended {
		p.Totals, p.TotalsPartial = b.last, b.last != nil
	} else if b.last != nil {
		p.Totals = b.last
	}
	if root := b.loops[0]; root != nil && root.Done {
		for _, it := range root.Iters {
			if it.Final != nil {
				p.How = it.Final.How
			}
		}
	}
	if p.Title = oneLine(p.Task, 80); p.Title == "" {
		p.Title = "rlm trace"
	}
	ids := make([]int, 0, len(b.loops))
	for id := range b.loops {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	p.Loops = make([]*Loop, 0, len(ids))
	for _, id := range ids {
		l := b.loops[id]
		if s := b.subs[id]; s != nil && l.Task == "" {
			l.Task, l.ContextChars = s.Prompt, s.ContextChars
		}
		p.Loops = append(p.Loops, l)
	}
	done := map[int]bool{}
	for _, id := range ids {
		b.total(b.loops[id], done, 0)
	}
	for _, l := range p.Loops {
		for _, it := range l.Iters {
			p.Items++
			for _, c := range it.Cells {
				p.Items += 1 + len(c.Subs)
			}
		}
	}
	return &p
}

// total computes a loop's stats, its children's first; depth guards
// against a cycle in a corrupt trace.
func (b *Builder) total(l *Loop, done map[int]bool, depth int) Stats {
	if done[l.ID] || depth > 1000 {
		return l.Total
	}
	done[l.ID] = true
	var own, total Stats
	for _, it := range l.Iters {
		var is Stats
		if m := it.Model; m != nil {
			is.add(Stats{In: m.In, Out: m.Out, Cost: m.Cost, Calls: 1, Ms: m.Ms})
			own.add(Stats{In: m.In, Out: m.Out, Cost: m.Cost, Calls: 1})
		}
		for _, c := range it.Cells {
			cs := Stats{Ms: float64(c.Ms)}
			for _, s := range c.Subs {
				switch {
				case s.Child != nil:
					if cl := b.loops[*s.Child]; cl != nil {
						ct := b.total(cl, done, depth+1)
						ct.Ms = 0 // the cell's duration already holds it
						cs.add(ct)
						total.add(ct)
					}
				case s.Call != nil:
					st := Stats{In: s.Call.In, Out: s.Call.Out, Cost: s.Call.Cost, Calls: 1}
					cs.add(st)
					own.add(st)
				}
			}
			c.Stats = cs
			is.add(cs)
		}
		it.Stats = is
	}
	if !l.first.IsZero() {
		own.Ms = float64(l.last.Sub(l.first).Microseconds()) / 1000
	}
	total.add(own)
	total.Ms = own.Ms
	l.Own, l.Total = own, total
	return total
}

// capText keeps the head and tail of a text longer than [MaxText].
func capText(s string) string {
	if len(s) <= MaxText {
		return s
	}
	head, tail := MaxText*3/4, MaxText/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + fmt.Sprintf("\n[… %d bytes left out of this page; the trace has them …]\n", t-head) + s[t:]
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// firstPrompt is the first message of an event's model request: what a
// sub-call was asked, which pairs its answer (or error) with its start.
func firstPrompt(ev *engine.Event) string {
	if ev.Request != nil && len(ev.Request.Messages) > 0 {
		return ev.Request.Messages[0].Content
	}
	return ""
}
