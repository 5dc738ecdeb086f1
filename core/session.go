package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/calls"
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
	// no context, meaning "the session's own context".
	RLMQuery func(ctx context.Context, task string, sub *string) (string, error)
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
	Bridges Bridges
	// ReturnFiles asks every cell for the files it created or changed in
	// the session's working directory (Result.Files, bounded as a
	// program's), as Program.ReturnFiles does for a program.
	ReturnFiles bool
}

// SandboxFactory opens sessions. The RLM engine receives one and never
// imports backend code: the CLI (or a library user) decides what serves the
// sessions.
type SandboxFactory func(ctx context.Context, opts SessionOptions) (Session, error)

// OpenSession starts a REPL session on the runtime, at the isolation
// Limits.Isolation resolves to for the plugin's sessions (Isolation); a
// level or limit they cannot honour is a RefusedError.
func (r *Runtime) OpenSession(ctx context.Context, opts SessionOptions) (Session, error) {
	limits, err := r.Sandbox(ctx, opts.Limits, true)
	if err != nil {
		return nil, err
	}
	name := opts.Runtime
	if name == "" {
		name = r.Name
	}
	opts.Limits, opts.Runtime = limits, name
	stream, cancel, _, err := pb.StartSession(ctx, r.Client, SessionProto(opts))
	if err != nil {
		return nil, rpcError(err)
	}
	s := &session{
		stream:      stream,
		cancel:      cancel,
		bridges:     opts.Bridges,
		returnFiles: opts.ReturnFiles,
		done:        make(chan struct{}),
	}
	go s.loop()
	return s, nil
}

type session struct {
	stream      pb.Runtime_SessionClient
	cancel      context.CancelFunc
	bridges     Bridges
	returnFiles bool

	sendMu sync.Mutex
	// calls get the response carrying their request id; its error is set
	// once the stream is gone.
	calls  calls.Table[*pb.SessionResponse]
	done   chan struct{}
	mu     sync.Mutex
	closed bool
}

func (s *session) send(m *pb.SessionRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(m)
}

// loop routes responses to waiters and serves callbacks.
func (s *session) loop() {
	defer close(s.done)
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			s.fail(rpcError(err))
			return
		}
		switch m := msg.GetMsg().(type) {
		case *pb.SessionResponse_Result:
			s.deliver(m.Result.GetId(), msg)
		case *pb.SessionResponse_Variable:
			s.deliver(m.Variable.GetId(), msg)
		case *pb.SessionResponse_Callback:
			go s.serveCallback(m.Callback)
		case *pb.SessionResponse_Error:
			if m.Error.GetFatal() {
				s.fail(errors.New(m.Error.GetMessage()))
				return
			}
		}
	}
}

func (s *session) deliver(id uint64, msg *pb.SessionResponse) { s.calls.Answer(id, msg) }

func (s *session) fail(err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		err = errors.New("session closed")
	} else if errors.Is(err, context.Canceled) || err == nil {
		err = errors.New("session ended")
	}
	s.calls.Fail(err)
}

func (s *session) serveCallback(cb *pb.Callback) {
	results, err := s.runCallback(QueryFromProto(cb))
	reply := &pb.CallbackReply{CallId: cb.GetCallId(), Results: results}
	if err != nil {
		reply.Error = err.Error()
		reply.Results = nil
	}
	_ = s.send(&pb.SessionRequest{Msg: &pb.SessionRequest_CallbackReply{CallbackReply: reply}})
}

