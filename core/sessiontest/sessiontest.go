// Package sessiontest holds checks that every REPL runtime must pass, so
// the native and the WebAssembly Python (and a third party's runtime) are
// held to one contract by the same code.
package sessiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/core"
)

// BridgeContext is the context CheckBridges expects the session to have
// been opened with.
const BridgeContext = "the whole context"

// Recorder is a pair of bridges that answer predictably and remember each
// call, in order.
type Recorder struct {
	mu    sync.Mutex
	calls []string
}

// Bridges answers llm_query with "answer to PROMPT" and rlm_query with
// "sub TASK", recording "llm:PROMPT|MODEL" and "rlm:TASK|SUBCONTEXT"
// (<default> when the cell passed none).
func (r *Recorder) Bridges() core.Bridges {
	return core.Bridges{
		LLMQuery: func(_ context.Context, prompt, model string) (string, error) {
			r.add("llm:" + prompt + "|" + model)
			return "answer to " + prompt, nil
		},
		RLMQuery: func(_ context.Context, task string, sub *string) (string, error) {
			c := "<default>"
			if sub != nil {
				c = *sub
			}
			r.add("rlm:" + task + "|" + c)
			return "sub " + task, nil
		},
	}
}

func (r *Recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

// Calls returns the calls so far.
func (r *Recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// CheckBridges runs llm_query and rlm_query from a cell of s, a session
// opened with r's bridges and BridgeContext: the answers reach the cell,
// and the session's own context is not sent back with rlm_query until the
// cell rebinds it.
func CheckBridges(t testing.TB, s core.Session, r *Recorder) {
	t.Helper()
	res, err := s.Execute(context.Background(), `print(llm_query("q1", model="m"))
print(rlm_query("t1"))
print(rlm_query("t2", "piece"))
context = "changed"
print(rlm_query("t3"))`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "answer to q1\nsub t1\nsub t2\nsub t3\n" || res.Error != "" {
		t.Fatalf("stdout %q error %q stderr %q", res.Stdout, res.Error, res.Stderr)
	}
	want := []string{"llm:q1|m", "rlm:t1|<default>", "rlm:t2|piece", "rlm:t3|changed"}
	if got := r.Calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("calls %v want %v", got, want)
	}
}
