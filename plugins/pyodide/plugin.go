package pyodide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/internal/version"
)

// Server serves the runtime service with CPython-on-WASI. One Runner (the
// compiled module) is shared by every run; it is created on first use so
// that Info answers at once.
type Server struct {
	pb.UnimplementedRuntimeServer

	once   sync.Once
	runner *Runner
	err    error
}

func (s *Server) get(ctx context.Context) (*Runner, error) {
	s.once.Do(func() {
		s.runner, s.err = New(context.Background(), Options{WasmPath: os.Getenv("RLM_WASM_BINARY")})
	})
	return s.runner, s.err
}

// Info reports the runtime; without a python.wasm it is unavailable and says
// how to build one.
func (s *Server) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.InfoResponse, error) {
	r := &pb.InfoResponse{
		Name: "pyodide", PluginVersion: version.String(), Language: "python", FileExtension: ".py",
		Capabilities: []string{"repl", "program", "fuel", "files", "check"}, Backend: "pyodide",
		IsolationLevels: []string{"wasm"},
		// Sessions run in the same WebAssembly sandbox as programs.
		SessionIsolationLevels: []string{"wasm"},
	}
	rn, err := s.get(ctx)
	if err != nil {
		r.UnavailableReason = err.Error()
		return r, nil
	}
	v, err := rn.RuntimeVersion(ctx)
	if err != nil {
		r.UnavailableReason = err.Error()
		return r, nil
	}
	r.Available, r.RuntimeVersion = true, v
	return r, nil
}

// Run executes one program in a fresh workspace mounted at /app.
func (s *Server) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if len(req.GetRequirements()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "the pyodide backend cannot install requirements (no network, no pip): use -b native")
	}
	if err := program.CheckEnv(req.GetEnv()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	dir, err := os.MkdirTemp("", "rlm-wasm-")
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	defer os.RemoveAll(dir)
	if err := program.WriteFiles(dir, req.GetFiles()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	l := req.GetLimits()
	res, err := rn.Run(ctx, RunSpec{
		Code: string(req.GetCode()), Workspace: dir, Args: pb.Strings(req.GetArgs()), Env: pb.EnvStrings(req.GetEnv()), Stdin: req.GetStdin(),
		Fuel: l.GetFuel(), Timeout: time.Duration(l.GetWallMs()) * time.Millisecond,
		MemoryBytes: memoryLimit(l.GetMemoryBytes()), MaxOutputBytes: int(l.GetMaxOutputBytes()),
	})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := toProto(res)
	if req.GetReturnFiles() {
		for _, list := range []struct {
			names  []string
			change string
		}{{res.FilesCreated, "created"}, {res.FilesModified, "modified"}} {
			for _, n := range list.names {
				b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n)))
				if err != nil || int64(len(b)) > program.DefaultMaxFile {
					out.FilesOmitted = true
					continue
				}
				out.Files = append(out.Files, &pb.File{Path: n, Data: b, Size: int64(len(b)), Change: list.change})
			}
		}
	}
	return out, nil
}

