package plugintest

// The checks every REPL runtime must pass (CheckBridges and the rest), so
// that the native and the WebAssembly Python, and a third party's runtime,
// are held to one contract by the same code.

import (
	"context"
	"fmt"
	"strings"
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
		RLMQuery: func(_ context.Context, task string, sub *string, _ string) (string, error) {
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

// Execute runs code in s and fails the test if the call itself fails (a
// cell that raises is still a result): the step every session test takes
// between its checks.
func Execute(t testing.TB, s core.Session, code string) *core.Result {
	t.Helper()
	r, err := s.Execute(context.Background(), code, 0)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return r
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

// HelperContext is the context CheckHelpers expects the session to have
// been opened with: a str with repeated, mixed-case and non-ASCII words.
const HelperContext = "alpha beta gamma, ünï BETA beta"

// CheckHelpers runs the helpers a cell sees besides the model queries
// (SHOW_VARS, chunk_text, search_context) in s, a fresh session opened with
// HelperContext, and checks what they return and which calls they refuse.
// The cells use ascii() so the check does not depend on the interpreter's
// stdout encoding. It leaves variables and the session's context as they
// were, apart from the names its cells define.
func CheckHelpers(t testing.TB, s core.Session) {
	t.Helper()
	for _, c := range []struct{ name, code, want string }{
		{"SHOW_VARS", // modules, _names and the helpers themselves are left out
			`mine = [1]
import json as js
_hidden = 1
v = SHOW_VARS()
print(sorted(v.items()))`,
			"context: str\nmine: list\n[('context', 'str'), ('mine', 'list')]\n"},
		{"chunk_text",
			`print(chunk_text("abcdefghij", size=4, overlap=1))
print(chunk_text("", 4, 1), chunk_text("abc", 4, 1), chunk_text("abcd", 4, 0))
print(ascii(chunk_text("héllo wörld ✓", 5, 2)))  # characters, not bytes
for bad in [(4, 4), (4, 5), (0, 0), (4, -1), (2.5, 0)]:
    try:
        chunk_text("x", *bad)
        print("accepted", bad)
    except ValueError:
        print("ValueError")`,
			"['abcd', 'defg', 'ghij']\n[] ['abc'] ['abcd']\n['h\\xe9llo', 'lo w\\xf6', 'w\\xf6rld', 'ld \\u2713']\n" +
				strings.Repeat("ValueError\n", 5)},
		{"search_context",
			`import re
r = search_context(r"beta", window=3)
print([(m["match"], m["start"], m["end"], m["snippet"], m["snippet_start"]) for m in r])
print([m["start"] for m in search_context("beta", flags=re.I)])
print(ascii(search_context("ünï", window=2)[0]["snippet"]), search_context("ünï", window=0)[0]["snippet"] == "ünï")
print(len(search_context("zzz")), len(search_context("beta", max_results=1)), len(search_context("beta", max_results=0)))
for bad in [{"window": -1}, {"max_results": -1}]:
    try:
        search_context("beta", **bad)
        print("accepted", bad)
    except ValueError:
        print("ValueError")
_saved, context = context, {"k": "ü"}  # a JSON context: searched as its unescaped JSON text
print(search_context("ü")[0]["start"])
context = _saved
del _saved`,
			"[('beta', 6, 10, 'ha beta ga', 3), ('beta', 27, 31, 'TA beta', 24)]\n[6, 22, 27]\n" +
				"', \\xfcn\\xef B' True\n0 1 0\nValueError\nValueError\n7\n"},
	} {
		res, err := s.Execute(context.Background(), c.code, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Stdout != c.want || res.Error != "" {
			t.Errorf("%s:\nstdout %q\nwant   %q\nerror %q stderr %q", c.name, res.Stdout, c.want, res.Error, res.Stderr)
		}
	}
}

// CheckEnvRefused opens sessions with open (a runtime's OpenSession)
// whose environment a program could
// not receive (a name with '=', one a sandbox's /bin/sh would drop, a
// value with NUL): each open must fail, naming the variable, rather than
// start an interpreter with another environment than the one asked for.
func CheckEnvRefused(t testing.TB, open core.SandboxFactory) {
	t.Helper()
	for name, value := range map[string]string{"A=B": "1", "BAD NAME": "1", "NUL": "a\x00b"} {
		s, err := open(context.Background(), core.SessionOptions{Env: map[string]string{name: value}})
		if err == nil {
			s.Close()
			t.Errorf("a session with env %q=%q opened; want it refused", name, value)
			continue
		}
		want := strings.TrimSuffix(strings.SplitN(name, "=", 2)[0], "\x00")
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "env") {
			t.Errorf("env %q=%q: error %q does not name the variable", name, value, err)
		}
	}
}
