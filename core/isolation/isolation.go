// Package isolation is the sandbox's vocabulary: the levels a program can
// run at (Level), one sandboxed program (Spec), how it ended (Exit) and
// what the host's sandbox supervisor reports (Report). It is a leaf with
// no sandbox machinery in it, so code that only speaks about sandboxes (a
// plugin's Info and request checks, core/plugin/native's body, a plugin
// that asks `rlm __sandbox` to run its programs) does not link the sandbox
// (internal/sandbox/isolate) that enforces them.
package isolation

import (
	"fmt"
	"strings"
)

// Level is how strongly a program is isolated; see internal/sandbox/isolate for what
// each level enforces. A plugin may declare a level of its own (pyodide's
// wasm); the host's levels are None, Process and Namespace.
type Level string

// The isolation levels, weakest first.
const (
	None      Level = "none"
	Process   Level = "process"
	Namespace Level = "namespace"
)

// Default is the level a runtime runs at when the caller names none ("").
const Default = Process

// Levels are the levels internal/sandbox/isolate defines, weakest first.
var Levels = []Level{None, Process, Namespace}

// Probe reports whether this host can enforce level: nil when it can, else
// why not and the fix. The host's probe is internal/sandbox/isolate.Available, which
// starts a real sandbox to find out; code that resolves levels (core) takes
// the probe as a value instead of importing it, so that a plugin linking
// core's types does not link the sandbox.
type Probe func(Level) error

// Parse accepts "none", "process", "namespace" (and "" as Default, the
// level a runtime gets when the caller says nothing). It is for a level
// name that arrives as text from outside: core/plugin's adapter parses the
// one a request carries; code below it holds a Level.
func Parse(s string) (Level, error) {
	if s == "" {
		return Default, nil
	}
	l := Level(s)
	return l, l.Check()
}

// Check says whether l is one of the host's levels (Levels): nil when it
// is, else an error that names the levels there are.
func (l Level) Check() error {
	switch l {
	case None, Process, Namespace:
		return nil
	}
	return fmt.Errorf("unknown isolation level %q: use none, process or namespace", string(l))
}

// ParseLevels reads the host's levels from text that names them separated
// by white space (the sandbox supervisor's `--levels` answer, one a line),
// in their order; a name that is not one of Levels is left out.
func ParseLevels(text string) []Level {
	var out []Level
	for _, f := range strings.Fields(text) {
		if l := Level(f); l.Check() == nil {
			out = append(out, l)
		}
	}
	return out
}
