package pyodide

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/native"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
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
		Name: "pyodide", PluginVersion: native.Version, Language: "python", FileExtension: ".py",
		Capabilities: []string{"program", "fuel", "files", "check"}, Backend: "pyodide",
		IsolationLevels: []string{"wasm"},
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
		Code: req.GetCode(), Workspace: dir, Args: req.GetArgs(), Env: req.GetEnv(), Stdin: req.GetStdin(),
		Fuel: l.GetFuel(), Timeout: time.Duration(l.GetWallMs()) * time.Millisecond,
		MemoryBytes: uint64(l.GetMemoryBytes()), MaxOutputBytes: int(l.GetMaxOutputBytes()),
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

// Check compiles code without running it.
func (s *Server) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	ok, msg, err := rn.Check(ctx, req.GetCode())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.CheckResponse{Ok: ok, Message: msg}, nil
}

var endedBy = map[EndReason]pb.EndedBy{
	EndedExit: pb.EndedBy_EXIT, EndedTimeout: pb.EndedBy_TIMEOUT, EndedCancelled: pb.EndedBy_CANCELLED,
	EndedFuel: pb.EndedBy_FUEL, EndedMemoryLimit: pb.EndedBy_MEMORY_LIMIT, EndedCrashed: pb.EndedBy_CRASHED,
}

func toProto(r *Result) *pb.Result {
	out := &pb.Result{
		Stdout: r.Stdout, Stderr: r.Stderr, StdoutOmitted: r.StdoutOmitted, StderrOmitted: r.StderrOmitted,
		ExitCode: int32(r.ExitCode), DurationMs: int64(r.DurationMS), DurationUs: int64(r.DurationMS * 1000),
		EndedBy: endedBy[r.EndedBy], StateLost: r.StateLost, FuelConsumed: r.FuelConsumed,
		MemoryUsedBytes: int64(r.MemoryUsedBytes), Backend: "pyodide", Isolation: "wasm", WorkspacePath: r.WorkspacePath,
	}
	if !r.Success {
		out.Error = r.Error
		if out.ExitCode == 0 {
			out.ExitCode = 1
		}
	}
	if r.EndedBy != EndedExit && r.Error != "" && !strings.Contains(string(out.Stderr), r.Error) {
		out.Stderr = append(out.Stderr, []byte(r.Error+"\n")...)
	}
	return out
}

// Main is the plugin binary's entry point.
func Main() { plugin.Serve(&Server{}) }
