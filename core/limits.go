package core

import "time"

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