// runCallback answers every prompt of a (possibly batched) query, at most
// Bridges.MaxConcurrent at a time, results in prompt order.
func (s *session) runCallback(q Query) ([]string, error) {
	ctx := context.Background()
	prompts := q.Prompts
	one := func(i int) (string, error) {
		switch q.Kind {
		case "llm_query":
			if s.bridges.LLMQuery == nil {
				return "", errors.New("llm_query is not available: this session has no LLM configured")
			}
			return s.bridges.LLMQuery(ctx, prompts[i], q.Model)
		case "rlm_query":
			if s.bridges.RLMQuery == nil {
				return "", errors.New("rlm_query is not available: this session has no LLM configured")
			}
			return s.bridges.RLMQuery(ctx, prompts[i], q.Context(i))
		}
		return "", fmt.Errorf("unknown callback %q", q.Kind)
	}
	results := make([]string, len(prompts))
	if len(prompts) == 1 {
		r, err := one(0)
		results[0] = r
		return results, err
	}
	limit := s.bridges.MaxConcurrent
	if limit <= 0 {
		limit = 8
	}
	sem := make(chan struct{}, limit)
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = one(i)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("query %d of %d: %w", i+1, len(prompts), err)
		}
	}
	return results, nil
}

func (s *session) call(ctx context.Context, build func(id uint64) *pb.SessionRequest, onCancel func()) (*pb.SessionResponse, error) {
	id, ch, err := s.calls.Start()
	if err != nil {
		return nil, err
	}
	if err := s.send(build(id)); err != nil {
		s.calls.Drop(id)
		return nil, rpcError(err)
	}
	select {
	case msg, ok := <-ch:
		if !ok {
			return nil, s.failure()
		}
		return msg, nil
	case <-ctx.Done():
		if onCancel != nil {
			onCancel()
			// The runtime answers a cancelled cell promptly; wait for it so
			// the next cell does not see this one's result.
			select {
			case msg, ok := <-ch:
				if ok {
					return msg, nil
				}
				return nil, s.failure()
			case <-time.After(10 * time.Second):
			}
		}
		return nil, ctx.Err()
	}
}

func (s *session) failure() error {
	if err := s.calls.Err(); err != nil {
		return err
	}
	return errors.New("session ended")
}

func (s *session) Execute(ctx context.Context, code string, timeout time.Duration) (*Result, error) {
	return s.RunCell(ctx, Cell{Code: code, Timeout: timeout})
}

func (s *session) RunCell(ctx context.Context, c Cell) (*Result, error) {
	ex := &pb.Execute{Code: []byte(c.Code), TimeoutMs: WireMs(c.Timeout), ReturnFiles: s.returnFiles}
	for _, f := range c.Files {
		ex.Files = append(ex.Files, &pb.File{Path: f.Path, Data: f.Data})
	}
	msg, err := s.call(ctx, func(id uint64) *pb.SessionRequest {
		ex.Id = id
		return &pb.SessionRequest{Msg: &pb.SessionRequest_Execute{Execute: ex}}
	}, func() { _ = s.Cancel() })
	if err != nil {
		return nil, err
	}
	if fe := msg.GetResult().GetFilesError(); fe != "" {
		return nil, &RefusedError{Code: codes.InvalidArgument, Msg: fe}
	}
	return FromProto(msg.GetResult().GetResult()), nil
}

func (s *session) Variable(ctx context.Context, name string) (json.RawMessage, bool, error) {
	msg, err := s.call(ctx, func(id uint64) *pb.SessionRequest {
		return &pb.SessionRequest{Msg: &pb.SessionRequest_GetVariable{GetVariable: &pb.GetVariable{Id: id, Name: name}}}
	}, nil)
	if err != nil {
		return nil, false, err
	}
	v := msg.GetVariable()
	if v.GetError() != "" {
		return nil, false, errors.New(v.GetError())
	}
	if !v.GetFound() {
		return nil, false, nil
	}
	return json.RawMessage(v.GetJson()), true, nil
}

func (s *session) Cancel() error {
	return rpcError(s.send(&pb.SessionRequest{Msg: &pb.SessionRequest_Cancel{Cancel: &pb.Cancel{}}}))
}

func (s *session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	_ = s.send(&pb.SessionRequest{Msg: &pb.SessionRequest_Close{Close: &pb.Close{}}})
	s.sendMu.Lock()
	_ = s.stream.CloseSend()
	s.sendMu.Unlock()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	s.cancel()
	return nil
}
