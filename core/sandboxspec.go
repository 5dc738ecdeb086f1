package core

import (
	"cmp"

	"github.com/rlmkit/rlm/core/isolation"
)

// Level is the isolation level a runtime runs l at: l.Isolation as a
// Level, or isolation.Default for "" (a request that names none, as a
// test's may). It converts and does not parse: the host resolved the
// level (ResolveIsolation) and core/plugin's adapter checked its name
// (plugin.CheckRequest, the one isolation.Parse on the plugin's side)
// before a runtime sees the request.
func (l Limits) Level() isolation.Level {
	return cmp.Or(isolation.Level(l.Isolation), isolation.Default)
}

// SandboxSpec is the sandbox a program run with l at level gets, showing
// the host paths readOnly read-only: the one derivation of a sandbox's
// limits from a request's (the sandbox's Argv, Env and Dir are the
// caller's to fill in). A caller that holds a limit differently (a REPL
// session, whose CPU time would add up over its cells) changes the result.
func (l Limits) SandboxSpec(level isolation.Level, readOnly []string) isolation.Spec {
	return isolation.Spec{
		Level:         level,
		ReadOnlyPaths: readOnly,
		MemoryBytes:   l.MemoryBytes,
		MaxProcesses:  l.MaxProcesses,
		// RLIMIT_CPU counts whole seconds: round up, so a budget below a
		// second still limits.
		CPUSeconds: (l.CPU.Milliseconds() + 999) / 1000,
		DiskBytes:  l.MaxDiskBytes,
		// One file can never be larger than the whole directory; without a
		// tmpfs (level process as non-root is refused DiskBytes) this is
		// also what keeps a single huge file from filling the host disk.
		FileSizeBytes: l.MaxDiskBytes,
		AllowNetwork:  l.AllowNetwork,
	}
}
