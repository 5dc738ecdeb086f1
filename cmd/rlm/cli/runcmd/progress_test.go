package runcmd

import (
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

func TestProgressStatusLine(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, false, false)
	if p.live {
		t.Fatal("a buffer is not a terminal")
	}
	p.live = true // as on a terminal
	p.start()
	p.event(engine.Event{Type: engine.EventIteration, Iteration: 3, Depth: 0})
	p.event(engine.Event{Type: engine.EventIteration, Iteration: 1, Depth: 1})
	p.event(engine.Event{Type: engine.EventLLMCall, Depth: 1, Response: &llm.Response{},
		Totals: &engine.Usage{InputTokens: 12000, OutputTokens: 345, CostUSD: 0.0123}})
	p.event(engine.Event{Type: engine.EventBudgetWarning, Message: "80% of the cost budget used"})
	p.stop()
	out := b.String()
	for _, want := range []string{"iteration 3 · depth 1 · 12k tokens · $0.0123 · ", "rlm: warning: 80% of the cost budget used\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("status line not cleared: %q", out)
	}
}

func TestProgressQuietAndVerbose(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, true, false)
	p.start()
	p.event(engine.Event{Type: engine.EventIteration, Iteration: 1})
	p.stop()
	if b.Len() != 0 {
		t.Fatalf("quiet wrote %q", b.String())
	}
	p = newProgress(&b, false, true)
	p.start()
	p.event(engine.Event{Type: engine.EventCode, Depth: 1, Node: 2, Block: 1, Code: "print(1)", Output: "1",
		Result: &engine.CodeResult{EndedBy: "exit", DurationMs: 3}})
	p.stop()
	if !strings.Contains(b.String(), "  code block 1 (exit, 3 ms): print(1) → 1\n") {
		t.Fatalf("verbose wrote %q", b.String())
	}
}
