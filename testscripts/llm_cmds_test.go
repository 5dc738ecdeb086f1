package testscripts

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/core/llm/llmtest"
)

// fakes holds each script's fake model server (fakellm).
var fakes sync.Map // *testscript.TestScript → *llmtest.Server

// scriptTB lets llmtest, which takes a testing.TB, run under a script:
// its cleanups run when the script ends. llmtest calls only Helper and
// Cleanup (the embedded nil TB would panic on anything else, loudly).
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (t scriptTB) Helper()                   {}
func (t scriptTB) Cleanup(f func())          { t.ts.Defer(f) }
func (t scriptTB) Fatalf(f string, a ...any) { t.ts.Fatalf(f, a...) }

// fakellm KEY starts a fake OpenAI-compatible server (core/llm/llmtest,
// the real wire format) on 127.0.0.1 that accepts only the API key KEY,
// answers each prompt with "MODEL says: PROMPT" and reports 100 input and
// 50 output tokens a call; $LLM_URL is its base URL (ending in /v1).
func cmdFakeLLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fakellm KEY")
	}
	s := llmtest.NewOpenAIServer(scriptTB{ts: ts}, func(r llmtest.ChatRequest) string {
		return r.Model + " says: " + r.LastUser()
	}, llmtest.WithAPIKey(args[0]), llmtest.WithUsage(100, 50))
	fakes.Store(ts, s)
	ts.Defer(func() { fakes.Delete(ts) })
	ts.Setenv("LLM_URL", s.BaseURL())
}

// llmcalls N checks the fake got exactly N requests, and prints one line
// for each: "model=M max_tokens=N prompt=P".
func cmdLLMCalls(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: llmcalls N")
	}
	v, ok := fakes.Load(ts)
	if !ok {
		ts.Fatalf("llmcalls: no fakellm started")
	}
	s := v.(*llmtest.Server)
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("llmcalls: %v", err)
	}
	reqs := s.Requests()
	for _, r := range reqs {
		fmt.Fprintf(ts.Stdout(), "model=%s max_tokens=%d prompt=%s\n", r.Model, r.MaxTokens, r.LastUser())
	}
	if s.Count() != want {
		ts.Fatalf("the fake model server got %d requests, want %d", s.Count(), want)
	}
}
