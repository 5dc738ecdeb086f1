package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
	"github.com/rlmkit/rlm/core/llm/llmtest"
	"github.com/rlmkit/rlm/core/server"
)

// runServer is a server that runs loops on a fake OpenAI server (the real
// wire format) whose loop turns answer script[turn] (the last repeated).
func runServer(t *testing.T, budget engine.SessionBudget, script ...string) (string, *llmtest.Server) {
	t.Helper()
	fake := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string {
		if r.System == "" {
			return r.Model + " says: " + r.LastUser()
		}
		return script[min(r.Turn(), len(script)-1)]
	}, llmtest.WithAPIKey("k"))
	prov, err := llm.New("openai", llm.Options{BaseURL: fake.BaseURL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 2,
		Runs: &server.RunsConfig{LLM: &engine.SessionLLM{Provider: prov, ProviderName: "openai", Model: "m", Budget: budget}}})
	return url, fake
}

// The operator's cap on model calls holds for a run as for a session: the
// call past it fails the run, saying which cap; "stream": false answers
// the final status alone.
func TestRunMaxCallsAndNoStream(t *testing.T) {
	url, fake := runServer(t, engine.SessionBudget{MaxCalls: 2}, "```repl\nx = llm_query('one')\n```", "```repl\ny = llm_query('two')\n```")
	r := call(t, "POST", url+"/runs", `{"task": "t", "stream": false}`)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s %s", r.status, r.header.Get("Content-Type"), r.raw)
	}
	if r.body["status"] != "failed" || r.body["error_kind"] != "provider" || !strings.Contains(r.body["error"].(string), "this run's budget of 2 model calls is used up") {
		t.Fatalf("status: %s", r.raw)
	}
	if fake.Count() != 2 {
		t.Fatalf("the model got %d calls, want 2", fake.Count())
	}
}

// A client that goes away cancels its run: the block in progress is
// interrupted and the run ends cancelled (GET /runs/{id} says so).
func TestRunClientGoneCancels(t *testing.T) {
	url, _ := runServer(t, engine.SessionBudget{}, "```repl\nimport time\nwhile True:\n    time.sleep(0.02)\n```")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/runs", strings.NewReader(`{"task": "loop"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	id := resp.Header.Get("X-Run-Id")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["type"] == "llm_call" {
			break // the block that never ends is running
		}
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := call(t, "GET", url+"/runs/"+id, "")
		if r.body["status"] == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is not cancelled 60 s after its client went away: %s", r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A child loop (rlm_query from a block) runs its blocks while the root's
// block waits for it, on the slot that block holds: on a server with one
// slot, a child that waited for another would wait until the run's time
// ran out.
func TestRunChildOnOneSlot(t *testing.T) {
	fake := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string {
		if r.System == "" {
			return "plain: " + r.LastUser()
		}
		// The child (at the maximum depth) cannot recurse: it asks llm_query.
		return []string{"```repl\ntry:\n    x = rlm_query('sub')\nexcept LLMQueryError:\n    x = llm_query('sub')\nprint(x)\n```", "FINAL_VAR(x)"}[min(r.Turn(), 1)]
	}, llmtest.WithAPIKey("k"))
	prov, err := llm.New("openai", llm.Options{BaseURL: fake.BaseURL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 1,
		Runs: &server.RunsConfig{LLM: &engine.SessionLLM{Provider: prov, ProviderName: "openai", Model: "m"}}})
	r := call(t, "POST", url+"/runs", `{"task": "t", "max_depth": 1, "max_time_seconds": 60, "stream": false}`)
	if r.status != 200 || r.body["status"] != "succeeded" || r.body["answer"] != "plain: sub" {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if u := r.body["usage"].(map[string]any); u["max_depth_reached"] != 1.0 {
		t.Fatalf("no child loop ran: %s", r.raw)
	}
}

