//go:build !linux

package isolate

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

// Available always fails outside Linux, for every level, because Command does:
// the package's guarantees (process-tree kill, limits, cleanup) are written
// for Linux only.
func Available(level Level) error {
	return fmt.Errorf("isolation %q on %s: %w: package isolate runs programs only on Linux; run there, or start the program without isolate", level, runtime.GOOS, ErrNotSupported)
}

// Command is not implemented outside Linux: it always returns an error that
// says so, even for LevelNone, so that a caller never believes it has a
// process group, limits or cleanup that it does not have.
func Command(ctx context.Context, spec Spec) (*Cmd, error) {
	return nil, Available(spec.Level)
}

// Cmd is never constructed outside Linux; its methods exist so that callers
// compile on every OS.
type Cmd struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

func (c *Cmd) Start() error        { return ErrNotSupported }
func (c *Cmd) Wait() error         { return ErrNotSupported }
func (c *Cmd) Run() error          { return ErrNotSupported }
func (c *Cmd) Kill() error         { return ErrNotSupported }
func (c *Cmd) Cleanup() error      { return nil }
func (c *Cmd) Outcome() Outcome    { return Outcome{} }
func (c *Cmd) Pid() int            { return 0 }
func (c *Cmd) ProgramPid() int     { return 0 }
func (c *Cmd) Workdir() string     { return "" }
func (c *Cmd) HostWorkdir() string { return "" }

// CreateAs runs create as is.
func (c *Cmd) CreateAs(create func() error) error { return create() }

// ReapOwner does nothing outside Linux, where Command runs nothing.
func ReapOwner(owner int, tmpDirs ...string) {}

// SweepDead does nothing where runs make no mounts.
func SweepDead(string) {}

// HasMountsBelow is false where runs make no mounts.
func HasMountsBelow(string) bool { return false }
