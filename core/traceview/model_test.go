package traceview

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

func load(t testing.TB, path string) *Page {
	t.Helper()
	evs, rep, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Build(evs, rep)
}

// The examples' transcripts are traces of real runs (recorded with
// --trace), so they are what the page must get right.
func TestBuildAggregate(t *testing.T) {
	p := load(t, "../../examples/aggregate/transcript.jsonl")
	if !p.Ended || p.Source != "final_var" || !strings.HasPrefix(p.Answer, "bug: 795") || len(p.Notes) != 0 {
		t.Fatalf("page: ended %v, %s %q, notes %v", p.Ended, p.Source, p.Answer, p.Notes)
	}
	if len(p.Loops) != 5 {
		t.Fatalf("%d loops, want 5", len(p.Loops))
	}
	root := p.Loops[0]
	cell := root.Iters[1].Cells[0]
	if len(cell.Subs) != 4 {
		t.Fatalf("the batching cell has %d sub-calls, want 4", len(cell.Subs))
	}
	for i, s := range cell.Subs {
		if s.Kind != "rlm_query" || s.Child == nil || *s.Child != i+1 || !s.Done || s.Source != "final_var" {
			t.Errorf("sub %d: %+v", i, s)
		}
		child := p.Loops[*s.Child]
		if child.Depth != 1 || child.Parent == nil || *child.Parent != 0 || !child.Done || child.Task != s.Prompt || len(child.Iters) != 2 {
			t.Errorf("loop %d: %+v", child.ID, child)
		}
	}
	// The tree's tokens add up to the run's totals.
	if root.Total.In != p.Totals.InputTokens || root.Total.Out != p.Totals.OutputTokens || root.Total.Calls != p.Totals.Calls {
		t.Errorf("tree totals %+v, run totals %+v", root.Total, *p.Totals)
	}
	if cell.Stats.Calls != 8 || cell.Stats.In == 0 {
		t.Errorf("the batching cell's stats %+v: want its four children's eight calls", cell.Stats)
	}
}

func TestBuildNeedle(t *testing.T) {
	p := load(t, "../../examples/needle/transcript.jsonl")
	if p.How != "FINAL_VAR(code) in iteration 4" || p.Answer != "7319-KESTREL" || p.Context != "a str, 3145731 characters" {
		t.Fatalf("how %q answer %q context %q", p.How, p.Answer, p.Context)
	}
	root := p.Loops[0]
	if len(p.Loops) != 1 || len(root.Iters) != 4 {
		t.Fatalf("%d loops, %d iterations", len(p.Loops), len(root.Iters))
	}
	sub := root.Iters[2].Cells[0].Subs
	if len(sub) != 1 || sub[0].Kind != "llm_query" || sub[0].Answer != "7319-KESTREL" || sub[0].Call == nil || sub[0].Call.Model != "claude-haiku-4-5" {
		t.Fatalf("llm_query sub-call: %+v", sub)
	}
	if root.Total.In != p.Totals.InputTokens || root.Total.Calls != 5 {
		t.Errorf("tree totals %+v, run totals %+v", root.Total, *p.Totals)
	}
}

