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

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/version"
)

// Server is the runtime (plugin.Runtime and plugin.Sessions) of
// CPython-on-WASI. One Runner (the compiled module) is shared by every run;
// it is created on first use so that Info answers at once.
type Server struct {
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
func (s *Server) Info(ctx context.Context) (core.Info, error) {
	r := core.Info{
		Name: "pyodide", PluginVersion: version.String(), Language: "python", FileExtension: ".py",
		// Of the resource limits, wasm enforces memory (linear memory is
		// capped per run and per session) and processes (a WASI guest
		// cannot start one, so any --max-processes holds); disk and CPU
		// seconds it does not (fuel is its CPU budget), and the host
		// refuses them when asked for (core.Info.Capabilities).
		Capabilities: []string{"repl", "program", "fuel", "files", "check", "memory", "max-processes"}, Backend: "pyodide",
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
func (s *Server) Run(ctx context.Context, p core.Program) (*core.Result, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return nil, plugin.Unavailable(err)
	}
	if len(p.Requirements) > 0 {
		return nil, plugin.Invalid(errors.New("the pyodide backend cannot install requirements (no network, no pip): use -b native"))
	}
	dir, err := os.MkdirTemp("", "rlm-wasm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := program.WriteFiles(dir, p.Files); err != nil {
		return nil, plugin.Invalid(err)
	}
	l := p.Limits
	res, err := rn.Run(ctx, RunSpec{
		Code: p.Code, Workspace: dir, Args: p.Args, Env: p.Env, Stdin: p.Stdin,
		Fuel: l.Fuel, Timeout: l.Wall,
		MemoryBytes: memoryLimit(l.MemoryBytes), MaxOutputBytes: int(l.MaxOutputBytes),
	})
	if errors.Is(err, ErrMemoryTooSmall) {
		return nil, plugin.Invalid(err)
	}
	if err != nil {
		return nil, err
	}
	out := toCore(res)
	if p.ReturnFiles {
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
				out.Files = append(out.Files, core.File{Path: n, Data: b, Size: int64(len(b)), Change: list.change})
			}
		}
	}
	return out, nil
}

// OpenSession starts a REPL: one guest interpreter that keeps its globals
// between cells, with `context` and the llm_query / rlm_query bridges
// answered over the stream (core/plugin's adapter serves it). Limits from
// open hold for every cell: fuel and output per cell, memory for the
// session.
func (s *Server) OpenSession(ctx context.Context, open core.SessionOptions) (*plugin.Session, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	l := open.Limits
	spec := SessionSpec{Env: open.Env, MemoryBytes: memoryLimit(l.MemoryBytes)}
	if c := open.Context; c != nil {
		// The adapter has checked the kind and, for json, the document.
		spec.ContextJSON = c.Kind == "json"
		spec.Context = c.Data
		if spec.Context == nil {
			spec.Context = []byte{}
		}
	}
	sess, err := rn.OpenSession(ctx, spec)
	if errors.Is(err, ErrMemoryTooSmall) {
		return nil, plugin.Invalid(err)
	}
	if err != nil {
		return nil, fmt.Errorf("starting the WebAssembly python: %w", err)
	}
	version, _ := rn.RuntimeVersion(ctx)
	return &plugin.Session{
		REPL:           &sessionREPL{s: sess, fuel: l.Fuel, maxOutput: int(l.MaxOutputBytes)},
		RuntimeVersion: version,
		// The guest sees this host directory itself, at /app.
		Options: plugin.SessionOptions{Isolation: "wasm", Dir: sess.WorkspacePath},
		Close:   func() { sess.Close() },
	}, nil
}

// sessionREPL is a Session as core/plugin's stream server sees it.
type sessionREPL struct {
	s         *Session
	fuel      int64
	maxOutput int
}

func (a *sessionREPL) Execute(ctx context.Context, code string, timeout time.Duration, cb plugin.CallbackFunc) (*core.Result, error) {
	res, err := a.s.Execute(ctx, CellSpec{Code: code, Fuel: a.fuel, Timeout: timeout, MaxOutputBytes: a.maxOutput, Callback: cb})
	if err != nil {
		return nil, err
	}
	return toCore(res), nil
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
func (s *Server) Check(ctx context.Context, code string) (bool, string, error) {
	rn, err := s.get(ctx)
	if err != nil {
		return false, "", plugin.Unavailable(err)
	}
	return rn.Check(ctx, code)
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

// toCore is the runner's report as the runtime's result.
func toCore(r *Result) *core.Result {
	out := &core.Result{
		Stdout: string(r.Stdout), Stderr: string(r.Stderr), StdoutOmitted: r.StdoutOmitted, StderrOmitted: r.StderrOmitted,
		ExitCode: r.ExitCode, DurationMs: int64(r.DurationMS), Duration: time.Duration(r.DurationMS * float64(time.Millisecond)),
		EndedBy: r.EndedBy, StateLost: r.StateLost, FuelConsumed: r.FuelConsumed,
		MemoryUsedBytes: int64(r.MemoryUsedBytes), Isolation: "wasm", WorkspacePath: r.WorkspacePath,
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
	if r.EndedBy != ending.Exit && r.Error != "" && !strings.Contains(out.Stderr, r.Error) {
		out.Stderr += r.Error + "\n"
	}
	return out
}

// Main is the plugin binary's entry point.
func Main() { plugin.Serve(&Server{}) }
