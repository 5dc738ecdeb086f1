package client

import (
	"context"
	"fmt"

	"github.com/rlmkit/rlm/core"
)

// Isolation is the level this runtime runs a program (or, with session, a
// REPL session) at when asked for requested: see ResolveIsolation. The
// plugin's Info is asked once per connection.
func (r *Runtime) Isolation(ctx context.Context, requested string, session bool) (string, error) {
	info, err := r.Declared(ctx)
	if err != nil {
		return "", fmt.Errorf("asking the %s runtime which isolation it supports: %w", r.Name, err)
	}
	return core.ResolveIsolation(info, r.pluginName(), requested, session, r.host)
}

// Declared is the plugin's Info, asked once: what a plugin declares does
// not change while it runs. It is the fingerprint taken when the plugin was
// launched (SetDeclared), else asked now. Info, not this, checks that the
// runtime still answers.
func (r *Runtime) Declared(ctx context.Context) (*core.Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.info != nil {
		return r.info, nil
	}
	info, err := r.Info(ctx)
	if err != nil {
		return nil, err
	}
	r.info = info
	return info, nil
}

// SetDeclared records info, the Info its plugin gave when it was launched
// (internal/host/catalog), so that Declared does not ask again.
func (r *Runtime) SetDeclared(info *core.Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info = info
}

// declared is the Info Declared would return without asking: nil when the
// plugin has not declared itself yet.
func (r *Runtime) declared() *core.Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// pluginName names the plugin in messages: its path when known.
func (r *Runtime) pluginName() string {
	if r.Plugin != "" {
		return fmt.Sprintf("%s (%s)", r.Name, r.Plugin)
	}
	if r.Backend != "" && r.Backend != "native" {
		return fmt.Sprintf("%s (%s backend)", r.Name, r.Backend)
	}
	return r.Name
}

// Sandbox is l as it goes on the wire for this runtime's programs (or,
// with session, its REPL sessions): core.ResolveLimits against the plugin's
// declaration. Run and OpenSession call it; a server calls it at start to
// refuse a configuration every request would be refused for.
func (r *Runtime) Sandbox(ctx context.Context, l core.Limits, session bool) (core.Limits, error) {
	info, err := r.Declared(ctx)
	if err != nil {
		return l, fmt.Errorf("asking the %s runtime which isolation it supports: %w", r.Name, err)
	}
	return core.ResolveLimits(info, r.pluginName(), l, session, r.host)
}
