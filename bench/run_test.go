package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
	"github.com/rlmkit/rlm/core/llm/llmtest"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// pythonFactory launches the built python plugin once and opens engine
// sessions on it, as `rlm run` does with the native backend.
func pythonFactory(b *testing.B) core.SandboxFactory {
	realPython(b)
	p, err := launch.Launch(filepath.Join(binDir, "rlm-plugin-python"))
	if err != nil {
		b.Fatal(err)
	}
	rt := client.NewRuntime("python", "native", p.Client, p.Kill, isolate.Available)
	b.Cleanup(rt.Close)
	return func(ctx context.Context, o core.SessionOptions) (core.Session, error) {
		o.Runtime = "python"
		return rt.OpenSession(ctx, o)
	}
}

// scriptModel answers instantly from a function of the turn.
type scriptModel struct {
	reply func(turn int) string
}

func (scriptModel) Name() string { return "script" }

func (m scriptModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			turn++
		}
	}
	return llm.Response{Text: m.reply(turn), Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}, Model: req.Model, Attempts: 1}, nil
}

// keptSession is a session whose Close does nothing, so that runs reuse
// one warm REPL and the benchmark excludes the interpreter's start.
type keptSession struct{ core.Session }

func (keptSession) Close() error { return nil }

// BenchmarkRunIteration: one iteration of the RLM loop with a model that
// answers instantly and a trivial cell (`x = 1`) in the real python REPL,
// beside the bare cell round trip through the same session in the same
// run. The difference is what the engine adds to each turn. The session is
// opened once (its start, ~40 ms, is paid once per loop in real runs).
func BenchmarkRunIteration(b *testing.B) {
	open := pythonFactory(b)
	s, err := open(context.Background(), core.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	factory := func(context.Context, core.SessionOptions) (core.Session, error) { return keptSession{s}, nil }
	const iters = 20
	e, err := engine.New(engine.Options{
		Provider: scriptModel{reply: func(turn int) string {
			if turn >= iters {
				return "FINAL(done)"
			}
			return "```repl\nx = 1\n```"
		}},
		Model: "m", Sandbox: factory, Budget: engine.Budget{MaxIterations: iters + 1},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var loop, cell time.Duration
	var loops, cells int
	for b.Loop() {
		start := time.Now()
		res, err := e.Run(ctx, "t", nil)
		if err != nil || res.Answer != "done" {
			b.Fatal(err, res)
		}
		loop += time.Since(start)
		loops += iters + 1
		start = time.Now()
		for range iters + 1 {
			if r, err := s.Execute(ctx, "x = 1", 0); err != nil || r.Error != "" {
				b.Fatal(err, r)
			}
		}
		cell += time.Since(start)
		cells += iters + 1
	}
	perLoop := float64(loop.Microseconds()) / float64(loops)
	perCell := float64(cell.Microseconds()) / float64(cells)
	b.ReportMetric(perLoop, "µs/iteration")
	b.ReportMetric(perCell, "µs/bare-cell")
	b.ReportMetric(perLoop-perCell, "µs/engine-overhead")
}

// BenchmarkLLMQueryBatched16 times one cell that asks 16 questions of a
// model with 200 ms latency (llmtest's OpenAI server through core/llm's
// openai provider), with 16 sequential llm_query calls and with one
// llm_query_batched call, alternately in the same run. Only the cell is
// timed (its duration as the REPL reports it), not the loop's own turns.
func BenchmarkLLMQueryBatched16(b *testing.B) {
	factory := pythonFactory(b)
	const latency = 200 * time.Millisecond
	srv := llmtest.NewOpenAIServer(b, func(req llmtest.ChatRequest) string {
		if req.System == "" {
			return "answer to " + req.LastUser()
		}
		if strings.Contains(req.LastUser(), "Output:") {
			return "FINAL_VAR(n)"
		}
		if strings.Contains(req.Messages[0].Content, "BATCHED") {
			return "```repl\nr = llm_query_batched([f'q{i}' for i in range(16)])\nn = len(set(r))\n```"
		}
		return "```repl\nr = [llm_query(f'q{i}') for i in range(16)]\nn = len(set(r))\n```"
	}, llmtest.WithLatency(latency))
	prov, err := llm.New("openai", llm.Options{BaseURL: srv.BaseURL(), APIKey: "sk-bench", MaxConcurrent: 16})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var cellMs int64
	e, err := engine.New(engine.Options{
		Provider: prov, Model: "gpt-4o-mini", Sandbox: factory, MaxConcurrent: 16,
		OnEvent: func(ev engine.Event) {
			if ev.Type == engine.EventCode {
				mu.Lock()
				cellMs = ev.Result.DurationMs
				mu.Unlock()
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	run := func(task string) time.Duration {
		res, err := e.Run(context.Background(), task, nil)
		if err != nil || res.Answer != "16" {
			b.Fatalf("%v %+v", err, res)
		}
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(cellMs) * time.Millisecond
	}
	var seq, bat []time.Duration
	for b.Loop() {
		seq = append(seq, run("SEQUENTIAL"))
		bat = append(bat, run("BATCHED"))
	}
	s50, _ := percentiles(seq)
	b50, _ := percentiles(bat)
	b.ReportMetric(ms(s50), "ms/sequential")
	b.ReportMetric(ms(b50), "ms/batched")
	b.ReportMetric(float64(s50)/float64(b50), "speedup")
	fmt.Printf("llm_query x16 at %s: sequential p50 %.0f ms, batched p50 %.0f ms (%d runs each)\n", latency, ms(s50), ms(b50), len(seq))
}
