// Package inproc is core/plugin/native's in-process Sandbox: programs run under
// internal/sandbox/isolate started by the plugin itself (internal/sandbox/supervise's
// Start), and namespace runs are served from warm sandboxes
// (plugins/internal/warm). The built-in plugins use it; the rlm binary's
// sandbox supervisor (`rlm __sandbox`, internal/sandbox/supervise) runs
// the same code for plugins that link no sandbox.
package inproc

import (
	"context"
	"os"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/sandbox/supervise"
	"github.com/rlmkit/rlm/plugins/internal/warm"
)

// Sandbox implements native.Sandbox with internal/sandbox/isolate in this process.
type Sandbox struct {
	// Warm, when set, lets programs run under isolation namespace in warm
	// sandboxes (plugins/internal/warm) once the plugin serves more than one run: it
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
		if w := sb.warmSpawner(ctx, r, warm.Run{Limits: r.Limits, ReturnFiles: r.ReturnFiles, Fallback: cold}); w != nil {
			return w
		}
	}
	return cold
}

// StagedDir implements native.Stager: a warm sandbox's working directory.
func (*Sandbox) StagedDir() string { return isolate.SandboxWorkdir }

// StagedSpawner implements native.Stager with a warm sandbox, which gets
// the code file from ws; nil when no warm sandbox can serve r.
func (sb *Sandbox) StagedSpawner(ctx context.Context, r native.SandboxRun, ws *program.Workspace) program.Spawner {
	if !r.Shared {
		return nil
	}
	return sb.warmSpawner(ctx, r, warm.Run{Limits: r.Limits, ReturnFiles: r.ReturnFiles, Staged: ws})
}

// warmSpawner returns a spawner that runs the program in a warm sandbox
// (plugins/internal/warm), or nil to build a sandbox for this run alone. Only
// namespace runs qualify (the warm path gives exactly that level), and only
// runs whose sandbox needs nothing particular to them (installed
// requirements or a context file would each need a sandbox of their own;
// the runtime's Warm says whether its program is visible in the shared one).
func (sb *Sandbox) warmSpawner(ctx context.Context, r native.SandboxRun, run warm.Run) program.Spawner {
	if r.Spec.Level != isolation.Namespace || sb.Warm == nil || warm.Disabled() {
		return nil
	}
	cfg, ok := sb.Warm(r.Tool)
	if !ok {
		return nil
	}
	cfg.ReadOnlyPaths = native.ReadOnlyPaths(r.Tool, cfg.ReadOnlyPaths...)
	// The working directory's cap is the sandbox's, so runs share a
	// sandbox only with runs that get the same cap cold.
	cfg.DiskBytes = isolate.WorkspaceBytes(isolate.Spec{Spec: r.Spec})
	cfg.AllowNetwork = r.Spec.AllowNetwork
	pool := warm.For(cfg)
	if !pool.Ready() {
		return nil
	}
	return pool.Spawner(ctx, run)
}

// spawner starts programs through internal/sandbox/isolate, a sandbox per run.
type spawner struct {
	ctx  context.Context
	spec isolation.Spec
}

// Spawn implements program.Spawner.
func (s *spawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	spec := s.spec
	spec.Argv, spec.Env, spec.Dir = argv, env, dir
	return supervise.Start(s.ctx, spec, stdin, stdout, stderr)
}
