package core

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// Runtime is a connection to one runtime service: a plugin process or the
// daemon. Both speak the same gRPC service, so this is the only client.
type Runtime struct {
	// Name is the runtime asked for ("python").
	Name string
	// Backend is what serves it: native, pyodide or daemon.
	Backend string
	// Plugin is the plugin binary's path, when a plugin serves it; errors
	// name it.
	Plugin string
	Client pb.RuntimeClient
	close  func()
	// host is what this host can enforce; see ResolveIsolation.
	host isolation.Probe

	mu   sync.Mutex
	info *Info // cached by declaration
}

// NewRuntime wraps a connected client; close (may be nil) ends the
// connection and whatever process serves it. host is the host's isolation
// probe (internal/sandbox/isolate.Available), against which every run's level is
// resolved; core takes it as a value so that it does not link the sandbox.
func NewRuntime(name, backend string, c pb.RuntimeClient, close func(), host isolation.Probe) *Runtime {
	return &Runtime{Name: name, Backend: backend, Client: c, close: close, host: host}
}

// Close releases the runtime (kills the plugin process it started).
func (r *Runtime) Close() {
	if r.close != nil {
		r.close()
		r.close = nil
	}
}

// Info asks the runtime what it is.
func (r *Runtime) Info(ctx context.Context) (*Info, error) {
	info, err := r.Client.Info(ctx, &pb.InfoRequest{Runtime: r.Name})
	if err != nil {
		return nil, rpcError(err)
	}
	return InfoFromProto(info), nil
}

// Program is one stateless run.
type Program struct {
	Code         string
	Files        []File
	Stdin        []byte
	Args         []string
	Env          map[string]string
	Requirements []string
	Install      *InstallOptions
	Limits       Limits
	Context      *Context
	ReturnFiles  bool
}

// Context is a session's `context` value.
type Context struct {
	Data []byte
	// Kind is "text" (a str in Python) or "json" (decoded).
	Kind string
}

// InstallOptions say where a program's requirements are installed from
// (pip's and npm's own options); nil means the tools' defaults.
type InstallOptions struct {
	IndexURL    string
	FindLinks   []string
	NoIndex     bool
	NPMRegistry string
}

// Run executes one program.
//
// The program runs at the isolation Limits.Isolation resolves to for this
// runtime's plugin (Isolation); a level or limit the plugin cannot honour
// is a RefusedError and nothing runs. A plugin that reports another level
// than the one it was asked for broke its declaration: that is an error,
// not a result.
func (r *Runtime) Run(ctx context.Context, p Program) (*Result, error) {
	limits, err := r.Sandbox(ctx, p.Limits, false)
	if err != nil {
		return nil, err
	}
	p.Limits = limits
	req := ProgramProto(p)
	req.Runtime = r.Name
	var hdr metadata.MD
	res, err := r.Client.Run(ctx, req, grpc.Header(&hdr))
	if err != nil {
		if lost := RunLost(ctx, err, hdr); lost != "" {
			return &Result{EndedBy: ending.Crashed, ExitCode: -1, Backend: r.Backend,
				Error: fmt.Sprintf("the %s runtime (%s) exited while the program was running (%s); %s", r.Name, r.Backend, lost, PartlyRun)}, nil
		}
		return nil, rpcError(err)
	}
	out := FromProto(res)
	if out.Backend == "" {
		out.Backend = r.Backend
	}
	if out.Isolation == "" {
		out.Isolation = limits.Isolation
	} else if out.Isolation != limits.Isolation {
		return nil, fmt.Errorf("plugin %s ran the program at isolation %s when asked for %s: it does not honour the levels it declares; fix or replace the plugin",
			r.pluginName(), out.Isolation, limits.Isolation)
	}
	return out, nil
}

// PartlyRun ends the error of a run whose plugin died under it.
const PartlyRun = "the program may have partly run, and it was not run again"

// RunLost says, for a failed Run call, whether the connection was lost
// after the server accepted the request (pb.AcceptedHeader in hdr): the
// program may then have started, so the call must not be retried. It
// returns the gRPC message, or "" when the request may be sent again (it
// never reached a live server) or failed for another reason.
func RunLost(ctx context.Context, err error, hdr metadata.MD) string {
	if ctx.Err() != nil || len(hdr.Get(pb.AcceptedHeader)) == 0 {
		return ""
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		return st.Message()
	}
	return ""
}

// Check validates code without running it.
func (r *Runtime) Check(ctx context.Context, code string) (ok bool, msg string, err error) {
	res, err := r.Client.Check(ctx, &pb.CheckRequest{Code: []byte(code), Runtime: r.Name})
	if err != nil {
		return false, "", rpcError(err)
	}
	return res.GetOk(), res.GetMessage(), nil
}

// ErrUnsupported is returned for an operation the runtime does not offer.
var ErrUnsupported = errors.New("not supported by this runtime")

// ErrRuntimeLost is wrapped by the error of a call whose plugin or daemon
// went away (gRPC Unavailable): a caller that keeps a runtime, such as the
// HTTP server, checks it with errors.Is and launches the plugin again.
var ErrRuntimeLost = errors.New("runtime connection lost (the plugin or daemon exited)")

// rpcError turns gRPC status errors into plain errors a user can read.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unimplemented:
		return fmt.Errorf("%w: %s", ErrUnsupported, st.Message())
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", ErrRuntimeLost, st.Message())
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.InvalidArgument, codes.FailedPrecondition:
		return &RefusedError{Code: st.Code(), Msg: st.Message()}
	}
	return errors.New(st.Message())
}

// RefusedError is a runtime's refusal of a request: InvalidArgument (the
// request is wrong, say a file clashing with the program file) or
// FailedPrecondition (the runtime cannot run here). Its text is the
// runtime's message alone; the code lets a server answer 400 or 503.
type RefusedError struct {
	Code codes.Code
	Msg  string
}

func (e *RefusedError) Error() string { return e.Msg }
