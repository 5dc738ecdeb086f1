package native

import (
	"context"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// Sandbox runs a runtime's programs at the isolation levels above none. It
// is an interface so that the body of a native plugin links no sandbox
// code: the built-in plugins use plugins/internal/inproc's (internal/sandbox/isolate in
// process, with warm sandboxes), and a plugin that sets none gets
// HelperSandbox, which asks the rlm binary that started it.
type Sandbox interface {
	// Levels are the levels programs can run at on this host, weakest
	// first, none included.
	Levels() []isolation.Level
	// Available says why level cannot be enforced here, or nil.
	Available(level isolation.Level) error
	// Spawner starts the program of one run at r.Spec.Level (never none).
	Spawner(ctx context.Context, r SandboxRun) program.Spawner
}

// Stager is a Sandbox that can run a program in a workspace that exists
// only inside its sandbox (program.StagedWorkspace): a warm sandbox's own
// working directory, so that the run costs no directory on the host.
type Stager interface {
	// StagedDir is the working directory as a staged program sees it.
	StagedDir() string
	// StagedSpawner returns a Spawner that writes ws's code file into the
	// sandbox's working directory and starts the program there, or nil
	// when no such sandbox can serve r. Its Spawn fails with
	// program.ErrNotStarted when the sandbox cannot be had after all.
	StagedSpawner(ctx context.Context, r SandboxRun, ws *program.Workspace) program.Spawner
}

// SandboxRun is what a Sandbox is told about one run.
type SandboxRun struct {
	// Spec is the sandbox the run asks for (core.Limits.SandboxSpec);
	// Spawn fills in its Argv, Env and Dir.
	Spec isolation.Spec
	// Tool, Limits and ReturnFiles are for a Sandbox that serves runs from
	// warm sandboxes (plugins/internal/warm), which shows the host by the tool and
	// applies the limits per run.
	Tool        toolpath.Tool
	Limits      core.Limits
	ReturnFiles bool
	// Shared is true when nothing in the sandbox is particular to this run
	// (no installed requirements, no context file), so a warm sandbox
	// shared with other runs may serve it.
	Shared bool
}

// sandbox is the runtime's Sandbox, the host's supervisor by default.
func (s *Server) sandbox() Sandbox {
	if s.RT.Sandbox != nil {
		return s.RT.Sandbox
	}
	return defaultSandbox()
}