// A trace cut while a cell's sub-call ran keeps the cell, marked running.
func TestBuildCutInCell(t *testing.T) {
	evs, _, err := ReadFile("../../examples/needle/transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// run_start .. the llm_query's subcall event (line 10).
	p := Build(evs[:10], Report{Events: 10})
	c := p.Loops[0].Iters[2].Cells[0]
	if !c.Running || len(c.Subs) != 1 || c.Subs[0].Done || p.Ended || !p.TotalsPartial {
		t.Fatalf("cell %+v, sub %+v, ended %v", c, c.Subs, p.Ended)
	}
	if notes := (Report{Events: 10}).Notes(); len(notes) != 1 {
		t.Errorf("notes %v", notes)
	}
}

func TestCapText(t *testing.T) {
	s := strings.Repeat("é", MaxText) // 2 bytes a rune
	c := capText(s)
	if len(c) > MaxText+100 || !strings.Contains(c, "bytes left out of this page") || !strings.HasPrefix(c, "éé") || !strings.HasSuffix(c, "éé") {
		t.Fatalf("capped to %d bytes", len(c))
	}
	if !utf8Valid(c) {
		t.Fatal("cut inside a rune")
	}
	if capText("short") != "short" {
		t.Fatal("short text changed")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestWriteSelfContained(t *testing.T) {
	evs := []engine.Event{
		{Type: engine.EventRunStart, Task: `<img src="http://127.0.0.1:9/x"></script><script>alert(1)</script>` + "\u2028"},
		{Type: engine.EventIteration, Iteration: 1},
		{Type: engine.EventCode, Iteration: 1, Block: 1, Code: "print('<link href=//x>')", Output: `<iframe src="https://127.0.0.1:9/"></iframe>`, Result: &engine.CodeResult{EndedBy: "exit"}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, Build(evs, Report{Events: 3})); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, "<script"); n != 2 {
		t.Errorf("%d <script elements, want 2 (data and viewer)", n)
	}
	if !strings.Contains(page, `http-equiv="Content-Security-Policy" content="default-src 'none';`) {
		t.Error("no Content-Security-Policy forbidding loads")
	}
	// Nothing outside the data may refer to another file or a host.
	// (The title holds the task, HTML-escaped: text, not a reference.)
	static := regexp.MustCompile(`(?s)<script type="application/json" id="trace-data">.*?</script>|<title>.*?</title>`).ReplaceAllString(page, "")
	for _, bad := range []string{"src=", "href=", "url(", "@import", "import(", "http://", "https://", "//cdn", "fetch(", "XMLHttpRequest", "<img", "<iframe", "<link"} {
		if strings.Contains(static, bad) {
			t.Errorf("the page outside its data holds %q", bad)
		}
	}
	for _, bad := range []string{"<img", "</script><script>", "\u2028"} {
		if strings.Contains(page, bad) {
			t.Errorf("trace text %q reached the page unescaped", bad)
		}
	}
}

// synth makes a trace of about n events: a root loop whose iterations
// each have a model reply and a cell with a long output; every tenth cell
// makes an llm_query, every 50th an rlm_query with a child loop of two
// iterations. It ends with a FINAL.
func synth(n int) []engine.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var evs []engine.Event
	at := func(ev engine.Event) {
		ev.Time = t0.Add(time.Duration(len(evs)) * time.Millisecond)
		evs = append(evs, ev)
	}
	usage := &engine.Usage{}
	call := func(node int, parent *int, depth, it int, caller, text string) {
		usage.InputTokens += 1000
		usage.OutputTokens += 50
		usage.Calls++
		u := *usage
		at(engine.Event{Type: engine.EventLLMCall, Node: node, Parent: parent, Depth: depth, Iteration: it, Caller: caller,
			Request:  &llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: text}}},
			Response: &llm.Response{Text: text, Model: "m", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 50}}, LatencyMs: 800, Totals: &u})
	}
	at(engine.Event{Type: engine.EventRunStart, Task: "synthetic task", Config: &engine.RunConfig{Model: "m", SubcallModel: "m"}, Context: &engine.CtxInfo{Kind: "text", Type: "str", Chars: 50 << 20}})
	child := 0
	for it := 1; len(evs) < n-3; it++ {
		at(engine.Event{Type: engine.EventIteration, Iteration: it})
		code := fmt.Sprintf("part = context[%d:%d]\nprint(len(part), part[:80])", it*1000, it*1000+1000)
		call(0, nil, 0, it, "root", fmt.Sprintf("Iteration %d: reading the next part.\n\n```repl\n%s\n```", it, code))
		if it%10 == 0 {
			at(engine.Event{Type: engine.EventSubcall, Kind: "llm_query", Prompt: fmt.Sprintf("summarise part %d", it)})
			call(0, nil, 0, 0, "llm_query", fmt.Sprintf("summarise part %d", it))
		}
		if it%50 == 0 {
			child++
			c, root := child, 0
			at(engine.Event{Type: engine.EventSubcall, Kind: "rlm_query", Child: &c, Prompt: fmt.Sprintf("dig into part %d", it), ContextChars: 1000})
			for ci := 1; ci <= 2; ci++ {
				at(engine.Event{Type: engine.EventIteration, Node: c, Parent: &root, Depth: 1, Iteration: ci})
				call(c, &root, 1, ci, "child", "looking\n```repl\nprint(1)\n```")
				at(engine.Event{Type: engine.EventCode, Node: c, Parent: &root, Depth: 1, Iteration: ci, Block: 1, Code: "print(1)", Output: "1", Result: &engine.CodeResult{EndedBy: "exit", DurationMs: 2}})
			}
			at(engine.Event{Type: engine.EventFinal, Node: c, Parent: &root, Depth: 1, Iteration: 2, Answer: "child answer", Source: "final"})
			at(engine.Event{Type: engine.EventSubcallEnd, Kind: "rlm_query", Child: &c, Answer: "child answer", Source: "final"})
		}
		out := fmt.Sprintf("1000 entry %06d marker-%d %s", it, it, strings.Repeat("lorem ipsum dolor sit amet ", 40))
		at(engine.Event{Type: engine.EventCode, Iteration: it, Block: 1, Code: code, Output: out, Result: &engine.CodeResult{EndedBy: "exit", DurationMs: 12}})
	}
	last := evs[len(evs)-1].Iteration
	at(engine.Event{Type: engine.EventIteration, Iteration: last + 1})
	call(0, nil, 0, last+1, "root", "FINAL(done)")
	u := *usage
	at(engine.Event{Type: engine.EventFinal, Iteration: last + 1, Answer: "done", Source: "final", Totals: &u})
	at(engine.Event{Type: engine.EventRunEnd, Answer: "done", Source: "final", Totals: &u})
	return evs
}

func TestSynth(t *testing.T) {
	evs := synth(5000)
	p := Build(evs, Report{Events: len(evs), Ended: true})
	if len(evs) < 5000 || !p.Ended || p.Answer != "done" || len(p.Loops) < 10 || p.Items < 1000 {
		t.Fatalf("%d events, %d loops, %d items", len(evs), len(p.Loops), p.Items)
	}
	if p.Loops[0].Total.Calls != p.Totals.Calls {
		t.Errorf("tree calls %d, run %d", p.Loops[0].Total.Calls, p.Totals.Calls)
	}
}

// BenchmarkBuildWrite5000 is the Go side of rlm trace view on a
// 5,000-event trace: reduce it to a page and write the HTML.
func BenchmarkBuildWrite5000(b *testing.B) {
	evs := synth(5000)
	var size int
	for i := 0; i < b.N; i++ {
		var buf bytes.Buffer
		if err := Write(&buf, Build(evs, Report{Events: len(evs), Ended: true})); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}
