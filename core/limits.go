package core

import (
	"fmt"
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
	// Strict says the resource limits (memory, processes, disk, CPU) were
	// asked for explicitly (flags), not defaults: a run at a level that
	// enforces none of them (isolation none) is then refused instead of
	// running without them. It is the host's and does not travel.
	Strict bool
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
