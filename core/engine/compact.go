package engine

import (
	"fmt"
	"strings"

	"github.com/rlmkit/rlm/core/llm"
)

// EventCompaction is a trace event: a loop's older turns were replaced by
// a summary (Options.CompactAfterChars). Message says how much.
const EventCompaction = "compaction"

// compactPrompt asks the loop's model to summarise its own older turns.
const compactPrompt = `The conversation below is the earlier part of your own work in a Python REPL on a task. It is too long to keep: write the summary you will continue from. Say what you learned about the context, which REPL variables you set and what they hold (they still exist), the partial results, and what remains to do. Be specific and brief; do not solve the task here.

`

// compact replaces msgs' older turns with a summary when the history is
// longer than Options.CompactAfterChars: the first message (the task and
// the context's description) keeps its place with the summary appended,
// and the last exchange stays as it was, so the roles still alternate and
// the model sees the output it is answering. The summary is one model
// call, counted against the budgets like any other (caller "compaction").
func (n *node) compact(it int, msgs []llm.Message) ([]llm.Message, error) {
	limit := n.r.o.CompactAfterChars
	if limit <= 0 || len(msgs) < 5 {
		return msgs, nil
	}
	total := 0
	for _, m := range msgs {
		total += len(m.Content)
	}
	if total <= limit {
		return msgs, nil
	}
	older := msgs[1 : len(msgs)-2]
	var b strings.Builder
	b.WriteString(compactPrompt)
	for _, m := range older {
		fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, m.Content)
	}
	sub := &node{r: n.r, id: n.id, parent: n.parent, depth: n.depth, ctx: n.ctx, model: n.model}
	resp, err := sub.call(it, "compaction", n.model, "", []llm.Message{{Role: "user", Content: b.String()}})
	if err != nil {
		return nil, err
	}
	summary := strings.TrimSpace(resp.Text)
	first := msgs[0]
	first.Content += "\n\nYour earlier turns were compacted. Your summary of them (the REPL and its variables are as you left them):\n" + summary
	out := append([]llm.Message{first}, msgs[len(msgs)-2:]...)
	after := 0
	for _, m := range out {
		after += len(m.Content)
	}
	n.emit(Event{Type: EventCompaction, Iteration: it,
		Message: fmt.Sprintf("%d older messages (%d characters of history) replaced by a summary: %d characters now", len(older), total, after)})
	return out, nil
}
