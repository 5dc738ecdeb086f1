package core

import (
	"context"
	"encoding/json"
	"time"
)

// Session is a stateful REPL: globals persist between cells.
type Session interface {
	// Execute runs one cell. timeout 0 means the session's wall limit.
	Execute(ctx context.Context, code string, timeout time.Duration) (*Result, error)
	// Variable reads a global back as JSON; found is false when the name is
	// not defined (a variable holding None is found, with value null).
	Variable(ctx context.Context, name string) (value json.RawMessage, found bool, err error)
	// Cancel interrupts the running cell; the session's state is kept.
	Cancel() error
	// Close ends the session and every process it started.
	Close() error
}

// Bridges are the Go callbacks behind llm_query and rlm_query. A callback's
// error is raised inside the cell as a Python exception.
type Bridges struct {
	// LLMQuery answers one prompt. model is "" unless the cell named one.
	LLMQuery func(ctx context.Context, prompt, model string) (string, error)
	// RLMQuery runs a recursive sub-task. sub is nil when the cell passed
	// no context, meaning "the session's own context"; model is "" unless
	// the cell named one (rlm_query(..., model=...)).
	RLMQuery func(ctx context.Context, task string, sub *string, model string) (string, error)
	// ToolCall runs a host-side tool the operator declared (the RLM
	// engine's tools): call is the JSON object {"name": ..., "args": {...}}
	// a cell's tool stub sent, and the answer is JSON text. Nil: the
	// session has no host tools, and a call is an error in the cell.
	ToolCall func(ctx context.Context, call string) (string, error)
	// MaxConcurrent bounds the queries of one batched call in flight
	// (default 8).
	MaxConcurrent int
}

// Cell is one cell of a session with the files it brings.
type Cell struct {
	Code string
	// Timeout 0 means the session's wall limit.
	Timeout time.Duration
	// Files are written into the session's working directory before the
	// cell runs (where the sandboxed interpreter sees them), each replacing
	// a file of the same name. Paths are relative and stay inside the
	// directory: "..", absolute paths and a symlink on the way are refused
	// with a RefusedError (InvalidArgument), and the cell does not run.
	Files []File
}

// CellRunner is a Session that runs a Cell, files included. Sessions from
// Runtime.OpenSession are CellRunners (their Execute is RunCell without
// files); it is an interface of its own so that Session implementations
// elsewhere (a test's fake, a library user's) stay valid.
type CellRunner interface {
	RunCell(ctx context.Context, c Cell) (*Result, error)
}

// SessionOptions configure a new session.
type SessionOptions struct {
	Runtime string
	Context *Context
	Limits  Limits
	Env     map[string]string
	// Requirements are installed (from Install; nil: the tools'
	// defaults) before the interpreter starts, as a Program's are, and
	// stay importable in every cell.
	Requirements []string
	Install      *InstallOptions
	Bridges      Bridges
	// ReturnFiles asks every cell for the files it created or changed in
	// the session's working directory (Result.Files, bounded as a
	// program's), as Program.ReturnFiles does for a program.
	ReturnFiles bool
}

// SandboxFactory opens sessions. The RLM engine receives one and never
// imports backend code: the CLI (or a library user) decides what serves the
// sessions.
type SandboxFactory func(ctx context.Context, opts SessionOptions) (Session, error)
