package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/defaults"
)

// Limits bound one program or cell. Zero values mean the backend default.
type Limits struct {
	Wall           time.Duration
	CPU            time.Duration
	MemoryBytes    int64
	MaxProcesses   int64
	MaxOutputBytes int64
	MaxFileBytes   int64
	MaxDiskBytes   int64
	Fuel           int64
	AllowNetwork   bool
	Isolation      string
	InstallTimeout time.Duration
	MaxFiles       int64
	// Strict are the resource limits asked for explicitly (flags), not
	// taken from the configuration's defaults: a run at a level that cannot
	// enforce one of them (isolation none, or a plugin's own level such as
	// wasm that does not declare it) is then refused, naming only these,
	// instead of running without it. A configured default the level cannot
	// hold is not the caller's request and is left to the plugin. It is the
	// host's and does not travel.
	Strict Resources
}

// Resources is a set of the resource limits a sandbox enforces: memory,
// processes, disk and CPU time. Each is named as its flag (--memory), its
// [limits] key and the capability a plugin declares to say it enforces that
// limit at an isolation level of its own (core.Info.Capabilities).
type Resources uint8

// The resource limits.
const (
	MemoryLimit  Resources = 1 << iota // --memory, Limits.MemoryBytes
	ProcessLimit                       // --max-processes, Limits.MaxProcesses
	DiskLimit                          // --max-disk, Limits.MaxDiskBytes
	CPULimit                           // --cpu, Limits.CPU

	AllResources = MemoryLimit | ProcessLimit | DiskLimit | CPULimit
)

// resourceNames are the names of the resource limits, in flag order.
var resourceNames = []struct {
	r    Resources
	name string
}{{MemoryLimit, "memory"}, {ProcessLimit, "max-processes"}, {DiskLimit, "max-disk"}, {CPULimit, "cpu"}}

// ResourceNamed is the resource limit named name ("memory", "max-disk"),
// or 0 when name is none.
func ResourceNamed(name string) Resources {
	for _, n := range resourceNames {
		if n.name == name {
			return n.r
		}
	}
	return 0
}

// Names are the names of the limits in r, in flag order.
func (r Resources) Names() []string {
	var out []string
	for _, n := range resourceNames {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Flags are r's limits as the flags that set them: "--memory, --max-disk".
func (r Resources) Flags() string {
	names := r.Names()
	for i, n := range names {
		names[i] = "--" + n
	}
	return strings.Join(names, ", ")
}

// Set are the resource limits l sets (non-zero).
func (l Limits) Set() Resources {
	var r Resources
	for _, f := range []struct {
		r  Resources
		on bool
	}{
		{MemoryLimit, l.MemoryBytes > 0},
		{ProcessLimit, l.MaxProcesses > 0},
		{DiskLimit, l.MaxDiskBytes > 0},
		{CPULimit, l.CPU > 0},
	} {
		if f.on {
			r |= f.r
		}
	}
	return r
}

// InstallTimedOut is the message of an installation or a compilation
// (what) that ran out of Limits.InstallTimeout after d. Plugins write it
// without knowing who asked, so it names what each client can do: rlm
// exec sets the limit with --install-timeout, while HTTP and MCP requests
// have no field for it and always get defaults.InstallTimeout. (The wire
// field, install_timeout_ms, is nothing a user sets.)
func InstallTimedOut(what string, d time.Duration) string {
	return fmt.Sprintf("%s timed out after %s (the install timeout: rlm exec --install-timeout sets it; HTTP and MCP requests get %s)",
		what, d, defaults.InstallTimeout)
}