// A stream that is quiet (here a model call that waits until the test has
// read a heartbeat) gets heartbeat lines, so that idle timeouts on the way
// keep it open, and then the rest of the run.
func TestRunStreamHeartbeat(t *testing.T) {
	release := make(chan struct{})
	fake := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string {
		if r.System == "" {
			select {
			case <-release:
			case <-time.After(60 * time.Second): // no heartbeat came: the test fails below
			}
			return "late"
		}
		return []string{"```repl\nx = llm_query('wait')\n```", "FINAL_VAR(x)"}[min(r.Turn(), 1)]
	}, llmtest.WithAPIKey("k"))
	prov, err := llm.New("openai", llm.Options{BaseURL: fake.BaseURL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 2,
		Runs: &server.RunsConfig{LLM: &engine.SessionLLM{Provider: prov, ProviderName: "openai", Model: "m"}, Heartbeat: 50 * time.Millisecond}})
	resp, err := http.Post(url+"/runs", "application/json", strings.NewReader(`{"task": "t"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		typ := ev["type"].(string)
		if typ == "heartbeat" && len(types) > 0 && types[len(types)-1] == "subcall" {
			close(release) // the llm_query was quiet; it may answer now
		}
		types = append(types, typ)
		if typ == "result" && ev["status"] != "succeeded" {
			t.Fatalf("result: %s", sc.Bytes())
		}
	}
	got := strings.Join(types, " ")
	if !strings.Contains(got, "subcall heartbeat") || !strings.HasSuffix(got, "run_end result") {
		t.Fatalf("stream: %s", got)
	}
}

// Runs in progress are bounded (RunsConfig.MaxRuns): one more is 429
// too_many_runs, saying what to do; once one ends there is room again.
func TestRunsBounded(t *testing.T) {
	release := make(chan struct{})
	fake := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string {
		if r.System == "" {
			select {
			case <-release:
			case <-time.After(120 * time.Second):
			}
			return "done"
		}
		return []string{"```repl\nx = llm_query('wait')\n```", "FINAL_VAR(x)"}[min(r.Turn(), 1)]
	}, llmtest.WithAPIKey("k"))
	prov, err := llm.New("openai", llm.Options{BaseURL: fake.BaseURL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	url, srv := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 2,
		Runs: &server.RunsConfig{LLM: &engine.SessionLLM{Provider: prov, ProviderName: "openai", Model: "m"}, MaxRuns: 1}})
	first, err := srv.StartRun(context.Background(), &server.RunRequest{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, "POST", url+"/runs", `{"task": "t2"}`)
	if r.status != 429 || r.errCode() != "too_many_runs" || !strings.Contains(r.errMsg(), "its maximum of 1 runs in progress: wait for one to end, or cancel one") {
		t.Fatalf("a second run: %d %s", r.status, r.raw)
	}
	close(release)
	if st := first.Wait(context.Background()); st.Status != server.RunSucceeded || st.Answer != "done" {
		t.Fatalf("the first run: %+v", st)
	}
	if r := call(t, "POST", url+"/runs", `{"task": "t3", "stream": false}`); r.status != 200 || r.body["status"] != "succeeded" {
		t.Fatalf("a run after it: %d %s", r.status, r.raw)
	}
}

// A run started with keep is continued by the next: the same REPL (a
// variable set by the first) and the model's history. A conversation
// passes on once; a run without keep cannot be continued, nor can a new
// context be given.
func TestRunKeptAndContinued(t *testing.T) {
	fake := llmtest.NewOpenAIServer(t, func(r llmtest.ChatRequest) string {
		switch last := r.LastUser(); {
		case strings.Contains(last, "Next task: second"):
			if !strings.Contains(string(r.Body), "FINAL(stored)") {
				return "FINAL(no history)"
			}
			return "FINAL_VAR(keep)"
		case strings.Contains(last, "Task: first") || strings.Contains(last, "Task: lone"):
			return "```repl\nkeep = 41\n```"
		}
		return "FINAL(stored)"
	}, llmtest.WithAPIKey("k"))
	prov, err := llm.New("openai", llm.Options{BaseURL: fake.BaseURL(), APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 2,
		Runs: &server.RunsConfig{LLM: &engine.SessionLLM{Provider: prov, ProviderName: "openai", Model: "m"}}})
	first := call(t, "POST", url+"/runs", `{"task": "first", "context": "c", "keep": true, "stream": false}`)
	if first.status != 200 || first.body["answer"] != "stored" {
		t.Fatalf("first run: %d %s", first.status, first.raw)
	}
	id := first.body["run_id"].(string)
	if r := call(t, "POST", url+"/runs", `{"task": "second", "context": "new", "continue": "`+id+`", "stream": false}`); r.status != 400 || !strings.Contains(string(r.raw), "keeps its REPL") {
		t.Fatalf("a continued run with a new context: %d %s", r.status, r.raw)
	}
	second := call(t, "POST", url+"/runs", `{"task": "second", "continue": "`+id+`", "stream": false}`)
	if second.status != 200 || second.body["answer"] != "41" {
		t.Fatalf("the continued run: %d %s", second.status, second.raw)
	}
	if r := call(t, "POST", url+"/runs", `{"task": "second", "continue": "`+id+`", "stream": false}`); r.status != 409 || !strings.Contains(string(r.raw), "already continued") {
		t.Fatalf("continuing twice: %d %s", r.status, r.raw)
	}
	lone := call(t, "POST", url+"/runs", `{"task": "lone", "stream": false}`)
	if r := call(t, "POST", url+"/runs", `{"task": "second", "continue": "`+lone.body["run_id"].(string)+`", "stream": false}`); r.status != 409 || !strings.Contains(string(r.raw), "was not kept") {
		t.Fatalf("continuing a run without keep: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/runs", `{"task": "x", "continue": "run_nope", "stream": false}`); r.status != 404 {
		t.Fatalf("continuing an unknown run: %d %s", r.status, r.raw)
	}
}
