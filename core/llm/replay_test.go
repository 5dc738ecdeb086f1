package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// traceLines renders CallEvents (plus unrelated events) the way the engine
// writes a trace.
func traceLines(t *testing.T, evs ...CallEvent) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"run_start","task":"demo","time":"2026-01-01T00:00:00Z"}` + "\n")
	for i, ev := range evs {
		ev.Type = CallEventType
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		// Extra fields the engine may add must be ignored.
		line := strings.Replace(string(data), "{", fmt.Sprintf(`{"id":%d,"elapsed_ms":12,`, i), 1)
		b.WriteString(line + "\n")
		b.WriteString(`{"type":"exec","code":"print(1)","stdout":"1\n"}` + "\n")
	}
	b.WriteString(`{"type":"run_end","answer":"42"}` + "\n")
	return b.String()
}

func ev(depth int, caller, model, prompt, answer string) CallEvent {
	return CallEvent{Depth: depth, Caller: caller,
		Request:  Request{Model: model, System: "sys", Messages: []Message{{Role: "user", Content: prompt}}},
		Response: Response{Text: answer, Usage: Usage{InputTokens: 10, OutputTokens: 2}, Model: model + "-20250101"}}
}

func newReplayT(t *testing.T, path string) Provider {
	t.Helper()
	p, err := New("replay", Options{Transcript: path})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sysReq(model, prompt string) Request {
	return Request{Model: model, System: "sys", Messages: []Message{{Role: "user", Content: prompt}}}
}

func TestReplayTraceMatchesByHash(t *testing.T) {
	path := writeFile(t, "trace.jsonl", traceLines(t,
		ev(0, "root", "m", "task", "root answer 1"),
		ev(1, "llm_query", "m", "chunk A", "answer A"),
		ev(1, "llm_query", "m", "chunk B", "answer B"),
		ev(1, "llm_query", "m", "chunk C", "answer C"),
		ev(0, "root", "m", "task + results", "FINAL(42)"),
	))
	p := newReplayT(t, path)
	ctx := context.Background()
	r, err := p.Complete(ctx, sysReq("m", "task"))
	if err != nil || r.Text != "root answer 1" {
		t.Fatalf("%+v %v", r, err)
	}
	if r.Usage != (Usage{10, 2}) || r.Model != "m-20250101" {
		t.Errorf("resp = %+v", r)
	}
	// Batched sub-calls arrive concurrently, in any order.
	var wg sync.WaitGroup
	got := make(map[string]string)
	var mu sync.Mutex
	for _, c := range []string{"chunk C", "chunk A", "chunk B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Complete(ctx, sysReq("m", c))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[c] = r.Text
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, c := range []string{"A", "B", "C"} {
		if got["chunk "+c] != "answer "+c {
			t.Errorf("chunk %s got %q", c, got["chunk "+c])
		}
	}
	r, err = p.Complete(ctx, sysReq("m", "task + results"))
	if err != nil || r.Text != "FINAL(42)" {
		t.Fatalf("%+v %v", r, err)
	}
	_, err = p.Complete(ctx, sysReq("m", "one more"))
	if !errors.Is(err, ErrTranscript) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"no response left", "all 5 used", path, "one more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestReplayUnderAnotherModel(t *testing.T) {
	path := writeFile(t, "trace.jsonl", traceLines(t,
		ev(0, "root", "claude-sonnet-4-5", "first", "one"),
		ev(0, "root", "claude-sonnet-4-5", "second", "two"),
	))
	p := newReplayT(t, path)
	// Asked in the other order and with another model: matched by messages.
	for _, c := range [][2]string{{"second", "two"}, {"first", "one"}} {
		r, err := p.Complete(context.Background(), sysReq("gpt-4o", c[0]))
		if err != nil || r.Text != c[1] {
			t.Fatalf("%s: %+v %v", c[0], r, err)
		}
	}
}

func TestReplayIdenticalRequestsAnswerInOrder(t *testing.T) {
	path := writeFile(t, "trace.jsonl", traceLines(t,
		ev(1, "llm_query", "m", "same", "first"),
		ev(1, "llm_query", "m", "same", "second"),
	))
	p := newReplayT(t, path)
	for _, want := range []string{"first", "second"} {
		r, err := p.Complete(context.Background(), sysReq("m", "same"))
		if err != nil || r.Text != want {
			t.Fatalf("%+v %v, want %q", r, err, want)
		}
	}
}

func TestReplayFallsBackToOrderByDepth(t *testing.T) {
	// The prompts changed (say the engine's prompt template did), so no hash
	// matches: the call info picks the next response at the same depth.
	path := writeFile(t, "trace.jsonl", traceLines(t,
		ev(0, "root", "m", "old root 1", "R1"),
		ev(1, "llm_query", "m", "old sub", "S1"),
		ev(0, "root", "m", "old root 2", "R2"),
	))
	p := newReplayT(t, path)
	root := WithCallInfo(context.Background(), CallInfo{Depth: 0, Caller: "root"})
	sub := WithCallInfo(context.Background(), CallInfo{Depth: 1, Caller: "llm_query"})
	steps := []struct {
		ctx  context.Context
		want string
	}{{root, "R1"}, {root, "R2"}, {sub, "S1"}}
	for i, s := range steps {
		r, err := p.Complete(s.ctx, sysReq("m", fmt.Sprint("new prompt ", i)))
		if err != nil || r.Text != s.want {
			t.Fatalf("step %d: %+v %v, want %q", i, r, err, s.want)
		}
	}
	// Without call info, plain order.
	p = newReplayT(t, path)
	for _, want := range []string{"R1", "S1", "R2"} {
		r, err := p.Complete(context.Background(), sysReq("m", "new"))
		if err != nil || r.Text != want {
			t.Fatalf("%+v %v, want %q", r, err, want)
		}
	}
}

func TestReplaySimpleJSON(t *testing.T) {
	path := writeFile(t, "t.json", `{"responses":[{"text":"a"},{"text":"b","usage":{"input_tokens":3,"output_tokens":1}}]}`)
	p := newReplayT(t, path)
	r1, err1 := p.Complete(context.Background(), userReq("claude-haiku-4-5", "x"))
	r2, err2 := p.Complete(context.Background(), userReq("claude-haiku-4-5", "y"))
	_, err3 := p.Complete(context.Background(), userReq("claude-haiku-4-5", "z"))
	if err1 != nil || err2 != nil || r1.Text != "a" || r2.Text != "b" || r2.Usage != (Usage{3, 1}) {
		t.Fatalf("%+v %v %+v %v", r1, err1, r2, err2)
	}
	if r2.Model != "claude-haiku-4-5" || r2.CostUSD != (3*1.0+1*5.0)/1e6 {
		t.Errorf("model/cost = %q %v", r2.Model, r2.CostUSD)
	}
	if !errors.Is(err3, ErrTranscript) {
		t.Errorf("err3 = %v", err3)
	}
}

func TestReplayTOML(t *testing.T) {
	path := writeFile(t, "t.toml", `
[[responses]]
text = """
`+"```python\nprint(len(context))\n```"+`"""

[[responses]]
text = "FINAL(done)"
usage = { input_tokens = 5, output_tokens = 2 }
`)
	p := newReplayT(t, path)
	r1, _ := p.Complete(context.Background(), userReq("m", "x"))
	r2, err := p.Complete(context.Background(), userReq("m", "y"))
	if err != nil || !strings.Contains(r1.Text, "print(len(context))") || r2.Text != "FINAL(done)" || r2.Usage != (Usage{5, 2}) {
		t.Fatalf("%+v / %+v %v", r1, r2, err)
	}
}

func TestReplayJSONArrayOfEvents(t *testing.T) {
	data, _ := json.Marshal([]CallEvent{ev(0, "root", "m", "q", "a")})
	data = []byte(strings.Replace(string(data), `"type":""`, `"type":"llm_call"`, 1))
	p := newReplayT(t, writeFile(t, "t.json", string(data)))
	if r, err := p.Complete(context.Background(), sysReq("m", "q")); err != nil || r.Text != "a" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestReplayBadTranscripts(t *testing.T) {
	cases := map[string]struct{ name, content, want string }{
		"missing":   {"", "", "no such file"},
		"empty":     {"e.jsonl", "\n", "holds no responses"},
		"no calls":  {"n.jsonl", `{"type":"run_start"}` + "\n", "holds no responses"},
		"bad line":  {"b.jsonl", `{"type":"llm_call"}` + "\nnot json\n", "line 2"},
		"bad toml":  {"b.toml", "[[responses]\n", "reading transcript"},
		"other obj": {"o.json", `{"answers":[]}`, "neither"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.jsonl")
			if c.name != "" {
				path = writeFile(t, c.name, c.content)
			}
			_, err := New("replay", Options{Transcript: path})
			if !errors.Is(err, ErrTranscript) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := New("replay", Options{}); !errors.Is(err, ErrTranscript) {
		t.Errorf("no transcript: %v", err)
	}
}

// The trace the engine writes from real responses must replay to the same
// responses: CallEvent round-trips through JSON.
func TestCallEventRoundTrip(t *testing.T) {
	temp := 0.5
	in := CallEvent{Type: CallEventType, Depth: 2, Caller: "rlm_query",
		Request:  Request{Model: "m", System: "s", Messages: []Message{{"user", "u"}, {"assistant", "a"}}, MaxTokens: 9, Temperature: &temp},
		Response: Response{Text: "t", Usage: Usage{1, 2}, Model: "m2", Latency: 1500, Attempts: 2, CostUSD: 0.5}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out CallEvent
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%s", data)
	}
	for _, key := range []string{`"type":"llm_call"`, `"depth":2`, `"caller":"rlm_query"`, `"input_tokens":1`, `"output_tokens":2`, `"text":"t"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("%s lacks %s", data, key)
		}
	}
}

