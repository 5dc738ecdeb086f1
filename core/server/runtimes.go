package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/distinct"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Opener connects to a runtime by name. The rlm command passes
// client.Open; a library user may pass anything that returns a
// client.Runtime (an in-process fake, the daemon).
type Opener = client.Opener

// DetectOrder is the order modes are tried in when none is configured.
var DetectOrder = []string{"python", "golang", "node", "shell"}

// aliases are the other names a request's `language` or a mode may use.
var aliases = map[string]string{
	"py": "python", "python3": "python",
	"go": "golang",
	"js": "node", "javascript": "node", "nodejs": "node",
	"bash": "shell", "sh": "shell",
}

// Canonical returns the runtime name for a mode or language alias.
func Canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if c, ok := aliases[n]; ok {
		return c
	}
	return n
}

// ParseModes splits a comma-separated mode list into canonical names,
// without duplicates. An empty list means auto-detect.
func ParseModes(s string) []string {
	return distinct.Strings(strings.Split(s, ","), Canonical)
}

// supervise is the supervisor serve keeps for runtime name, for the
// server's lifetime: one plugin serves every request (its Run calls run
// concurrently) and is launched again when it died (client.Supervisor).
// What is serve's own: a runtime is only taken when it declares itself
// available here, and a closed server says it is shutting down.
func supervise(name string, open Opener, onRelaunch func(name string)) *client.Supervisor {
	return client.NewSupervisor(client.SupervisorConfig{
		Name: name,
		Open: func(ctx context.Context, name string) (*client.Runtime, error) {
			rt, err := open(ctx, name)
			if err != nil {
				return nil, err
			}
			info, err := rt.Declared(ctx)
			if err != nil {
				rt.Close()
				return nil, fmt.Errorf("%s runtime: %w", name, err)
			}
			if !info.Available {
				rt.Close()
				return nil, fmt.Errorf("%s runtime unavailable: %s", name, info.UnavailableReason)
			}
			return rt, nil
		},
		Closed:     errors.New("the server is shutting down"),
		OnRelaunch: onRelaunch,
	})
}

// runtimeIsolation is what sup's programs and sessions run under when
// asked for requested, from its plugin's last Info.
func runtimeIsolation(sup *client.Supervisor, requested string) RuntimeIsolation {
	info, name := sup.Declared(), sup.Name()
	if st := sup.Status(); st.Plugin != "" {
		name = fmt.Sprintf("%s (%s)", name, st.Plugin)
	}
	var ri RuntimeIsolation
	var err error
	if ri.Programs, err = core.ResolveIsolation(info, name, requested, false, isolate.Available); err != nil {
		ri.ProgramsError = err.Error()
	}
	if ri.Sessions, err = core.ResolveIsolation(info, name, requested, true, isolate.Available); err != nil {
		ri.SessionsError = err.Error()
	}
	return ri
}

// withRuntime runs call on sup's runtime (client.Call): a plugin that died
// while idle is launched again and the call made once more; a program whose
// plugin dies once it has the request (a program that kills its own
// plugin) is never run again: client.Runtime.Run reports it as a crashed
// result, not as a lost connection (see pb.AcceptedHeader). A runtime that
// cannot be had is a 503 the client may retry.
func withRuntime[T any](ctx context.Context, sup *client.Supervisor, call func(*client.Runtime) (T, error)) (T, error) {
	v, err := client.Call(ctx, sup, call)
	var se *client.StartError
	var lt *client.LostTwiceError
	if errors.As(err, &se) || errors.As(err, &lt) {
		return v, &APIError{Status: 503, Code: CodeRuntimeUnavailable, Message: err.Error(), RetryAfter: 1}
	}
	return v, err
}

// OpenModes connects to each mode's runtime and checks that it can run
// here. With no modes it enables every runtime of DetectOrder that is
// available (DetectModes). The errors name the mode and the reason, e.g.
// "mode=golang but 'go' not found in PATH".
func OpenModes(ctx context.Context, open Opener, modes []string) ([]string, map[string]*client.Runtime, map[string]*core.Info, error) {
	if len(modes) == 0 {
		d, err := DetectModes(ctx, open, DetectOrder)
		if err != nil {
			return nil, nil, nil, err
		}
		return d.Modes, d.Runtimes, d.Infos, nil
	}
	rts := map[string]*client.Runtime{}
	infos := map[string]*core.Info{}
	for _, m := range modes {
		rt, info, err := probe(ctx, open, m)
		if err != nil {
			for _, rt := range rts {
				rt.Close()
			}
			return nil, nil, nil, fmt.Errorf("mode=%s but %w", m, err)
		}
		rts[m], infos[m] = rt, info
	}
	return modes, rts, infos, nil
}

// Detected is what DetectModes found: the runtimes that can run here, in
// the order tried (the first is the default), and why each other one
// cannot.
type Detected struct {
	Modes    []string
	Runtimes map[string]*client.Runtime
	Infos    map[string]*core.Info
	// Skipped maps a candidate that cannot run here to the reason.
	Skipped map[string]string
}

// DetectModes opens every candidate (canonical names, in priority order:
// DetectOrder first, so python stays the default where it is installed)
// and keeps each that is available here. A server enables every runtime
// the host can run unless told otherwise (issue #27): an agent offered
// "shell" must not be told it is not enabled. Only when none can run is
// it an error, listing every reason.
func DetectModes(ctx context.Context, open Opener, candidates []string) (*Detected, error) {
	d := &Detected{Runtimes: map[string]*client.Runtime{}, Infos: map[string]*core.Info{}, Skipped: map[string]string{}}
	var reasons []string
	for _, m := range candidates {
		rt, info, err := probe(ctx, open, m)
		if err != nil {
			d.Skipped[m] = err.Error()
			reasons = append(reasons, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		d.Modes = append(d.Modes, m)
		d.Runtimes[m], d.Infos[m] = rt, info
	}
	if len(d.Modes) == 0 {
		return nil, fmt.Errorf("no runtime found (tried %s):\n  %s",
			strings.Join(candidates, ", "), strings.Join(reasons, "\n  "))
	}
	return d, nil
}

// Modes are the enabled runtimes, the default first: what /health,
// list_runtimes and the MCP tools' descriptions name.
func (s *Server) Modes() []string { return append([]string(nil), s.cfg.Modes...) }

func probe(ctx context.Context, open Opener, name string) (*client.Runtime, *core.Info, error) {
	rt, err := open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	info, err := rt.Declared(ctx)
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	if !info.Available {
		rt.Close()
		reason := info.UnavailableReason
		if reason == "" {
			reason = "its plugin says it is unavailable"
		}
		return nil, nil, errors.New(reason)
	}
	return rt, info, nil
}
