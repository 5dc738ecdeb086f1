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
// code: the built-in plugins use core/plugin/native/inproc's (internal/sandbox/isolate in
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

// SandboxRun is what a Sandbox is told about one run.
type SandboxRun struct {
	// Spec is the sandbox the run asks for; Spawn fills in its Argv, Env
	// and Dir.
	Spec SandboxSpec
	// Tool, Limits and ReturnFiles are for a Sandbox that serves runs from
	// warm sandboxes (internal/warm), which shows the host by the tool and
	// applies the limits per run.
	Tool        toolpath.Tool
	Limits      core.Limits
	ReturnFiles bool
	// Shared is true when nothing in the sandbox is particular to this run
	// (no installed requirements, no context file), so a warm sandbox
	// shared with other runs may serve it.
	Shared bool
}

// SandboxSpec is one sandboxed program: the part of internal/sandbox/isolate's Spec a
// native runtime sets. It is also what a plugin sends the host's sandbox
// supervisor (`rlm __sandbox`), hence the JSON names.
type SandboxSpec struct {
	Level         isolation.Level `json:"level"`
	Argv          []string        `json:"argv"`
	Env           []string        `json:"env"`
	Dir           string          `json:"dir"`
	ReadOnlyPaths []string        `json:"read_only_paths,omitempty"`
	MemoryBytes   int64           `json:"memory_bytes,omitempty"`
	MaxProcesses  int64           `json:"max_processes,omitempty"`
	CPUSeconds    int64           `json:"cpu_seconds,omitempty"`
	DiskBytes     int64           `json:"disk_bytes,omitempty"`
	FileSizeBytes int64           `json:"file_size_bytes,omitempty"`
	AllowNetwork  bool            `json:"allow_network,omitempty"`
}

// NewSandboxSpec is the sandbox a run at level with limits gets, showing
// the host paths ro read-only.
func NewSandboxSpec(level isolation.Level, l core.Limits, ro []string) SandboxSpec {
	return SandboxSpec{
		Level:         level,
		ReadOnlyPaths: ro,
		MemoryBytes:   l.MemoryBytes,
		MaxProcesses:  l.MaxProcesses,
		CPUSeconds:    (l.CPU.Milliseconds() + 999) / 1000,
		DiskBytes:     l.MaxDiskBytes,
		// One file can never be larger than the whole directory; without a
		// tmpfs (level process as non-root is refused DiskBytes) this is
		// also what keeps a single huge file from filling the host disk.
		FileSizeBytes: l.MaxDiskBytes,
		AllowNetwork:  l.AllowNetwork,
	}
}

// sandbox is the runtime's Sandbox, the host's supervisor by default.
func (s *Server) sandbox() Sandbox {
	if s.RT.Sandbox != nil {
		return s.RT.Sandbox
	}
	return defaultSandbox()
}