// A replayed prompt that matches no recorded prompt is answered in order,
// with one warning per replay naming the recording; matching prompts warn
// about nothing.
func TestReplayWarnsOnceWhenAPromptDiffers(t *testing.T) {
	path := writeFile(t, "trace.jsonl", traceLines(t,
		ev(0, "root", "m", "task", "answer 1"),
		ev(0, "root", "m", "task + results", "answer 2"),
		ev(0, "root", "m", "task + more", "FINAL(42)"),
	))
	p := newReplayT(t, path)
	var warnings []string
	ctx := WithWarn(context.Background(), func(msg string) { warnings = append(warnings, msg) })
	if r, err := p.Complete(ctx, sysReq("m", "task")); err != nil || r.Text != "answer 1" {
		t.Fatalf("%+v %v", r, err)
	}
	if len(warnings) != 0 {
		t.Fatalf("a recorded prompt warned: %q", warnings)
	}
	for i, prompt := range []string{"edited results", "edited again"} {
		r, err := p.Complete(ctx, sysReq("m", prompt))
		if err != nil || r.Text != []string{"answer 2", "FINAL(42)"}[i] {
			t.Fatalf("%s: %+v %v", prompt, r, err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "differs from every prompt recorded in "+path) {
		t.Fatalf("warnings = %q, want one naming %s", warnings, path)
	}
}
