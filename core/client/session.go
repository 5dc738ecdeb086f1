package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/calls"
)

// OpenSession starts a REPL session on the runtime, at the isolation
// Limits.Isolation resolves to for the plugin's sessions (Isolation); a
// level or limit they cannot honour is a RefusedError.
func (r *Runtime) OpenSession(ctx context.Context, opts core.SessionOptions) (core.Session, error) {
	limits, err := r.Sandbox(ctx, opts.Limits, true)
	if err != nil {
		return nil, err
	}
	// As for a program (Run): requirements the plugin cannot install are
	// refused here, rather than a session opened without them.
	if err := core.CheckRequirements(r.declared(), r.pluginName(), opts.Requirements); err != nil {
		return nil, err
	}
	name := opts.Runtime
	if name == "" {
		name = r.Name
	}
	opts.Limits, opts.Runtime = limits, name
	stream, cancel, _, err := pb.StartSession(ctx, r.Client, pb.SessionProto(opts))
	if err != nil {
		return nil, pb.Error(err)
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
	bridges     core.Bridges
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
			s.fail(pb.Error(err))
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
	results, err := s.runCallback(pb.QueryFromProto(cb))
	reply := &pb.CallbackReply{CallId: cb.GetCallId(), Results: results}
	if err != nil {
		reply.Error = err.Error()
		reply.Results = nil
	}
	_ = s.send(&pb.SessionRequest{Msg: &pb.SessionRequest_CallbackReply{CallbackReply: reply}})
}

// NoLLMHint ends the error of a session without bridges: how rlm's
// commands give sessions a model.
const NoLLMHint = " (rlm serve, rlm mcp and rlm exec --context give their sessions one with --provider, [run] provider in rlm.toml or $RLM_PROVIDER)"

// runCallback answers every prompt of a (possibly batched) query, at most
// Bridges.MaxConcurrent at a time, results in prompt order; in a batch a
// prompt that failed answers core.QueryErrorPrefix and its error.
func (s *session) runCallback(q core.Query) ([]string, error) {
	ctx := context.Background()
	prompts := q.Prompts
	one := func(i int) (string, error) {
		switch q.Kind {
		case "llm_query":
			if s.bridges.LLMQuery == nil {
				return "", errors.New("llm_query is not available: this session has no LLM configured" + NoLLMHint)
			}
			return s.bridges.LLMQuery(ctx, prompts[i], q.Model)
		case "rlm_query":
			if s.bridges.RLMQuery == nil {
				return "", errors.New("rlm_query is not available: this session has no LLM configured" + NoLLMHint)
			}
			return s.bridges.RLMQuery(ctx, prompts[i], q.Context(i), q.Model)
		case "tool_call":
			if s.bridges.ToolCall == nil {
				return "", errors.New("tool_call: this session has no host-side tools (they are declared as [[tool]] in an rlm run task file)")
			}
			return s.bridges.ToolCall(ctx, prompts[i])
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
	failed := 0
	for i, err := range errs {
		if err != nil {
			results[i] = core.QueryErrorPrefix + err.Error()
			failed++
		}
	}
	if failed == len(prompts) {
		// Nothing to keep: the batch fails as one query does.
		return nil, fmt.Errorf("all %d queries of the batch failed; the first: %w", len(prompts), errs[0])
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
		return nil, pb.Error(err)
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

func (s *session) Execute(ctx context.Context, code string, timeout time.Duration) (*core.Result, error) {
	return s.RunCell(ctx, core.Cell{Code: code, Timeout: timeout})
}

func (s *session) RunCell(ctx context.Context, c core.Cell) (*core.Result, error) {
	ex := &pb.Execute{Code: []byte(c.Code), TimeoutMs: pb.WireMs(c.Timeout), ReturnFiles: s.returnFiles}
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
		return nil, &core.RefusedError{Kind: core.Invalid, Msg: fe}
	}
	return pb.ResultFromProto(msg.GetResult().GetResult()), nil
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
	return pb.Error(s.send(&pb.SessionRequest{Msg: &pb.SessionRequest_Cancel{Cancel: &pb.Cancel{}}}))
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
