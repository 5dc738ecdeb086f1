// Package isolation names the isolation levels a program can run at. It is
// a leaf with no sandbox machinery in it, so code that only speaks about
// levels (a plugin's Info and request checks, core/plugin/native's body) does not
// link the sandbox (internal/sandbox/isolate) that enforces them.
package isolation

import "fmt"

// Level is how strongly a program is isolated; see internal/sandbox/isolate for what
// each level enforces.
type Level string

// The isolation levels, weakest first.
const (
	None      Level = "none"
	Process   Level = "process"
	Namespace Level = "namespace"
)

// Levels are the levels internal/sandbox/isolate defines, weakest first.
var Levels = []Level{None, Process, Namespace}

// Probe reports whether this host can enforce level: nil when it can, else
// why not and the fix. The host's probe is internal/sandbox/isolate.Available, which
// starts a real sandbox to find out; code that resolves levels (core) takes
// the probe as a value instead of importing it, so that a plugin linking
// core's types does not link the sandbox.
type Probe func(Level) error

// Parse accepts "none", "process", "namespace" (and "" as "process", the
// default a runtime gets when the caller says nothing).
func Parse(s string) (Level, error) {
	switch Level(s) {
	case "":
		return Process, nil
	case None, Process, Namespace:
		return Level(s), nil
	}
	return "", fmt.Errorf("unknown isolation level %q: use none, process or namespace", s)
}