// Session serves a REPL: one guest interpreter that keeps its globals
// between cells, with `context` and the llm_query / rlm_query bridges
// answered over the stream (core/plugin.ServeSession). Limits from open
// hold for every cell: fuel and output per cell, memory for the session.
func (s *Server) Session(stream pb.Runtime_SessionServer) error {
	open, err := plugin.ReceiveOpen(stream)
	if err != nil {
		return err
	}
	if err := program.CheckEnv(open.GetEnv()); err != nil {
		return plugin.SendFatal(stream, err.Error())
	}
	ctx := stream.Context()
	rn, err := s.get(ctx)
	if err != nil {
		return plugin.SendFatal(stream, err.Error())
	}
	spec := SessionSpec{Env: pb.EnvStrings(open.GetEnv()), MemoryBytes: memoryLimit(open.GetLimits().GetMemoryBytes())}
	if c := open.GetContext(); c != nil {
		switch c.GetKind() {
		case "", "text":
		case "json":
			if !json.Valid(c.GetData()) {
				return plugin.SendFatal(stream, "the context is not valid JSON (kind json): pass it as text, or fix the document")
			}
			spec.ContextJSON = true
		default:
			return plugin.SendFatal(stream, fmt.Sprintf("unknown context kind %q (want text or json)", c.GetKind()))
		}
		spec.Context = c.GetData()
		if spec.Context == nil {
			spec.Context = []byte{}
		}
	}
	start := time.Now()
	sess, err := rn.OpenSession(ctx, spec)
	if err != nil {
		return plugin.SendFatal(stream, "starting the WebAssembly python: "+err.Error())
	}
	defer sess.Close()
	version, _ := rn.RuntimeVersion(ctx)
	if err := stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{
		RuntimeVersion: version, Backend: "pyodide", StartupMs: time.Since(start).Milliseconds()}}}); err != nil {
		return err
	}
	l := open.GetLimits()
	return plugin.ServeSession(stream, &sessionREPL{s: sess, fuel: l.GetFuel(), maxOutput: int(l.GetMaxOutputBytes())},
		plugin.SessionOptions{Backend: "pyodide", Isolation: "wasm", Wall: time.Duration(l.GetWallMs()) * time.Millisecond,
			// The guest sees this host directory itself, at /app.
			Dir: sess.WorkspacePath, Limits: l})
}

// sessionREPL is a Session as core/plugin's stream server sees it.
type sessionREPL struct {
	s         *Session
	fuel      int64
	maxOutput int
}

func (a *sessionREPL) Execute(ctx context.Context, code string, timeout time.Duration, cb plugin.CallbackFunc) (*pb.Result, error) {
	res, err := a.s.Execute(ctx, CellSpec{Code: code, Fuel: a.fuel, Timeout: timeout, MaxOutputBytes: a.maxOutput, Callback: cb})
	if err != nil {
		return nil, err
	}
	return toProto(res), nil
}

// Variable answers as the native REPL does: a value JSON cannot encode
// comes back as a JSON string holding its repr.
func (a *sessionREPL) Variable(ctx context.Context, name string) (bool, string, error) {
	repr, js, err := a.s.GetVariable(ctx, name)
	if errors.Is(err, ErrUndefined) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if js == nil {
		b, _ := json.Marshal(repr)
		js = b
	}
	return true, string(js), nil
}

func (a *sessionREPL) Interrupt() error { return a.s.Interrupt() }

// Check compiles code without running it.
func (s *Server) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	ok, msg, err := rn.Check(ctx, string(req.GetCode()))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.CheckResponse{Ok: ok, Message: msg}, nil
}

// memoryLimit translates the protocol's memory limit, where 0 means none
// (--memory 0, as for every other backend), into a RunSpec's, where 0 means
// DefaultMemoryBytes: no limit is the most a wasm32 guest can address.
func memoryLimit(n int64) uint64 {
	if n <= 0 {
		return MaxMemoryBytes
	}
	return uint64(n)
}

func toProto(r *Result) *pb.Result {
	out := &pb.Result{
		Stdout: r.Stdout, Stderr: r.Stderr, StdoutOmitted: r.StdoutOmitted, StderrOmitted: r.StderrOmitted,
		ExitCode: int32(r.ExitCode), DurationMs: int64(r.DurationMS), DurationUs: int64(r.DurationMS * 1000),
		EndedBy: r.EndedBy.Proto(), StateLost: r.StateLost, FuelConsumed: r.FuelConsumed,
		MemoryUsedBytes: int64(r.MemoryUsedBytes), Backend: "pyodide", Isolation: "wasm", WorkspacePath: r.WorkspacePath,
	}
	if !r.Success {
		out.Error = r.Error
		if out.ExitCode == 0 {
			out.ExitCode = 1
		}
	}
	if r.Value != "" {
		v := r.Value
		out.Value = &v
	}
	if r.EndedBy != ending.Exit && r.Error != "" && !strings.Contains(string(out.Stderr), r.Error) {
		out.Stderr = append(out.Stderr, []byte(r.Error+"\n")...)
	}
	return out
}

// Main is the plugin binary's entry point.
func Main() { plugin.Serve(&Server{}) }
