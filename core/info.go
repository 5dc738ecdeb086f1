package core

import (
	"fmt"
	"slices"

	"github.com/rlmkit/rlm/core/isolation"
)

// Info is what a runtime declares about itself: its name, its tool's
// version, what it can do and the isolation levels it enforces. A plugin
// answers it once per connection (it does not change while the plugin
// runs); the host fingerprints plugins by it (internal/host/catalog) and
// resolves every run's isolation against it (ResolveIsolation).
type Info struct {
	Name           string // "python"
	PluginVersion  string // the plugin binary's own version
	Language       string // "python"
	FileExtension  string // ".py"
	RuntimeVersion string // "Python 3.11.7", as the tool prints it
	// Capabilities: repl, program, requirements, fuel, files, check; and,
	// for a plugin with an isolation level of its own (pyodide's wasm), the
	// resource limits it enforces there (memory, max-processes, max-disk,
	// cpu: core.Resources' names). The host cannot judge such a level, so an
	// explicit limit it does not declare is refused; at none, process and
	// namespace the level alone says what holds.
	Capabilities      []string
	Available         bool
	UnavailableReason string // "'node' not found in PATH"
	Backend           string // native, pyodide, daemon
	// IsolationLevels are the levels the runtime's programs can enforce
	// (none, process, namespace as core/isolation defines them, or one of
	// its own such as wasm). The host runs nothing at a level not listed:
	// empty means none.
	IsolationLevels []string
	// SessionIsolationLevels are the same for its REPL sessions, declared
	// apart because a session's interpreter lives long and is often
	// started differently from a program's. Empty means none.
	SessionIsolationLevels []string
}

// Declared are the isolation levels info declares for programs, or with
// session for REPL sessions. An empty declaration, or no Info at all (a
// plugin that has not answered), means none: the host assumes nothing a
// plugin does not promise.
func (info *Info) Declared(session bool) []string {
	var l []string
	if info != nil {
		l = info.IsolationLevels
		if session {
			l = info.SessionIsolationLevels
		}
	}
	if len(l) == 0 {
		return []string{string(isolation.None)}
	}
	return l
}

// Has says whether the runtime declares capability c ("repl", "files", …).
func (info *Info) Has(c string) bool {
	return info != nil && slices.Contains(info.Capabilities, c)
}

// Query is a cell's call back into the host: llm_query, rlm_query or
// tool_call (a host-side tool; its prompt is the call as JSON, see
// Bridges.ToolCall), with one prompt per query (the batched forms carry
// several). The answer is one string per prompt, in order (CheckAnswers).
type Query struct {
	Kind    string // "llm_query", "rlm_query" or "tool_call"
	Prompts []string
	// Contexts are rlm_query's sub-contexts, one per prompt where
	// HasContext says that prompt brought one (an empty one is a context).
	Contexts   []string
	HasContext []bool
	Model      string // llm_query's and rlm_query's model, "" for the default
}

// QueryErrorPrefix begins the answer of one prompt of a batch that failed
// (the rest of it is the error): a batch answers every prompt, so one bad
// prompt does not discard the others' answers (they were paid for). The
// REPL helpers (plugins/internal/pycell) turn it into an LLMQueryError in
// the list, or the reference protocol's "Error: ..." str. A query of one
// prompt fails as a whole instead.
const QueryErrorPrefix = "\x00rlm-query-error\x00"

// Context is prompt i's sub-context, nil when it brought none.
func (q Query) Context(i int) *string {
	if i < len(q.HasContext) && q.HasContext[i] && i < len(q.Contexts) {
		c := q.Contexts[i]
		return &c
	}
	return nil
}

// CheckAnswers refuses answers that do not match the prompts one for one:
// the guest would otherwise index past them or pair them wrongly.
func (q Query) CheckAnswers(answers []string) error {
	if len(answers) != len(q.Prompts) {
		return fmt.Errorf("%s: the host returned %d results for %d prompts", q.Kind, len(answers), len(q.Prompts))
	}
	return nil
}
