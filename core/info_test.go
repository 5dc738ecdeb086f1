package core

import (
	"slices"
	"testing"
)

// A plugin that has not answered (nil Info) or declares nothing is held to
// none; a declaration is taken as given, programs and sessions apart.
func TestInfoDeclared(t *testing.T) {
	var missing *Info
	for _, info := range []*Info{missing, {}} {
		for _, session := range []bool{false, true} {
			if got := info.Declared(session); !slices.Equal(got, []string{"none"}) {
				t.Errorf("%+v session=%v: %v, want [none]", info, session, got)
			}
		}
	}
	info := &Info{IsolationLevels: []string{"none", "namespace"}, SessionIsolationLevels: []string{"process"}}
	if got := info.Declared(false); !slices.Equal(got, []string{"none", "namespace"}) {
		t.Errorf("programs: %v", got)
	}
	if got := info.Declared(true); !slices.Equal(got, []string{"process"}) {
		t.Errorf("sessions: %v", got)
	}
	if missing.Has("repl") || (&Info{Capabilities: []string{"program"}}).Has("repl") || !(&Info{Capabilities: []string{"program", "repl"}}).Has("repl") {
		t.Error("Has does not read Capabilities")
	}
}

// A query's sub-context is there only where HasContext says so; answers
// must match its prompts one for one.
func TestQuery(t *testing.T) {
	q := Query{Kind: "rlm_query", Prompts: []string{"a", "b", "c"}, Contexts: []string{"", "ctx"}, HasContext: []bool{true, false}}
	if c := q.Context(0); c == nil || *c != "" {
		t.Errorf("prompt 0: an empty context that was sent is a context, got %v", c)
	}
	if q.Context(1) != nil || q.Context(2) != nil {
		t.Error("a prompt without HasContext got a context")
	}
	if err := q.CheckAnswers([]string{"1", "2", "3"}); err != nil {
		t.Error(err)
	}
	if err := q.CheckAnswers([]string{"1"}); err == nil {
		t.Error("one answer for three prompts was accepted")
	}
}
