package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
// ended (crashed or killed). It is false when that is not known: a
// connection to the daemon, or a runtime built with NewRuntime.
func (r *Runtime) Exited() bool { return r.exited != nil && r.exited() }

// Info asks the runtime what it is.
func (r *Runtime) Info(ctx context.Context) (*core.Info, error) {
	info, err := r.Client.Info(ctx, &pb.InfoRequest{Runtime: r.Name})
	if err != nil {
		return nil, pb.Error(err)
	}
	return pb.InfoFromProto(info), nil
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
	var hdr metadata.MD
	res, err := r.Client.Run(ctx, req, grpc.Header(&hdr))
	if err != nil {
		if lost := RunLost(ctx, err, hdr); lost != "" {
			return &core.Result{EndedBy: ending.Crashed, ExitCode: -1, Backend: r.Backend,
				Error: fmt.Sprintf("the %s runtime (%s) exited while the program was running (%s); %s", r.Name, r.Backend, lost, core.PartlyRun)}, nil
		}
		return nil, pb.Error(err)
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
	res, err := r.Client.Check(ctx, &pb.CheckRequest{Code: []byte(code), Runtime: r.Name})
	if err != nil {
		err = pb.Error(err)
		if errors.Is(err, core.ErrUnsupported) {
			return false, "", &core.RefusedError{Kind: core.Invalid, Err: err,
				Msg: fmt.Sprintf("plugin %s declares a syntax check but has none (%v): drop --check to run the code", r.pluginName(), err)}
		}
		return false, "", err
	}
	return res.GetOk(), res.GetMessage(), nil
}
