package daemon

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/ending"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// runtimeService is the runtime gRPC service on the daemon's socket.
type runtimeService struct {
	pb.UnimplementedRuntimeServer
	s *Server
}

func (r *runtimeService) hostFor(name string) (*host, error) {
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "the request names no runtime")
	}
	return r.s.host(name), nil
}

// runClient is the client of the plugin that serves runs of runtime name,
// launched if need be: Info and Check are passed on to it as they are.
func (r *runtimeService) runClient(name string) (pb.RuntimeClient, error) {
	h, err := r.hostFor(name)
	if err != nil {
		return nil, err
	}
	return h.client(forRuns)
}

// Info with no runtime answers for the daemon itself (the liveness ping);
// with one, for that runtime as served by the daemon.
func (r *runtimeService) Info(ctx context.Context, req *pb.InfoRequest) (*pb.InfoResponse, error) {
	if req.GetRuntime() == "" {
		return &pb.InfoResponse{Name: "rlm-daemon", Backend: BackendName, Available: true}, nil
	}
	c, err := r.runClient(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx, req)
	if err != nil {
		return nil, err
	}
	info.Backend = BackendName
	return info, nil
}

func (r *runtimeService) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	c, err := r.runClient(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	return c.Check(ctx, req)
}

func (r *runtimeService) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	h, err := r.hostFor(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	h.runs.Add(1)
	if h.warmRunnable(req) {
		if w, err := h.warmWorker(ctx); err == nil {
			defer w.Close()
			res, err := w.runCell(ctx, string(req.GetCode()), time.Duration(req.GetLimits().GetWallMs())*time.Millisecond)
			if err != nil {
				if ctx.Err() != nil {
					return nil, status.Error(codes.Aborted, err.Error())
				}
				// The cell was sent: it may have run. Never run it again.
				h.workersLost.Add(1)
				return crashed(h.name, errText(err)), nil
			}
			h.warmRuns.Add(1)
			res.Backend = BackendName
			res.StateLost = false // the worker is discarded: no state to lose
			res.Value = nil       // a program runs as a script: no final value
			asProgramEnding(res)
			if res.GetEndedBy() == pb.EndedBy_TIMEOUT {
				// Say it as a program run does, not as a cell would.
				res.Error = ending.Timeout.Message(int64(time.Duration(req.GetLimits().GetWallMs()) * time.Millisecond))
			}
			return res, nil
		}
		// No warm worker could be had (the runtime's sessions are
		// failing): the plugin's own Run still works.
	}
	// A plugin that died before it took the request (while idle) is
	// launched again and asked once more: nothing ran. One that died after
	// it took the request may have run part of the program: it is reported
	// crashed and never run again.
	res, err := client.Call(ctx, h.plugs[forRuns], func(rt *client.Runtime) (*pb.Result, error) {
		var hdr metadata.MD
		res, err := rt.Client.Run(ctx, req, grpc.Header(&hdr))
		if lost := client.RunLost(ctx, err, hdr); lost != "" {
			return crashed(h.name, lost), nil
		}
		return res, err
	})
	if err != nil {
		// the gRPC status of the plugin or of the launch, not
		// client.Call's wrapping of it
		return nil, client.Cause(err)
	}
	res.Backend = BackendName
	return res, nil
}

// asProgramEnding restates a warm cell whose interpreter ended itself
// (os._exit(3), a signal it sent itself) as the program run it stands in
// for would end: exit or signal with the status, and no "the interpreter
// died" error, which speaks of a session the caller never had. A worker
// killed by a limit keeps its ending (memory, processes).
func asProgramEnding(res *pb.Result) {
	if res.GetEndedBy() != pb.EndedBy_CRASHED || res.GetExitCode() < 0 {
		return
	}
	res.EndedBy, res.Error = pb.EndedBy_EXIT, ""
	if res.GetSignal() != "" {
		res.EndedBy = pb.EndedBy_SIGNAL
	}
}

// crashed is the result of a program whose plugin (or warm worker) died
// after taking it: it may have partly run, so it is reported, not retried.
func crashed(runtime, why string) *pb.Result {
	return &pb.Result{EndedBy: pb.EndedBy_CRASHED, ExitCode: -1, Backend: BackendName,
		Error: fmt.Sprintf("the %s runtime plugin exited while the program was running (%s); %s", runtime, why, core.PartlyRun)}
}

// Session proxies a client's session to a worker of its own.
func (r *runtimeService) Session(cs pb.Runtime_SessionServer) error {
	first, err := cs.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "a session starts with an open message")
	}
	h, err := r.hostFor(open.GetRuntime())
	if err != nil {
		return err
	}
	ctx := cs.Context()
	t0 := time.Now()
	var w *worker
	warm := h.warmFits(open)
	if warm {
		w, err = h.warmWorker(ctx)
	} else {
		var c pb.RuntimeClient
		if c, err = h.client(forSessions); err == nil {
			w, err = openWorker(ctx, c, open)
		}
	}
	if err != nil {
		return cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{
			Message: fmt.Sprintf("the daemon could not open a %s session: %v", h.name, errText(err)), Fatal: true}}})
	}
	defer w.Close()
	h.sessions.Add(1)
	if warm {
		h.warmHits.Add(1)
	}
	opened := proto.Clone(w.opened).(*pb.Opened)
	opened.Backend = BackendName
	opened.StartupMs = time.Since(t0).Milliseconds()
	if err := cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: opened}}); err != nil {
		return err
	}

	// Client to worker. A warm worker was opened without the client's
	// wall limit, so it is applied to each cell that relies on it.
	wall := open.GetLimits().GetWallMs()
	pctx, clientDone := context.WithCancel(ctx)
	defer clientDone()
	go func() {
		defer clientDone()
		for {
			m, err := cs.Recv()
			if err != nil || m.GetClose() != nil {
				return
			}
			if ex := m.GetExecute(); ex != nil && warm && ex.GetTimeoutMs() == 0 {
				ex.TimeoutMs = wall
			}
			if err := w.send(m); err != nil {
				return
			}
		}
	}()

	// Worker to client, until either side is done.
	for {
		m, err := w.next(pctx)
		if err != nil {
			if pctx.Err() != nil {
				return nil // the client closed or went away: its worker is killed
			}
			h.workersLost.Add(1)
			return cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{
				Message: err.Error(), Fatal: true}}})
		}
		if res := m.GetResult().GetResult(); res != nil {
			res.Backend = BackendName
		}
		if err := cs.Send(m); err != nil {
			return nil
		}
		if e := m.GetError(); e != nil && e.GetFatal() {
			return nil
		}
	}
}

// errText is a gRPC error's message without the "rpc error: code = ..."
// prefix.
func errText(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}
