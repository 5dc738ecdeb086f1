package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Host tools the operator declares wrong are refused when the engine is
// built, before any model call, with what to change.
func TestHostToolDeclarationsAreChecked(t *testing.T) {
	cmd := []string{"true"}
	for _, tc := range []struct {
		tool HostTool
		want string
	}{
		{HostTool{Command: cmd}, "has no name"},
		{HostTool{Name: "rlm_query", Command: cmd}, `tool "rlm_query": the REPL reserves that name`},
		{HostTool{Name: "answer", Command: cmd}, "the REPL reserves that name"},
		{HostTool{Name: "_hidden", Command: cmd}, "must be a Python identifier"},
		{HostTool{Name: "lambda", Command: cmd}, "must be a Python identifier"},
		{HostTool{Name: "two words", Command: cmd}, "must be a Python identifier"},
		{HostTool{Name: "both", Command: cmd, URL: "http://127.0.0.1:1/"}, "exactly one of command"},
		{HostTool{Name: "neither"}, "exactly one of command"},
		{HostTool{Name: "ftp", URL: "ftp://example.org/"}, "must start with http:// or https://"},
		{HostTool{Name: "p", Command: cmd, Params: []string{"a b"}}, `parameter "a b" is not a Python identifier`},
		{HostTool{Name: "neg", Command: cmd, MaxCalls: -1}, "must not be negative"},
	} {
		_, err := New(Options{Provider: &fakeModel{}, Model: "m", Sandbox: (&fakeFactory{}).open,
			Tools: Tools{Host: []HostTool{tc.tool}}})
		if !errors.Is(err, ErrTools) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want ErrTools saying %q", tc.tool, err, tc.want)
		}
	}
	_, err := New(Options{Provider: &fakeModel{}, Model: "m", Sandbox: (&fakeFactory{}).open,
		Tools: Tools{Host: []HostTool{{Name: "twice", Command: cmd}, {Name: "twice", URL: "http://127.0.0.1:1/"}}}})
	if !errors.Is(err, ErrTools) || !strings.Contains(err.Error(), "declared twice") {
		t.Errorf("a name declared twice: got %v", err)
	}
	e, err := New(Options{Provider: &fakeModel{}, Model: "m", Sandbox: (&fakeFactory{}).open,
		Tools: Tools{Host: []HostTool{{Name: "ok", Command: cmd, Params: []string{"_x", "y"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.o.Tools.Host[0].Timeout; got != DefaultToolTimeout {
		t.Errorf("default timeout %s, want %s", got, DefaultToolTimeout)
	}
}

// max_calls is one budget for the whole run, whichever loop calls.
func TestToolBudgetIsPerRun(t *testing.T) {
	var tr toolsRun
	a := &HostTool{Name: "a", MaxCalls: 2, Timeout: time.Second}
	b := &HostTool{Name: "b"}
	for i := 0; i < 2; i++ {
		if err := tr.reserve(a); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if err := tr.reserve(a); err == nil || !strings.Contains(err.Error(), "tool a: its budget of 2 calls for this run is used up (max_calls)") {
		t.Fatalf("third call: %v", err)
	}
	for i := 0; i < 100; i++ {
		if err := tr.reserve(b); err != nil {
			t.Fatalf("uncapped tool: %v", err)
		}
	}
}
