// Package inproc is core/plugin/native's in-process Sandbox: programs run under
// internal/sandbox/isolate started by the plugin itself, and namespace runs are served
// from warm sandboxes (internal/warm). The built-in plugins use it; the rlm
// binary's sandbox supervisor (`rlm __sandbox`, Supervise) runs the same
// code for plugins that link no sandbox.
package inproc

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"syscall"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/warm"
)

// Sandbox implements native.Sandbox with internal/sandbox/isolate in this process.
type Sandbox struct {
	// Warm, when set, lets programs run under isolation namespace in warm
	// sandboxes (internal/warm) once the plugin serves more than one run: it
	// says how the sandbox's worker runs the program (the mode and the
	// worker's interpreter) and what else of the host it must show; false
	// keeps a sandbox per run (no Python for the worker, say).
	Warm func(t toolpath.Tool) (warm.Config, bool)
}

// Levels implements native.Sandbox.
func (*Sandbox) Levels() []isolation.Level { return isolate.AvailableLevels() }

// Available implements native.Sandbox.
func (*Sandbox) Available(level isolation.Level) error { return isolate.Available(level) }

// Spawner implements native.Sandbox.
func (sb *Sandbox) Spawner(ctx context.Context, r native.SandboxRun) program.Spawner {
	var cold program.Spawner = &spawner{ctx: ctx, spec: r.Spec}
	if r.Shared {
		if w := sb.warmSpawner(ctx, r, cold); w != nil {
			return w
		}
	}
	return cold
}

// warmSpawner returns a spawner that runs the program in a warm sandbox
// (internal/warm), or nil to build a sandbox for this run alone. Only
// namespace runs qualify (the warm path gives exactly that level), and only
// runs whose sandbox needs nothing particular to them (installed
// requirements or a context file would each need a sandbox of their own;
// the runtime's Warm says whether its program is visible in the shared one).
func (sb *Sandbox) warmSpawner(ctx context.Context, r native.SandboxRun, cold program.Spawner) program.Spawner {
	if r.Spec.Level != isolate.LevelNamespace || sb.Warm == nil || warm.Disabled() {
		return nil
	}
	cfg, ok := sb.Warm(r.Tool)
	if !ok {
		return nil
	}
	cfg.ReadOnlyPaths = native.ReadOnlyPaths(r.Tool, cfg.ReadOnlyPaths...)
	// The working directory's cap is the sandbox's, so runs share a
	// sandbox only with runs that get the same cap cold.
	cfg.DiskBytes = isolate.WorkspaceBytes(isolate.Spec{DiskBytes: r.Spec.DiskBytes, MemoryBytes: r.Spec.MemoryBytes})
	cfg.AllowNetwork = r.Spec.AllowNetwork
	pool := warm.For(cfg)
	if !pool.Ready() {
		return nil
	}
	return pool.Spawner(ctx, warm.Run{Limits: r.Limits, ReturnFiles: r.ReturnFiles, Fallback: cold})
}

// spawner starts programs through internal/sandbox/isolate, a sandbox per run.
type spawner struct {
	ctx  context.Context
	spec native.SandboxSpec
}

// Spawn implements program.Spawner.
func (s *spawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	spec := s.spec
	spec.Argv, spec.Env, spec.Dir = argv, env, dir
	return start(s.ctx, spec, stdin, stdout, stderr)
}

// start runs spec under internal/sandbox/isolate with the given standard files; the
// end of ctx kills it.
func start(ctx context.Context, s native.SandboxSpec, stdin, stdout, stderr *os.File) (*process, error) {
	cmd, err := isolate.Command(ctx, isolate.Spec{
		Level:         s.Level,
		Argv:          s.Argv,
		Env:           s.Env,
		Dir:           s.Dir,
		ReadOnlyPaths: s.ReadOnlyPaths,
		MemoryBytes:   s.MemoryBytes,
		MaxProcesses:  s.MaxProcesses,
		CPUSeconds:    s.CPUSeconds,
		DiskBytes:     s.DiskBytes,
		FileSizeBytes: s.FileSizeBytes,
		AllowNetwork:  s.AllowNetwork,
	})
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		_ = cmd.Cleanup()
		return nil, err
	}
	return &process{cmd: cmd, level: s.Level}, nil
}

type process struct {
	cmd   *isolate.Cmd
	level isolation.Level
}

func (p *process) Pid() int { return p.cmd.Pid() }

func (p *process) Kill() { _ = p.cmd.Kill() }

func (p *process) Wait() (program.Exit, error) {
	err := p.cmd.Wait()
	o := p.cmd.Outcome()
	ex := program.Exit{
		Code:            o.ExitCode,
		PeakMemoryBytes: o.PeakMemoryBytes,
		Isolation:       string(p.level),
		EndedBy:         o.Ending,
	}
	if o.Signal != "" {
		ex.Signal = syscall.Signal(o.SignalNumber)
		ex.Code = 0
	}
	return ex, err
}

// Supervise is the host's sandbox supervisor (`rlm __sandbox`): it reads
// one native.SandboxSpec from spec, runs it with stdin, stdout and stderr
// as the program's standard files, and writes native.HelperReports to
// report: the sandbox's pid once started, then how the program ended. The
// end of ctx (the supervisor's SIGTERM) kills the sandbox, which is still
// cleaned up and reported. The error is only for failing to report.
func Supervise(ctx context.Context, spec io.Reader, report io.Writer, stdin, stdout, stderr *os.File) error {
	enc := json.NewEncoder(report)
	var s native.SandboxSpec
	if err := json.NewDecoder(spec).Decode(&s); err != nil {
		return enc.Encode(native.HelperReport{Error: "reading the sandbox spec: " + err.Error()})
	}
	p, err := start(ctx, s, stdin, stdout, stderr)
	if err != nil {
		return enc.Encode(native.HelperReport{Error: err.Error()})
	}
	if err := enc.Encode(native.HelperReport{Pid: p.Pid()}); err != nil {
		p.Kill() // nobody to report to: end the run, still cleaned up by Wait
	}
	ex, err := p.Wait()
	end := native.HelperReport{Exit: &ex}
	if err != nil {
		end.Error = err.Error()
	}
	return enc.Encode(end)
}
