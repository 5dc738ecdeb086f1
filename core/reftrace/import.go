package reftrace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// Log is a reference log as read: its metadata line (nil when it has
// none, as the reference's visualizer allows) and its iterations.
type Log struct {
	Metadata   *Metadata
	Iterations []Iteration
}

// Read reads a reference log. Like the reference's visualizer, a line
// whose type is "metadata" is the configuration and any other line is an
// iteration; unlike it, a line that is not valid JSON is an error naming
// the line, since a converted trace missing a turn would mislead.
func Read(r io.Reader) (*Log, error) {
	var l Log
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var probe struct {
				Type string `json:"type"`
			}
			if jerr := json.Unmarshal(t, &probe); jerr != nil {
				return nil, fmt.Errorf("line %d is not JSON (%v): a reference log has one JSON object per line", n, jerr)
			}
			if probe.Type == TypeMetadata {
				var m Metadata
				if jerr := json.Unmarshal(t, &m); jerr != nil {
					return nil, fmt.Errorf("line %d: not the reference's metadata: %v", n, jerr)
				}
				l.Metadata = &m
			} else {
				var it Iteration
				if jerr := json.Unmarshal(t, &it); jerr != nil {
					return nil, fmt.Errorf("line %d: not a reference iteration: %v", n, jerr)
				}
				l.Iterations = append(l.Iterations, it)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if l.Metadata == nil && len(l.Iterations) == 0 {
		return nil, errors.New("the log is empty: a reference log has a metadata line and one line per iteration")
	}
	return &l, nil
}

// Import turns a reference log into rlm trace events: run_start, the
// loops' iterations, model calls, code blocks, sub-calls and child loops,
// answers, and run_end.
func Import(l *Log) []engine.Event {
	im := &importer{log: l, meta: l.Metadata, warnings: map[int][]Warning{}, seen: map[int]int{},
		parents: map[int]*int{}, depths: map[int]int{}}
	if im.meta == nil {
		im.meta = &Metadata{}
	}
	start := parseStamp(im.meta.Timestamp)
	if start.IsZero() && len(l.Iterations) > 0 {
		start = parseStamp(l.Iterations[0].Timestamp)
	}
	im.now = start
	ext := im.meta.RLM
	if ext == nil {
		ext = &RunExt{}
	}
	cfg := ext.Config
	if cfg == nil {
		cfg = &engine.RunConfig{Provider: im.meta.Backend, Model: im.meta.RootModel, SubcallModel: im.meta.RootModel,
			Budget:   engine.Budget{MaxIterations: im.meta.MaxIterations, MaxDepth: max(im.meta.MaxDepth-1, 0)},
			Protocol: engine.ProtocolReference, Extra: map[string]string{"imported_from": "reference log"}}
		if s, ok := im.meta.BackendKwargs["subcall_model_name"].(string); ok {
			cfg.SubcallModel = s
		}
	}
	im.cfg = cfg
	task, ctx := ext.Task, ext.Context
	if task == "" || ctx == nil {
		t, c := describeLog(l.Iterations)
		if task == "" {
			task = t
		}
		if ctx == nil {
			ctx = c
		}
	}
	im.add(engine.Event{Type: engine.EventRunStart, Time: start, Task: task, Config: cfg, Context: ctx})
	answer, source := im.loop(0, nil, 0, l.Iterations)
	end := engine.Event{Type: engine.EventRunEnd, Time: im.now, Answer: answer, Source: source}
	if ext.Config != nil {
		end.Answer, end.Source, end.Error = ext.Answer, ext.Source, ext.Error
	}
	totals := im.totals
	totals.DurationMs = im.now.Sub(start).Milliseconds()
	if ext.Totals != nil {
		totals = *ext.Totals
	}
	end.Totals = &totals
	if ext.End != nil {
		end.Time = *ext.End
	}
	im.add(end)
	return im.evs
}

type importer struct {
	log    *Log
	meta   *Metadata
	cfg    *engine.RunConfig
	evs    []engine.Event
	now    time.Time
	nodes  int // the highest node number given
	totals engine.Usage
	// Warnings waiting for their place in each loop, the loop's events
	// so far, and where each loop sits.
	warnings map[int][]Warning
	seen     map[int]int
	parents  map[int]*int
	depths   map[int]int
}

func (im *importer) add(ev engine.Event) {
	if ev.Time.IsZero() {
		ev.Time = im.now
	}
	im.now = ev.Time
	if ev.Type != engine.EventRunStart && ev.Type != engine.EventRunEnd {
		im.warn(ev.Node, im.seen[ev.Node])
		im.seen[ev.Node]++
	}
	im.evs = append(im.evs, ev)
}

// warn adds the warnings of loop node due before its event number at
// (all of them for -1).
func (im *importer) warn(node, at int) {
	ws := im.warnings[node]
	for len(ws) > 0 && (at < 0 || ws[0].At <= at) {
		w := ws[0].Event
		ws = ws[1:]
		w.Node, w.Parent, w.Depth = node, im.parents[node], im.depths[node]
		im.evs = append(im.evs, w)
	}
	im.warnings[node] = ws
}

// loop adds the events of one loop and returns its answer.
func (im *importer) loop(id int, parent *int, depth int, its []Iteration) (string, string) {
	at := func(ev engine.Event) engine.Event {
		ev.Node, ev.Parent, ev.Depth = id, parent, depth
		return ev
	}
	im.parents[id], im.depths[id] = parent, depth
	defer im.warn(id, -1)
	var answer, source string
	for i, it := range its {
		if it.RLM != nil {
			im.warnings[id] = append(im.warnings[id], it.RLM.Warnings...)
		}
		ext := it.RLM
		if ext == nil {
			ext = &IterExt{Iteration: i + 1, Caller: "root"}
			if depth > 0 {
				ext.Caller = "child"
			}
			if forcedTurn(it, i == len(its)-1) {
				ext.Iteration, ext.Caller = 0, "forced"
			}
		}
		t := parseStamp(it.Timestamp)
		if ext.Caller != "forced" {
			im.totals.Iterations++
			im.add(at(engine.Event{Type: engine.EventIteration, Time: t, Iteration: ext.Iteration}))
		} else if !t.IsZero() {
			im.now = t
		}
		im.add(at(im.turn(it, ext)))
		for b, blk := range it.CodeBlocks {
			for _, c := range blk.Result.RLMCalls {
				im.call(id, parent, depth, c)
			}
			im.add(at(codeEvent(ext.Iteration, b+1, blk)))
		}
		if it.FinalAnswer != nil {
			answer, source = string(*it.FinalAnswer), ext.Source
			if source == "" {
				source = logSource(it, ext.Caller == "forced")
			}
			tot := im.totals
			im.add(at(engine.Event{Type: engine.EventFinal, Iteration: ext.Iteration, Answer: answer, Source: source, Totals: &tot}))
		}
		if it.IterationTime != nil && !t.IsZero() {
			// The turn's last event ends it.
			im.now = t.Add(dur(*it.IterationTime))
			im.evs[len(im.evs)-1].Time = im.now
		}
	}
	return answer, source
}

// readyRe finds the statement that ends a reference run today:
// answer["ready"] = True (the reference dropped FINAL on 2026-05-13).
var readyRe = regexp.MustCompile(`answer\s*\[\s*["']ready["']\s*\]\s*=`)

// logSource says how a reference loop without rlm's extension finished,
// so that an imported run's answer_source matches what an rlm run of the
// same turns records: forced for the best-answer request, answer when a
// code block set answer["ready"], final otherwise (older logs' FINAL).
func logSource(it Iteration, forced bool) string {
	if forced {
		return engine.SourceForced
	}
	for _, b := range it.CodeBlocks {
		if readyRe.MatchString(b.Code) {
			return engine.SourceAnswer
		}
	}
	return engine.SourceFinal
}

// forcedTurn says whether a reference iteration is its best-answer request
// (_default_answer): the last one, no code, an answer, and a prompt
// ending with the assistant message asking for it.
func forcedTurn(it Iteration, last bool) bool {
	n := len(it.Prompt)
	return last && len(it.CodeBlocks) == 0 && it.FinalAnswer != nil && n > 0 && it.Prompt[n-1].Role == "assistant"
}

// turn is the model call of an iteration.
func (im *importer) turn(it Iteration, ext *IterExt) engine.Event {
	req := llm.Request{Model: im.cfg.Model, Messages: []llm.Message{}}
	if ext.Request != nil {
		req = *ext.Request
		req.Messages = []llm.Message{}
	}
	for i, m := range it.Prompt {
		if i == 0 && m.Role == "system" {
			req.System = m.Content
			continue
		}
		req.Messages = append(req.Messages, llm.Message(m))
	}
	ev := engine.Event{Type: engine.EventLLMCall, Iteration: ext.Iteration, Caller: ext.Caller, Request: &req, LatencyMs: ext.LatencyMs}
	if ext.Error != "" {
		ev.Type, ev.Error = engine.EventLLMError, ext.Error
		return ev
	}
	resp := llm.Response{Model: req.Model}
	if ext.Response != nil {
		resp = *ext.Response
	}
	resp.Text = it.Response
	ev.Response = &resp
	im.count(resp)
	tot := im.totals
	ev.Totals = &tot
	return ev
}

func (im *importer) count(r llm.Response) {
	im.totals.Calls++
	im.totals.InputTokens += r.Usage.InputTokens
	im.totals.OutputTokens += r.Usage.OutputTokens
	im.totals.CostUSD += r.CostUSD
	if r.CostUSD == 0 {
		im.totals.UnpricedCalls++ // the log gave no cost: unknown, not free
	}
}

// call adds one sub-call made from a code block of loop id.
func (im *importer) call(id int, parent *int, depth int, c ChatCompletion) {
	at := func(ev engine.Event) engine.Event {
		ev.Node, ev.Parent, ev.Depth = id, parent, depth
		return ev
	}
	ext := c.RLM
	if ext == nil {
		ext = &CallExt{Kind: "llm_query", Caller: "llm_query"}
		if c.Metadata != nil {
			ext.Kind, ext.Caller = "rlm_query", "child"
		}
	}
	prompt := promptText(c.Prompt)
	task := ext.Task
	if task == "" {
		task = prompt
	}
	im.totals.Subcalls++
	switch {
	case ext.Caller == "child" && c.Metadata != nil:
		im.nodes++
		child := im.nodes
		if n := c.Metadata.RunMetadata.RLM; n != nil && n.Node > 0 {
			child = n.Node
			im.nodes = max(im.nodes, child)
		}
		me := id
		im.totals.MaxDepthReached = max(im.totals.MaxDepthReached, depth+1)
		im.add(at(engine.Event{Type: engine.EventSubcall, Kind: "rlm_query", Child: &child, Prompt: task, ContextChars: ext.ContextChars}))
		began := im.now
		_, source := im.loop(child, &me, depth+1, c.Metadata.Iterations)
		// The call's response is the child's answer as its parent got it.
		end := engine.Event{Type: engine.EventSubcallEnd, Kind: "rlm_query", Child: &child, Answer: c.Response, Source: source}
		if ext.Source != "" {
			end.Source = ext.Source
		}
		if c.Error != nil {
			end.Answer, end.Source, end.Error = "", "", *c.Error
		}
		if c.ExecutionTime > 0 {
			end.Time = began.Add(dur(c.ExecutionTime))
		}
		im.add(at(end))
	case ext.Caller == "refused":
		msg := ""
		if c.Error != nil {
			msg = *c.Error
		}
		im.add(at(engine.Event{Type: engine.EventSubcall, Kind: "rlm_query", Prompt: task, ContextChars: ext.ContextChars, Error: msg}))
	default:
		if ext.Caller == "rlm_fallback" {
			im.add(at(engine.Event{Type: engine.EventSubcall, Kind: "rlm_query", Prompt: task, ContextChars: ext.ContextChars, Message: ext.Message}))
		} else {
			im.add(at(engine.Event{Type: engine.EventSubcall, Kind: "llm_query", Prompt: prompt}))
		}
		req := llm.Request{Model: c.RootModel}
		if ext.Request != nil {
			req = *ext.Request
		}
		req.Messages = []llm.Message{{Role: "user", Content: prompt}}
		ev := engine.Event{Type: engine.EventLLMCall, Caller: ext.Caller, Request: &req, LatencyMs: ext.LatencyMs}
		if c.Error != nil {
			ev.Type, ev.Error = engine.EventLLMError, *c.Error
			im.add(at(ev))
			return
		}
		var resp llm.Response
		if ext.Response != nil {
			resp = *ext.Response
		} else {
			resp = responseOf(c)
			ev.LatencyMs = c.ExecutionTime * 1000
		}
		resp.Text = c.Response
		im.count(resp)
		tot := im.totals
		ev.Response, ev.Totals = &resp, &tot
		im.add(at(ev))
	}
}

// responseOf is a plain sub-call's response from the reference's fields.
func responseOf(c ChatCompletion) llm.Response {
	r := llm.Response{Model: c.RootModel, Usage: llm.Usage{InputTokens: c.PromptTokens, OutputTokens: c.CompletionTokens}}
	if r.Usage == (llm.Usage{}) {
		for _, u := range c.UsageSummary.ModelUsageSummaries {
			r.Usage.InputTokens += u.TotalInputTokens
			r.Usage.OutputTokens += u.TotalOutputTokens
		}
	}
	if c.UsageSummary.TotalCost != nil {
		r.CostUSD = *c.UsageSummary.TotalCost
	}
	return r
}

// codeEvent is a block's code event. A reference block's stdout is what
// it printed and its stderr its error (a traceback); both are shown.
func codeEvent(it, block int, blk CodeBlock) engine.Event {
	res := blk.Result
	ev := engine.Event{Type: engine.EventCode, Iteration: it, Block: block, Code: blk.Code, Output: res.Stdout}
	if ext := res.RLM; ext != nil {
		ev.Block, ev.Result = ext.Block, ext.Result
		return ev
	}
	ev.Result = &engine.CodeResult{EndedBy: ending.Exit, Error: res.Stderr, DurationMs: int64(res.ExecutionTime * 1000)}
	if res.Stderr != "" {
		if ev.Output != "" && !strings.HasSuffix(ev.Output, "\n") {
			ev.Output += "\n"
		}
		ev.Output += "[stderr]\n" + res.Stderr
	}
	if ev.Output == "" {
		ev.Output = "(no output)"
	}
	return ev
}

func promptText(p any) string {
	if s, ok := p.(string); ok {
		return s
	}
	if p == nil {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

var (
	askedRe = regexp.MustCompile(`(?s)^Answer the following: (.*?)\n\nYour context is`)
	ctxRe   = regexp.MustCompile(`Your context is a (\w+) of (\d+) total characters`)
)

// describeLog recovers the task and the context's description from a
// reference log's first prompt, where the reference states them ("Answer
// the following: TASK", "Your context is a str of N total characters").
func describeLog(its []Iteration) (string, *engine.CtxInfo) {
	if len(its) == 0 {
		return "", nil
	}
	var task string
	var ctx *engine.CtxInfo
	for _, m := range its[0].Prompt {
		if m.Role != "user" {
			continue
		}
		if task == "" {
			if g := askedRe.FindStringSubmatch(m.Content); g != nil {
				task = g[1]
			}
		}
		if ctx == nil {
			if g := ctxRe.FindStringSubmatch(m.Content); g != nil {
				n, _ := strconv.Atoi(g[2])
				ctx = &engine.CtxInfo{Kind: "text", Chars: n, Type: g[1]}
			}
		}
	}
	if task == "" {
		task = "(imported from a reference RLM log; the task is in the first prompt)"
	}
	return task, ctx
}

func parseStamp(s string) time.Time {
	for _, f := range []string{timeFormat, time.RFC3339Nano, "2006-01-02T15:04:05.999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
