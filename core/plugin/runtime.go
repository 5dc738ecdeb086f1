package plugin

import (
	"context"

	"github.com/rlmkit/rlm/core"
)

// Runtime is what a plugin implements; Serve puts the one gRPC adapter
// (NewServer) in front of it. The adapter, not the runtime, does what every
// runtime would otherwise repeat:
//
//   - it refuses a request whose environment or isolation level is
//     malformed (CheckRequest) before the runtime sees it;
//   - it turns the runtime's errors into gRPC codes (Invalid:
//     InvalidArgument, Unavailable: FailedPrecondition, anything else:
//     Internal), which the host reads back as core.RefusedError;
//   - it stamps the backend the runtime's Info declares on every result
//     that names none;
//   - for a runtime with Sessions, it reads and checks the open message,
//     announces the session (Opened, with the start-up time it measured),
//     serves the stream (ServeSession) and closes the session after.
//
// Requests and results are core's types (core.Program, core.Result,
// core.SessionOptions); the adapter translates the wire's messages with
// core/runtimepb/translate.go, the one place that does, so a runtime
// never sees core/runtimepb.
type Runtime interface {
	// Info says what the runtime is and whether it can run here. The host
	// asks it when it starts the plugin, and the adapter keeps the first
	// answer for its checks and stamps (asking again while Info fails), so
	// it should answer at once (a missing tool is UnavailableReason, not an
	// error).
	Info(ctx context.Context) (core.Info, error)
	// Run executes one program, already checked by CheckRequest. Its
	// Limits.Isolation is the level the host resolved ("" for the
	// runtime's default).
	Run(ctx context.Context, p core.Program) (*core.Result, error)
	// Check validates code without running it: ok false with the
	// checker's message for code that does not compile.
	Check(ctx context.Context, code string) (ok bool, message string, err error)
}

// Sessions is implemented by a Runtime that offers REPL sessions; the
// adapter answers Unimplemented for one that does not.
type Sessions interface {
	// OpenSession starts an interpreter for an open message the adapter
	// has checked (environment, isolation level, context kind). Its error
	// ends the session before it opened, its text shown to the user.
	// Bridges and ReturnFiles are the host's and arrive empty: a cell's
	// model queries come to REPL.Execute's callback, its files per cell.
	OpenSession(ctx context.Context, opts core.SessionOptions) (*Session, error)
}

// Session is a started REPL as the adapter serves it.
type Session struct {
	REPL REPL
	// RuntimeVersion is announced in Opened ("3.11.2").
	RuntimeVersion string
	// Options are ServeSession's; the adapter sets Limits, and Backend to
	// the one Info declares (Options.Backend when Info has not answered).
	Options SessionOptions
	// Close, when not nil, runs after the stream ends: it stops the
	// interpreter and removes what the session created.
	Close func()
}

// Invalid marks err as the request's fault (a bad file name, an
// unsupported option): the host answers it as a refusal (HTTP 400, exit
// code 2), and nothing ran. It is a core.RefusedError of kind Invalid.
func Invalid(err error) error { return core.Refuse(core.Invalid, err) }

// Unavailable marks err as the runtime's inability to run here (its tool
// is missing, the host cannot give the isolation asked for): the host
// answers it as a refusal (HTTP 503), and nothing ran. It is a
// core.RefusedError of kind Unavailable.
func Unavailable(err error) error { return core.Refuse(core.Unavailable, err) }
