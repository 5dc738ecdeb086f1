package engine

import (
	"context"
	"io"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// BenchmarkEngineIteration measures the engine's own cost per iteration:
// the model answers instantly and the session is an in-memory fake, so
// what remains is building the request, parsing the reply, formatting the
// output, accounting and (with trace) encoding the events. One op is a run
// of 10 iterations plus the forced answer; see ns/iteration. (Describing
// the context, once per loop, costs another ~0.3 ms per MB.)
func BenchmarkEngineIteration(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "untraced"
		if traced {
			name = "traced"
		}
		b.Run(name, func(b *testing.B) {
			m := instantModel{}
			o := Options{Provider: m, Model: "gpt-4o", Sandbox: (&fakeFactory{}).open, Budget: Budget{MaxIterations: 10}}
			if traced {
				o.Trace = io.Discard
			}
			e, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			c := &core.Context{Data: make([]byte, 1<<10), Kind: "text"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := e.Run(context.Background(), "find it", c)
				if err != nil || res.Usage.Iterations != 10 {
					b.Fatal(err, res)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/iteration")
		})
	}
}

// instantModel answers at once with a fixed reply and usage, so that the
// benchmark measures the engine, not a fake's token counting.
type instantModel struct{}

func (instantModel) Name() string { return "instant" }

func (instantModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	return llm.Response{Text: "Checking.\n```repl\nprint chunk 42 of the context\n```\n",
		Usage: llm.Usage{InputTokens: 1000, OutputTokens: 20}, Model: req.Model, Attempts: 1, CostUSD: 0.0027}, nil
}
