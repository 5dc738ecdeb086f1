package plugin

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// NewServer is the gRPC adapter in front of a Runtime (see Runtime for what
// it does). Serve uses it; a test can serve it in process.
func NewServer(rt Runtime) pb.RuntimeServer { return &server{rt: rt} }

type server struct {
	pb.UnimplementedRuntimeServer
	rt Runtime

	mu   sync.Mutex
	info *core.Info // what the runtime declares, once it answered
}

// declared is the runtime's Info, asked until it first answers: the
// backend and the level names do not change while the plugin runs. A
// failed Info (a cancelled request's, say) is not kept, so the next
// request asks again; until then nothing is stamped and only the host's
// level names pass.
func (s *server) declared(ctx context.Context) *core.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info == nil {
		if info, err := s.rt.Info(ctx); err == nil {
			s.info = &info
		}
	}
	return s.info
}

func (s *server) backendName(ctx context.Context) string {
	if info := s.declared(ctx); info != nil {
		return info.Backend
	}
	return ""
}

// check is CheckRequest with the level names this runtime declares.
func (s *server) check(ctx context.Context, env map[string]string, l core.Limits) error {
	var declared []string
	if info := s.declared(ctx); info != nil {
		declared = slices.Concat(info.IsolationLevels, info.SessionIsolationLevels)
	}
	return CheckRequest(env, l.Isolation, declared...)
}

func (s *server) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.InfoResponse, error) {
	info, err := s.rt.Info(ctx)
	if err != nil {
		return nil, pb.Status(err)
	}
	// The host's own call at launch fills the cache, so that the first
	// request does not ask again.
	s.mu.Lock()
	if s.info == nil {
		s.info = &info
	}
	s.mu.Unlock()
	return pb.InfoProto(info), nil
}

func (s *server) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	p := pb.ProgramFromProto(req)
	if err := p.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.check(ctx, p.Env, p.Limits); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	res, err := s.rt.Run(ctx, p)
	if err != nil {
		return nil, pb.Status(err)
	}
	if res == nil {
		return nil, status.Error(codes.Internal, "the runtime returned no result and no error")
	}
	if res.Backend == "" {
		res.Backend = s.backendName(ctx)
	}
	return pb.ResultProto(res), nil
}

func (s *server) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	ok, msg, err := s.rt.Check(ctx, string(req.GetCode()))
	if err != nil {
		return nil, pb.Status(err)
	}
	return &pb.CheckResponse{Ok: ok, Message: msg}, nil
}

func (s *server) Session(stream pb.Runtime_SessionServer) error {
	sr, ok := s.rt.(Sessions)
	if !ok {
		return status.Error(codes.Unimplemented, "this runtime has no REPL sessions")
	}
	open, err := ReceiveOpen(stream)
	if err != nil {
		return err
	}
	ctx := stream.Context()
	opened := pb.SessionFromProto(open)
	if err := s.check(ctx, opened.Env, opened.Limits); err != nil {
		return SendFatal(stream, err.Error())
	}
	if err := opened.Context.Validate(); err != nil {
		return SendFatal(stream, err.Error())
	}
	start := time.Now()
	sess, err := sr.OpenSession(ctx, opened)
	if err == nil && (sess == nil || sess.REPL == nil) {
		err = errors.New("the runtime opened no session and gave no error")
	}
	var refused *core.RefusedError
	if errors.As(err, &refused) {
		// a refusal (plugin.Invalid, Unavailable) keeps its kind, as Run's
		// does: the host reads it back as core.RefusedError
		return pb.Status(err)
	}
	if err != nil {
		return SendFatal(stream, err.Error())
	}
	if sess.Close != nil {
		defer sess.Close()
	}
	backend := cmp.Or(s.backendName(ctx), sess.Options.Backend)
	if err := stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{
		RuntimeVersion: sess.RuntimeVersion, Backend: backend, StartupMs: time.Since(start).Milliseconds()}}}); err != nil {
		return err
	}
	opts := sess.Options
	opts.Backend, opts.Limits = backend, opened.Limits
	if opts.Wall <= 0 {
		opts.Wall = opts.Limits.Wall
	}
	return ServeSession(stream, sess.REPL, opts)
}

// CheckRequest is the adapter's check of what every runtime receives: the
// environment's names and values (core.CheckEnv) and the isolation
// level's name, one of the host's (none, process, namespace) or of the
// runtime's own (declared: pyodide's wasm), or "" for the runtime's
// default. A runtime may rely on both having passed. Whether a known level
// can be had here is the runtime's to say, with its reason.
func CheckRequest(env map[string]string, level string, declared ...string) error {
	if err := core.CheckEnv(env); err != nil {
		return err
	}
	if level == "" || slices.Contains(declared, level) {
		return nil
	}
	_, err := isolation.Parse(level)
	return err
}
