package core

import "errors"

// ErrUnsupported is returned for an operation the runtime does not offer.
var ErrUnsupported = errors.New("not supported by this runtime")

// ErrRuntimeLost is wrapped by the error of a call whose plugin or daemon
// went away: a caller that keeps a runtime, such as the HTTP server, checks
// it with errors.Is and launches the plugin again.
var ErrRuntimeLost = errors.New("runtime connection lost (the plugin or daemon exited)")

// PartlyRun ends the error of a run whose plugin died under it.
const PartlyRun = "the program may have partly run, and it was not run again"

// RefusalKind says why a request was refused, which decides how a door
// answers it: a bad request (HTTP 400, exit 2) or a runtime that cannot
// serve it here (HTTP 503, exit 2).
type RefusalKind uint8

// The refusal kinds.
const (
	// Invalid: the request itself is wrong (a file clashing with the
	// program file, a malformed environment name, a limit that cannot
	// hold); the caller must change it.
	Invalid RefusalKind = iota + 1
	// Unavailable: the runtime cannot run it here (its tool is missing,
	// the host cannot give the isolation asked for).
	Unavailable
)

// RefusedError is a refusal of a request: nothing ran, and the fix is the
// caller's. Plugins return it (core/plugin's Invalid and Unavailable build
// it) and the host reads it back, kind and text intact, whatever carried
// it (core/runtimepb translates it to and from the wire's status codes).
type RefusedError struct {
	Kind RefusalKind
	Msg  string
	// Err is the refusal's cause, when it was built from an error (for
	// errors.Is and errors.As); it does not cross the wire.
	Err error
}

func (e *RefusedError) Error() string { return e.Msg }

func (e *RefusedError) Unwrap() error { return e.Err }

// Refuse is a RefusedError of kind k with err's text and err as its cause.
func Refuse(k RefusalKind, err error) error {
	if err == nil {
		return nil
	}
	return &RefusedError{Kind: k, Msg: err.Error(), Err: err}
}
