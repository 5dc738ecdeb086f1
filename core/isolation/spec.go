package isolation

import (
	"syscall"

	"github.com/rlmkit/rlm/core/ending"
)

// Spec is one sandboxed program: the level, the program, and the limits
// the sandbox holds it to. core.Limits.SandboxSpec derives it from a
// request's limits (the one place that does); internal/sandbox/isolate's
// Spec adds what only the host sets. It is also what a plugin sends the
// host's sandbox supervisor (`rlm __sandbox`, see core/plugin/native's
// HelperSandbox), hence the JSON names, which are that wire and do not
// change.
type Spec struct {
	Level Level `json:"level"`
	// Argv is the program and its arguments. Under Namespace Argv[0] is
	// looked up inside the sandbox with Env's PATH, so prefer an absolute
	// path under /usr or under one of ReadOnlyPaths. An argument that is
	// Dir or a path below it is rewritten to where the program sees its
	// working directory, as are such values in Env: callers name files in
	// the directory they prepared and need not know whether the program
	// works in it, in a private copy, or at /workspace.
	Argv []string `json:"argv"`
	// Env is the program's whole environment; nothing of the caller's
	// leaks in. Nil means internal/sandbox/isolate.DefaultEnv, except under
	// None, where nil inherits the caller's environment as os/exec does.
	Env []string `json:"env"`
	// Dir is the working directory on the host. It must exist. It is the
	// only place the program can write to (besides its private /tmp and
	// /dev/shm under Namespace).
	Dir string `json:"dir"`
	// ReadOnlyPaths are host directories or files the runtime needs (the
	// Python prefix resolved from sys.prefix, GOROOT, ...), exposed
	// read-only at the same path under Namespace. /usr is always exposed.
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`

	MemoryBytes   int64 `json:"memory_bytes,omitempty"`    // cgroup memory (and swap) limit; RLIMIT_DATA if no memory cgroup
	MaxProcesses  int64 `json:"max_processes,omitempty"`   // cgroup pids.max; RLIMIT_NPROC if no pids cgroup
	CPUSeconds    int64 `json:"cpu_seconds,omitempty"`     // RLIMIT_CPU: SIGXCPU, then SIGKILL a second later
	DiskBytes     int64 `json:"disk_bytes,omitempty"`      // total size of the working directory (tmpfs)
	FileSizeBytes int64 `json:"file_size_bytes,omitempty"` // RLIMIT_FSIZE, per file
	// AllowNetwork keeps the host network under Namespace (and exposes
	// /etc/resolv.conf, /etc/ssl and /etc/ca-certificates). The other
	// levels never isolate the network.
	AllowNetwork bool `json:"allow_network,omitempty"`
}

// Exit is how a sandboxed (or any) program ended, as a spawner reports it
// to core/plugin/program's Exec. Its JSON form (the field names, no tags)
// is part of the sandbox supervisor's Report.
type Exit struct {
	Code   int            // exit status when not signalled
	Signal syscall.Signal // non-zero when a signal killed it
	// The rest is known only to spawners that enforce limits: which limit
	// ended the run ("", exit or signal: Exec decides from Code and
	// Signal), the peak memory, and the isolation level it ran under (""
	// means none).
	EndedBy         ending.Reason
	PeakMemoryBytes int64
	Isolation       Level
}

// Report is one JSON value the sandbox supervisor (`rlm __sandbox`)
// writes: first the started sandbox's Pid (the process group
// core/plugin/program's Exec kills), or the Error that kept it from
// starting; then how the program ended (Exit, with Error when waiting for
// it failed).
type Report struct {
	Pid   int    `json:"pid,omitempty"`
	Exit  *Exit  `json:"exit,omitempty"`
	Error string `json:"error,omitempty"`
}
