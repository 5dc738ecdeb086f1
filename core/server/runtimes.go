package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/distinct"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Opener connects to a runtime by name. The rlm command passes
// backend.Open; a library user may pass anything that returns a
// client.Runtime (an in-process fake, the daemon).
type Opener func(ctx context.Context, name string) (*client.Runtime, error)

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

// runtimeSlot keeps one connection to a runtime for the server's lifetime
// and launches it again when it died.
//
// A plugin death is seen as a core.ErrRuntimeLost error from a call;
// the slot then drops that connection and the next call launches a fresh
// plugin. One plugin serves every request: its Run calls run concurrently.
type runtimeSlot struct {
	name string
	open Opener

	mu       sync.Mutex
	rt       *client.Runtime
	gen      int
	info     *core.Info
	closed   bool
	restarts int
	// onRestart is called after a relaunch that replaced a dead runtime.
	onRestart func(name string)
}

// generation is the number of the runtime connection now in use (0 before
// the first launch); it grows with every relaunch.
func (s *runtimeSlot) generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// get returns the live runtime and its generation, launching it if needed.
func (s *runtimeSlot) get(ctx context.Context) (*client.Runtime, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, errors.New("the server is shutting down")
	}
	if s.rt != nil {
		return s.rt, s.gen, nil
	}
	rt, err := s.open(ctx, s.name)
	if err != nil {
		return nil, 0, err
	}
	info, err := rt.Declared(ctx)
	if err != nil {
		rt.Close()
		return nil, 0, fmt.Errorf("%s runtime: %w", s.name, err)
	}
	if !info.Available {
		rt.Close()
		return nil, 0, fmt.Errorf("%s runtime unavailable: %s", s.name, info.UnavailableReason)
	}
	if s.gen > 0 {
		s.restarts++
		if s.onRestart != nil {
			s.onRestart(s.name)
		}
	}
	s.rt, s.info = rt, info
	s.gen++
	return rt, s.gen, nil
}

// lost drops generation gen's connection after it failed.
func (s *runtimeSlot) lost(gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt != nil && s.gen == gen {
		s.rt.Close()
		s.rt = nil
	}
}

// current is the last Info, or nil.
func (s *runtimeSlot) current() *core.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// isolation is what the runtime's programs and sessions run under when
// asked for requested, from its plugin's last Info.
func (s *runtimeSlot) isolation(requested string) RuntimeIsolation {
	info, name := s.current(), s.name
	s.mu.Lock()
	if s.rt != nil && s.rt.Plugin != "" {
		name = fmt.Sprintf("%s (%s)", s.name, s.rt.Plugin)
	}
	s.mu.Unlock()
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

func (s *runtimeSlot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.rt != nil {
		s.rt.Close()
		s.rt = nil
	}
}

// ping checks the runtime answers, relaunching it when it died.
func (s *runtimeSlot) ping(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		rt, gen, err := s.get(ctx)
		if err != nil {
			return err
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = rt.Info(ictx)
		cancel()
		if err == nil {
			return nil
		}
		if !errors.Is(err, core.ErrRuntimeLost) || attempt > 0 {
			return err
		}
		s.lost(gen)
	}
}

// withRuntime runs call on the slot's runtime. When the runtime's
// connection is lost the slot relaunches the plugin and the call is made
// once more: the plugin died while idle, before the call reached it. A
// program whose plugin dies once it has the request (a program that kills
// its own plugin) is never run again: client.Runtime.Run reports it as a
// crashed result, not as a lost connection (see pb.AcceptedHeader).
func withRuntime[T any](ctx context.Context, s *runtimeSlot, call func(*client.Runtime) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		rt, gen, err := s.get(ctx)
		if err != nil {
			return zero, &APIError{Status: 503, Code: CodeRuntimeUnavailable, Message: err.Error(), RetryAfter: 1}
		}
		v, err := call(rt)
		if err == nil || !errors.Is(err, core.ErrRuntimeLost) || ctx.Err() != nil {
			return v, err
		}
		s.lost(gen)
		if attempt > 0 {
			return zero, &APIError{Status: 503, Code: CodeRuntimeUnavailable, RetryAfter: 1,
				Message: fmt.Sprintf("the %s runtime plugin exited twice before it could take the request; it is being restarted", s.name)}
		}
	}
}

// OpenModes connects to each mode's runtime and checks that it can run
// here. With no modes it detects the first available runtime in
// DetectOrder. The errors name the mode and the reason, e.g.
// "mode=golang but 'go' not found in PATH".
func OpenModes(ctx context.Context, open Opener, modes []string) ([]string, map[string]*client.Runtime, map[string]*core.Info, error) {
	rts := map[string]*client.Runtime{}
	infos := map[string]*core.Info{}
	closeAll := func() {
		for _, rt := range rts {
			rt.Close()
		}
	}
	if len(modes) == 0 {
		var reasons []string
		for _, m := range DetectOrder {
			rt, info, err := probe(ctx, open, m)
			if err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: %v", m, err))
				continue
			}
			rts[m], infos[m] = rt, info
			return []string{m}, rts, infos, nil
		}
		return nil, nil, nil, fmt.Errorf("no runtime found (tried %s):\n  %s",
			strings.Join(DetectOrder, ", "), strings.Join(reasons, "\n  "))
	}
	for _, m := range modes {
		rt, info, err := probe(ctx, open, m)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("mode=%s but %w", m, err)
		}
		rts[m], infos[m] = rt, info
	}
	return modes, rts, infos, nil
}

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
