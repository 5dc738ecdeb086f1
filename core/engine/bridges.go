package engine

import (
	"context"
	"fmt"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// The callbacks a loop's REPL session calls from code: llm_query and
// rlm_query (tools are in tools_host.go).

// llmQuery is the llm_query bridge of a loop.
func (n *node) llmQuery(_ context.Context, prompt, model string) (string, error) {
	r := n.r
	if err := r.meter.subcall(); err != nil {
		return "", err
	}
	if model == "" {
		model = r.o.SubcallModel
	}
	n.emit(Event{Type: EventSubcall, Kind: "llm_query", Prompt: prompt})
	if err := n.check(); err != nil {
		return "", err
	}
	sub := &node{r: r, id: n.id, parent: n.parent, depth: n.depth, ctx: n.ctx}
	resp, err := sub.call(0, "llm_query", model, "", []llm.Message{{Role: "user", Content: prompt}})
	if err != nil {
		return "", err
	}
	return resp.Text, nil
}

// rlmQuery is the rlm_query bridge: a child loop one level deeper; past
// the maximum depth an error the cell sees (rlm's protocol) or one plain
// model call on the prompt (the reference's). model, when set, drives the
// child loop (or answers the plain call).
func (n *node) rlmQuery(_ context.Context, task string, sub *string, model string) (string, error) {
	r := n.r
	if err := r.meter.subcall(); err != nil {
		return "", err
	}
	depth := n.depth + 1
	c := n.c
	if sub == nil && r.reference() {
		// The reference's child explores the prompt it is given.
		sub = &task
	}
	if sub != nil {
		c = &core.Context{Data: []byte(*sub), Kind: "text"}
	}
	chars := 0
	if c != nil {
		chars = len(c.Data)
	}
	if err := n.check(); err != nil {
		n.emit(Event{Type: EventSubcall, Kind: "rlm_query", Prompt: task, ContextChars: chars, Error: err.Error()})
		return "", err
	}
	if depth > r.o.Budget.MaxDepth && r.reference() {
		n.emit(Event{Type: EventSubcall, Kind: "rlm_query", Prompt: task,
			Message: fmt.Sprintf("depth %d is past the maximum %d: answered by one model call on the prompt", depth, r.o.Budget.MaxDepth)})
		if model == "" {
			model = r.o.SubcallModel
		}
		fb := &node{r: r, id: n.id, parent: n.parent, depth: n.depth, ctx: n.ctx}
		resp, err := fb.call(0, "rlm_fallback", model, "", []llm.Message{{Role: "user", Content: task}})
		if err != nil {
			return "", err
		}
		return resp.Text, nil
	}
	if depth > r.o.Budget.MaxDepth {
		// Never the whole context in one model call (it once sent 3 MB):
		// the model is told, and chooses what to ask llm_query.
		err := fmt.Errorf("rlm_query cannot start a child loop here: this loop is at depth %d and the maximum depth is %d (--max-depth); call llm_query(prompt) with the part of the context the question needs instead (it sees only what you pass it)", n.depth, r.o.Budget.MaxDepth)
		n.emit(Event{Type: EventSubcall, Kind: "rlm_query", Prompt: task, ContextChars: chars, Error: err.Error()})
		return "", err
	}
	r.meter.reachDepth(depth)
	child := int(r.nodes.Add(1))
	parent := n.id
	n.emit(Event{Type: EventSubcall, Kind: "rlm_query", Child: &child, Prompt: task, ContextChars: chars})
	res, err := r.loop(n.ctx, child, &parent, depth, task, c, nil, model)
	end := Event{Type: EventSubcallEnd, Kind: "rlm_query", Child: &child}
	if err != nil {
		end.Error = err.Error()
		n.emit(end)
		return "", err
	}
	end.Answer, end.Source = res.Answer, res.Source
	n.emit(end)
	return res.Answer, nil
}
