package python

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/isolate"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/plugins/python/internal/repl"
)

// Session serves one REPL over the bidirectional stream. The stream's
// receive loop never blocks on a cell: cells and variable reads run one at
// a time on a worker goroutine, while the loop keeps routing callback
// replies and cancels to it.
func (s *Server) Session(stream pb.Runtime_SessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "the first session message must be open")
	}
	t, err := s.Tool()
	if err != nil {
		return sendFatal(stream, "python runtime unavailable: "+err.Error())
	}
	level, rlimits, err := sessionIsolation(open.GetLimits())
	if err != nil {
		return sendFatal(stream, err.Error())
	}
	dir, err := os.MkdirTemp("", "rlm-session-")
	if err != nil {
		return sendFatal(stream, "creating the session directory: "+err.Error())
	}
	defer os.RemoveAll(dir)
	env := append(program.BaseEnv(dir), "PYTHONDONTWRITEBYTECODE=1")
	for k, v := range open.GetEnv() {
		env = append(env, k+"="+v)
	}
	start := time.Now()
	proc, err := repl.Start(stream.Context(), repl.Config{
		Python:         t.Exe,
		Env:            env,
		Dir:            dir,
		MaxOutputBytes: open.GetLimits().GetMaxOutputBytes(),
		Context:        open.GetContext(),
		Rlimits:        rlimits,
	})
	if err != nil {
		return sendFatal(stream, "starting python: "+err.Error())
	}
	defer proc.Close()
	ss := &serverSession{stream: stream, proc: proc, isolation: string(level), wall: time.Duration(open.GetLimits().GetWallMs()) * time.Millisecond,
		replies: map[uint64]chan *pb.CallbackReply{}}
	if err := ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{
		RuntimeVersion: t.Version, Backend: "native", StartupMs: time.Since(start).Milliseconds()}}}); err != nil {
		return err
	}
	return ss.serve()
}

func sendFatal(stream pb.Runtime_SessionServer, msg string) error {
	return stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{Message: msg, Fatal: true}}})
}

type serverSession struct {
	stream pb.Runtime_SessionServer
	proc   *repl.Process
	wall   time.Duration
	// isolation is reported in every cell's result.
	isolation string

	sendMu  sync.Mutex
	mu      sync.Mutex
	replies map[uint64]chan *pb.CallbackReply
}

func (ss *serverSession) send(m *pb.SessionResponse) error {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	return ss.stream.Send(m)
}

func (ss *serverSession) serve() error {
	work := make(chan *pb.SessionRequest, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for req := range work {
			ss.handle(req)
		}
	}()
	defer func() {
		close(work)
		ss.proc.Interrupt()
		<-done
	}()
	for {
		req, err := ss.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch m := req.GetMsg().(type) {
		case *pb.SessionRequest_Execute, *pb.SessionRequest_GetVariable:
			work <- req
		case *pb.SessionRequest_Cancel:
			_ = ss.proc.Interrupt()
		case *pb.SessionRequest_CallbackReply:
			ss.mu.Lock()
			ch := ss.replies[m.CallbackReply.GetCallId()]
			delete(ss.replies, m.CallbackReply.GetCallId())
			ss.mu.Unlock()
			if ch != nil {
				ch <- m.CallbackReply
			}
		case *pb.SessionRequest_Close:
			return nil
		case *pb.SessionRequest_Open:
			_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{Message: "session already open"}}})
		}
	}
}

func (ss *serverSession) handle(req *pb.SessionRequest) {
	ctx := ss.stream.Context()
	switch m := req.GetMsg().(type) {
	case *pb.SessionRequest_Execute:
		timeout := time.Duration(m.Execute.GetTimeoutMs()) * time.Millisecond
		if timeout <= 0 {
			timeout = ss.wall
		}
		if timeout <= 0 {
			timeout = program.DefaultWall
		}
		res, err := ss.proc.Execute(ctx, m.Execute.GetCode(), timeout, ss.callback)
		if err != nil {
			res = &pb.Result{ExitCode: -1, Error: err.Error(), EndedBy: pb.EndedBy_CRASHED}
		}
		res.Backend = "native"
		if res.Isolation == "" {
			res.Isolation = ss.isolation
		}
		_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: m.Execute.GetId(), Result: res}}})
	case *pb.SessionRequest_GetVariable:
		found, js, err := ss.proc.Variable(ctx, m.GetVariable.GetName())
		v := &pb.Variable{Id: m.GetVariable.GetId(), Found: found, Json: js}
		if err != nil {
			v.Error = err.Error()
		}
		_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Variable{Variable: v}})
	}
}

// callback forwards a cell's llm_query / rlm_query to the client and waits
// for its reply on the same stream.
func (ss *serverSession) callback(ctx context.Context, cb *pb.Callback) ([]string, error) {
	ch := make(chan *pb.CallbackReply, 1)
	ss.mu.Lock()
	ss.replies[cb.GetCallId()] = ch
	ss.mu.Unlock()
	if err := ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Callback{Callback: cb}}); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.GetError() != "" {
			return nil, errors.New(r.GetError())
		}
		return r.GetResults(), nil
	case <-ctx.Done():
		ss.mu.Lock()
		delete(ss.replies, cb.GetCallId())
		ss.mu.Unlock()
		return nil, ctx.Err()
	case <-ss.stream.Context().Done():
		return nil, errors.New("session client went away")
	}
}

// sessionIsolation is what a REPL session can honour of the requested
// isolation. The interpreter lives as long as the session and talks over
// pipes the driver owns, so it is not started through core/isolate: at
// level process it gets the same rlimits core/isolate gives a program
// (memory through RLIMIT_DATA, so a runaway allocation is a MemoryError
// in the cell, not a dead session; processes; file size), in its own
// process group with the scrubbed environment and a private directory.
// CPU time is not limited: it would add up over every cell of the session
// (each cell's wall clock is). Namespace isolation of sessions is not
// implemented, and asking for it is an error rather than a quiet downgrade.
func sessionIsolation(l *pb.Limits) (isolate.Level, []repl.Rlimit, error) {
	level, err := isolate.ParseLevel(l.GetIsolation())
	if err != nil {
		return "", nil, err
	}
	switch level {
	case isolate.LevelNone:
		return level, nil, nil
	case isolate.LevelNamespace:
		return "", nil, fmt.Errorf("isolation namespace is not available for python REPL sessions (rlm run, exec --context): use --isolation process, or --backend pyodide for a WebAssembly sandbox")
	}
	spec := isolate.Spec{MemoryBytes: l.GetMemoryBytes(), MaxProcesses: l.GetMaxProcesses(), FileSizeBytes: l.GetMaxDiskBytes()}
	var out []repl.Rlimit
	for _, r := range isolate.Rlimits(spec, false, false) {
		out = append(out, repl.Rlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max})
	}
	return level, out, nil
}
