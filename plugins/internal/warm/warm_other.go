//go:build !linux

package warm

import (
	"context"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/program"
)

// Pool is never usable outside Linux, where internal/sandbox/isolate runs nothing.
type Pool struct{}

// Run describes one request for Spawner.
type Run struct {
	Limits      core.Limits
	ReturnFiles bool
	Fallback    program.Spawner
}

// For returns a pool that is never ready.
func For(Config) *Pool { return &Pool{} }

// Disabled is always true outside Linux.
func Disabled() bool { return true }

// Ready is always false outside Linux.
func (p *Pool) Ready() bool { return false }

// Spawner returns the fallback.
func (p *Pool) Spawner(_ context.Context, r Run) program.Spawner { return r.Fallback }
