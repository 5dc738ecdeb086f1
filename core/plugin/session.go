package plugin

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/calls"
)

// CallbackFunc forwards a cell's llm_query / rlm_query to the session's
// client and returns one answer per prompt (a runtime hands a guest only
// answers that pass core.Query's CheckAnswers). It is an alias so that a
// runtime's own callback type can be one too, with no conversion.
type CallbackFunc = func(ctx context.Context, q core.Query) ([]string, error)

// REPL is what a runtime needs to provide for ServeSession to serve its
// Session RPC: a live interpreter that runs one cell at a time.
type REPL interface {
	// Execute runs one cell. cb answers the cell's model queries over the
	// stream; an error is only for a cell that could not be run at all.
	Execute(ctx context.Context, code string, timeout time.Duration, cb CallbackFunc) (*core.Result, error)
	// Variable reads a global as JSON; found is false when it is not
	// defined.
	Variable(ctx context.Context, name string) (found bool, jsonValue string, err error)
	// Interrupt stops the running cell as gently as the runtime can; it is
	// called from the stream's receive loop, beside a running Execute.
	Interrupt() error
}

// SessionOptions describe what ServeSession stamps on every result, and
// where a session's files are.
type SessionOptions struct {
	Backend   string        // "native", "pyodide"
	Isolation string        // reported when the runtime's result has none
	Wall      time.Duration // a cell's timeout when Execute asks for none (0: defaults.Timeout)
	// Dir returns the session's working directory on this host, where the
	// running interpreter sees it now (a sandbox may work in a private
	// copy, see internal/sandbox/isolate). A cell's Execute.files are written there
	// (program.PutFiles) before it runs, and with Execute.return_files the
	// files it created or changed there come back in its result, as a
	// program's do (program.Snapshot). Nil: the session takes no files
	// (a cell that brings some is refused) and returns none.
	Dir func() string
	// CreateAs, when not nil, runs each step that creates a cell's file or
	// directory in Dir (isolate.Cmd.CreateAs: a namespace sandbox's
	// directory takes only entries of its own user's).
	CreateAs func(create func() error) error
	// Limits are the session's (from its open message): MaxFiles and
	// MaxFileBytes bound the files a cell returns.
	Limits core.Limits
}

// ReceiveOpen reads a Session stream's first message, which must open it.
func ReceiveOpen(stream pb.Runtime_SessionServer) (*pb.OpenSession, error) {
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	open := first.GetOpen()
	if open == nil {
		return nil, status.Error(codes.InvalidArgument, "the first session message must be open")
	}
	return open, nil
}

// SendFatal tells the client the session cannot go on (typically before it
// was opened) and lets the stream end.
func SendFatal(stream pb.Runtime_SessionServer, msg string) error {
	return stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{Message: msg, Fatal: true}}})
}

// ServeSession serves an opened session until the client closes it or goes
// away. The caller has already read the open message, started repl and sent
// Opened; it closes repl when this returns.
//
// The receive loop never blocks on a cell: cells and variable reads run one
// at a time on a worker goroutine, while the loop keeps routing callback
// replies and cancels to it. That is what lets a cell wait on a model answer
// that arrives on the same stream.
func ServeSession(stream pb.Runtime_SessionServer, repl REPL, opts SessionOptions) error {
	ss := &sessionServer{stream: stream, repl: repl, opts: opts}
	return ss.serve()
}

type sessionServer struct {
	stream pb.Runtime_SessionServer
	repl   REPL
	opts   SessionOptions

	sendMu sync.Mutex
	// queries are the cell's model queries waiting for the client's reply.
	queries calls.Table[*pb.CallbackReply]
}

func (ss *sessionServer) send(m *pb.SessionResponse) error {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	return ss.stream.Send(m)
}

func (ss *sessionServer) serve() error {
	work := make(chan *pb.SessionRequest, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for req := range work {
			ss.handle(req)
		}
	}()
	defer func() {
		ss.queries.Fail(errClientGone)
		close(work)
		_ = ss.repl.Interrupt()
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
			_ = ss.repl.Interrupt()
		case *pb.SessionRequest_CallbackReply:
			ss.queries.Answer(m.CallbackReply.GetCallId(), m.CallbackReply)
		case *pb.SessionRequest_Close:
			return nil
		case *pb.SessionRequest_Open:
			_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{Message: "session already open"}}})
		}
	}
}

func (ss *sessionServer) handle(req *pb.SessionRequest) {
	ctx := ss.stream.Context()
	switch m := req.GetMsg().(type) {
	case *pb.SessionRequest_Execute:
		ex := m.Execute
		timeout := time.Duration(ex.GetTimeoutMs()) * time.Millisecond
		if timeout <= 0 {
			timeout = ss.opts.Wall
		}
		if timeout <= 0 {
			timeout = defaults.Timeout
		}
		dir := ss.dir()
		if files := ex.GetFiles(); len(files) > 0 {
			err := errors.New("this runtime's sessions cannot take files")
			if dir != "" {
				err = program.PutFiles(dir, pb.FilesFromProto(files), ss.opts.CreateAs)
			}
			if err != nil {
				_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: ex.GetId(), FilesError: err.Error()}}})
				return
			}
		}
		var before *program.Snapshot
		if ex.GetReturnFiles() && dir != "" {
			s := program.TakeSnapshot(dir)
			before = &s
		}
		cell, err := ss.repl.Execute(ctx, string(ex.GetCode()), timeout, ss.callback)
		if err == nil && cell == nil {
			err = errors.New("the runtime returned no result and no error")
		}
		if err != nil {
			cell = &core.Result{ExitCode: -1, Error: err.Error(), EndedBy: ending.Crashed}
		}
		cell.Backend = ss.opts.Backend
		if cell.Isolation == "" {
			cell.Isolation = ss.opts.Isolation
		}
		if before != nil {
			// the directory again: a restarted sandbox works in a new copy
			if dir = ss.dir(); dir != "" {
				cell.Files, cell.FilesOmitted = before.Produced(dir, ss.opts.Limits)
			}
		}
		res := pb.ResultProto(cell)
		_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: ex.GetId(), Result: res}}})
	case *pb.SessionRequest_GetVariable:
		found, js, err := ss.repl.Variable(ctx, m.GetVariable.GetName())
		v := &pb.Variable{Id: m.GetVariable.GetId(), Found: found, Json: js}
		if err != nil {
			v.Error = err.Error()
		}
		_ = ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Variable{Variable: v}})
	}
}

// dir is the session's working directory now, or "" when it has none.
func (ss *sessionServer) dir() string {
	if ss.opts.Dir == nil {
		return ""
	}
	return ss.opts.Dir()
}

var errClientGone = errors.New("session client went away")

// callback forwards a cell's model query to the client and waits for its
// reply on the same stream.
func (ss *sessionServer) callback(ctx context.Context, q core.Query) ([]string, error) {
	id, ch, err := ss.queries.Start()
	if err != nil {
		return nil, err
	}
	if err := ss.send(&pb.SessionResponse{Msg: &pb.SessionResponse_Callback{Callback: pb.QueryProto(id, q)}}); err != nil {
		ss.queries.Drop(id)
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, errClientGone
		}
		if r.GetError() != "" {
			return nil, errors.New(r.GetError())
		}
		return r.GetResults(), nil
	case <-ctx.Done():
		ss.queries.Drop(id)
		return nil, ctx.Err()
	case <-ss.stream.Context().Done():
		return nil, errClientGone
	}
}
