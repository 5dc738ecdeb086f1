package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
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
	// exited reports whether the plugin process behind the connection
	// ended; nil when unknown (see Exited).
	exited func() bool
	// stderr is the tail of what the plugin process wrote to stderr; nil
	// when unknown. Errors that report the plugin's death carry it.
	stderr func() string
	// broken is set once a call found the plugin's handler panicking
	// (pb.PanickedTrailer): the process lives on, but is not to be used
	// again, so Exited reports it as gone.
	broken atomic.Bool
	// host is what this host can enforce; see ResolveIsolation.
	host isolation.Probe

	mu   sync.Mutex
	info *core.Info // cached by declaration
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

// Exited reports whether the plugin process this runtime launched has
// ended (crashed or killed), or panicked in a call and must not be used
// again. It is false when that is not known: a connection to the daemon,
// or a runtime built with NewRuntime.
func (r *Runtime) Exited() bool { return r.broken.Load() || r.exited != nil && r.exited() }

// Info asks the runtime what it is.
func (r *Runtime) Info(ctx context.Context) (*core.Info, error) {
	var tr metadata.MD
	info, err := r.Client.Info(ctx, &pb.InfoRequest{Runtime: r.Name}, grpc.Trailer(&tr))
	if err != nil {
		return nil, r.callError(err, tr)
	}
	return pb.InfoFromProto(info), nil
}

// exitWait bounds how long an error report waits for a plugin whose
// connection was lost to end, which is when all its stderr has been read.
const exitWait = 2 * time.Second

// callError translates a failed call's error (pb.Error) and says what the
// plugin said as it failed: the panic and stack of a handler that panicked
// (pb.PanickedTrailer in tr; the runtime is then broken, see Exited), or
// the stderr tail of a plugin whose connection was lost.
func (r *Runtime) callError(err error, tr metadata.MD) error {
	if msg, ok := panicked(err, tr); ok {
		r.broken.Store(true)
		return fmt.Errorf("plugin %s panicked: %s", r.pluginName(), msg)
	}
	err = pb.Error(err)
	if errors.Is(err, core.ErrRuntimeLost) {
		if note := r.DeathNote(); note != "" {
			err = fmt.Errorf("%w%s", err, note)
		}
	}
	return err
}

// panicked returns the panic a call's handler hit, from its status, when
// the server said so (pb.PanickedTrailer).
func panicked(err error, tr metadata.MD) (string, bool) {
	if len(tr.Get(pb.PanickedTrailer)) == 0 {
		return "", false
	}
	return status.Convert(err).Message(), true
}

// DeathNote is what the plugin process wrote to stderr before it ended
// (bounded: its tail), as a paragraph to append to an error that reports
// its death: "" when rlm did not launch it (the daemon), it wrote nothing,
// or it is still running after exitWait. A Go plugin's panic and stack
// are there.
func (r *Runtime) DeathNote() string {
	if r.stderr == nil || r.exited == nil {
		return ""
	}
	for deadline := time.Now().Add(exitWait); !r.exited(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return ""
		}
	}
	s := strings.TrimSpace(r.stderr())
	if s == "" {
		return ""
	}
	return "\nplugin stderr:\n" + s
}

// Run executes one program.
//
// The program runs at the isolation Limits.Isolation resolves to for this
// runtime's plugin (Isolation); a level or limit the plugin cannot honour,
// or requirements from a plugin that declares no "requirements"
// capability (core.CheckRequirements), is a RefusedError and nothing runs. A plugin that reports another level
// than the one it was asked for broke its declaration: that is an error,
// not a result.
func (r *Runtime) Run(ctx context.Context, p core.Program) (*core.Result, error) {
	limits, err := r.Sandbox(ctx, p.Limits, false)
	if err != nil {
		return nil, err
	}
	// Requirements the plugin cannot install are refused here, from its
	// declaration, so that this holds for every plugin and every caller
	// (exec, serve, the daemon), not only for plugins that check.
	if err := core.CheckRequirements(r.declared(), r.pluginName(), p.Requirements); err != nil {
		return nil, err
	}
	p.Limits = limits
	req := pb.ProgramProto(p)
	req.Runtime = r.Name
	var hdr, tr metadata.MD
	res, err := r.Client.Run(ctx, req, grpc.Header(&hdr), grpc.Trailer(&tr))
	if err != nil {
		if msg, ok := panicked(err, tr); ok {
			r.broken.Store(true)
			return &core.Result{EndedBy: ending.Crashed, ExitCode: -1, Backend: r.Backend,
				Error: fmt.Sprintf("plugin %s panicked while running the program; %s\n%s", r.pluginName(), core.PartlyRun, msg)}, nil
		}
		if lost := RunLost(ctx, err, hdr); lost != "" {
			return &core.Result{EndedBy: ending.Crashed, ExitCode: -1, Backend: r.Backend,
				Error: fmt.Sprintf("the %s runtime (%s) exited while the program was running (%s); %s%s", r.Name, r.Backend, lost, core.PartlyRun, r.DeathNote())}, nil
		}
		return nil, r.callError(err, tr)
	}
	out := pb.ResultFromProto(res)
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

// Check validates code without running it. A runtime whose plugin declares
// no "check" capability, or answers that it has no checker, is a
// RefusedError (core.CheckSyntaxCheck): the caller asked for something
// the runtime does not offer, which is not the code's failure.
func (r *Runtime) Check(ctx context.Context, code string) (ok bool, msg string, err error) {
	info, err := r.Declared(ctx)
	if err != nil {
		return false, "", err
	}
	if err := core.CheckSyntaxCheck(info, r.pluginName()); err != nil {
		return false, "", err
	}
	var tr metadata.MD
	res, err := r.Client.Check(ctx, &pb.CheckRequest{Code: []byte(code), Runtime: r.Name}, grpc.Trailer(&tr))
	if err != nil {
		err = r.callError(err, tr)
		if errors.Is(err, core.ErrUnsupported) {
			return false, "", &core.RefusedError{Kind: core.Invalid, Err: err,
				Msg: fmt.Sprintf("plugin %s declares a syntax check but has none (%v): drop --check to run the code", r.pluginName(), err)}
		}
		return false, "", err
	}
	return res.GetOk(), res.GetMessage(), nil
}
