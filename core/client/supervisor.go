package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
)

// Opener launches (or connects to) the runtime called name: Launch, Open,
// the daemon's dial, or an in-process fake in a test.
type Opener func(ctx context.Context, name string) (*Runtime, error)

// ErrClosed is what Supervisor.Get returns once the supervisor is closed,
// unless SupervisorConfig.Closed says otherwise.
var ErrClosed = errors.New("the runtime's supervisor is closed")

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	// Name is the runtime the supervisor keeps; Open is called with it.
	Name string
	// Open launches the runtime, on first use and after it was lost. An
	// opener that must refuse a runtime (one unavailable here, say) closes
	// it and returns an error.
	Open Opener
	// Closed is the error Get returns after Close (default ErrClosed), so
	// that the application can say it in its own terms.
	Closed error
	// OnRelaunch, if set, is called after a launch that replaced a lost
	// runtime, with the supervisor's lock held: keep it short.
	OnRelaunch func(name string)
	// Log, if set, receives a line when the supervisor finds its runtime
	// lost and launches it again.
	Log func(msg string)
}

// Supervisor keeps one launched runtime — a plugin process, or a
// connection to the daemon — for as long as the application runs, hands it
// out, notices when it was lost and launches it again. `rlm serve` keeps
// one per runtime; the daemon one per runtime and role.
//
// A runtime is lost when its plugin process has exited (Runtime.Exited,
// seen by Get) or when a call fails with a lost connection (IsLost, seen by
// Call, or reported by the caller with Lost). Launches are counted by
// generation: the runtime handed out with generation g is replaced only by
// Lost(g), so two callers that saw the same death relaunch it once.
//
// A user's program is never run twice: Call repeats a call only when the
// runtime was lost before it took the request. A Run whose plugin died
// after accepting it is reported by Runtime.Run as a crashed result
// (RunLost, core.PartlyRun), which is not an error and is not retried.
type Supervisor struct {
	cfg SupervisorConfig

	mu       sync.Mutex
	rt       *Runtime
	bin      *binaryStamp // the binary rt was launched from
	gen      int
	info     *core.Info
	launches int
	closed   bool
}

// NewSupervisor returns a supervisor that launches nothing until Get.
func NewSupervisor(cfg SupervisorConfig) *Supervisor {
	if cfg.Closed == nil {
		cfg.Closed = ErrClosed
	}
	return &Supervisor{cfg: cfg}
}

// Name is the runtime the supervisor keeps.
func (s *Supervisor) Name() string { return s.cfg.Name }

// Adopt takes over rt, a runtime opened before the supervisor existed
// (serve's start-up probe), as the first generation: it is handed out
// until lost, then closed and launched again with Open.
func (s *Supervisor) Adopt(rt *Runtime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt != nil {
		s.rt.Close()
	}
	s.rt = rt
	s.bin = stampOf(rt)
	s.gen++
	if info := rt.declared(); info != nil {
		s.info = info
	}
}

// Get returns the live runtime and its generation, launching it when there
// is none (first use, or it was lost). Launch errors are Open's, as they
// are; after Close it returns SupervisorConfig.Closed.
func (s *Supervisor) Get(ctx context.Context) (*Runtime, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, s.cfg.Closed
	}
	if s.rt != nil && s.rt.Exited() {
		s.log("plugin exited; starting it again")
		s.rt.Close()
		s.rt = nil
	}
	if s.rt != nil && s.bin.changed() {
		s.log(fmt.Sprintf("plugin binary %s changed on disk since it was started; stopping the old process and starting the new binary", s.bin.path))
		s.rt.Close()
		s.rt = nil
	}
	if s.rt != nil {
		return s.rt, s.gen, nil
	}
	rt, err := s.cfg.Open(ctx, s.cfg.Name)
	if err != nil {
		return nil, 0, err
	}
	s.launches++
	if s.gen > 0 && s.cfg.OnRelaunch != nil {
		s.cfg.OnRelaunch(s.cfg.Name)
	}
	s.rt = rt
	s.bin = stampOf(rt)
	s.gen++
	if info := rt.declared(); info != nil {
		s.info = info
	}
	return rt, s.gen, nil
}

// Lost closes generation gen's runtime after a call found it lost, so that
// the next Get launches a fresh one. A later generation is left alone.
func (s *Supervisor) Lost(gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt != nil && s.gen == gen {
		s.rt.Close()
		s.rt = nil
	}
}

// Generation is the number of the runtime now in use (0 before the first
// launch); it grows with every launch.
func (s *Supervisor) Generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Declared is what the last runtime handed out declared about itself (its
// Info as fingerprinted at launch), kept after it was lost; nil when none
// did.
func (s *Supervisor) Declared() *core.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// SupervisorStatus is a supervisor's state, for status reports.
type SupervisorStatus struct {
	// Running: a runtime is held and its plugin process, when the
	// supervisor knows of one, has not exited.
	Running bool
	// Plugin is the held runtime's plugin binary ("" when none is held or
	// it is not a plugin process).
	Plugin string
	// PluginModified is the plugin binary's modification time when it was
	// launched, PluginSize its size: which build is serving, so a rebuild
	// the supervisor has not yet noticed (it does on the next Get) shows.
	PluginModified time.Time
	PluginSize     int64
	// PluginVersion and RuntimeVersion are what the held process declared
	// about itself, "" until it was asked (never another process's).
	PluginVersion  string
	RuntimeVersion string
	// Launches counts the runtimes Open launched (an adopted one is not
	// counted); Generation is as for Generation.
	Launches   int
	Generation int
}

// Status reports the supervisor's state.
func (s *Supervisor) Status() SupervisorStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SupervisorStatus{Launches: s.launches, Generation: s.gen}
	if s.rt != nil {
		st.Running = !s.rt.Exited()
		st.Plugin = s.rt.Plugin
		if s.bin != nil {
			st.PluginModified = s.bin.info.ModTime()
			st.PluginSize = s.bin.info.Size()
		}
		if info := s.rt.declared(); info != nil {
			st.PluginVersion, st.RuntimeVersion = info.PluginVersion, info.RuntimeVersion
		}
	}
	return st
}

// Close closes the runtime (kills its plugin process) and makes every
// later Get fail with SupervisorConfig.Closed.
func (s *Supervisor) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.rt != nil {
		s.rt.Close()
		s.rt = nil
	}
}

func (s *Supervisor) log(msg string) {
	if s.cfg.Log != nil {
		s.cfg.Log(msg)
	}
}

// IsLost reports whether err says the runtime's connection was lost: a
// translated error (core.ErrRuntimeLost) or a gRPC Unavailable status, as
// a proxy that passes messages through sees it.
func IsLost(err error) bool {
	return errors.Is(err, core.ErrRuntimeLost) || status.Code(err) == codes.Unavailable
}

// StartError is Call's error when the runtime could not be launched.
type StartError struct {
	Runtime string
	Err     error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// LostTwiceError is Call's error when the runtime was lost, launched again
// and lost again before it took the request. Err is the last call's error.
type LostTwiceError struct {
	Runtime string
	Err     error
}

func (e *LostTwiceError) Error() string {
	return fmt.Sprintf("the %s runtime plugin exited twice before it could take the request; it is being restarted", e.Runtime)
}
func (e *LostTwiceError) Unwrap() error { return e.Err }

// Call runs call on s's runtime. When the call finds the runtime lost
// (IsLost) while ctx is live, the runtime was lost before the call reached
// it — a plugin that died while idle — so it is launched again and the
// call made once more. call must therefore be safe to repeat after a lost
// connection: Runtime's methods are (Run reports a program its plugin
// accepted and then died on as a crashed result, never as a lost
// connection); a proxy checks RunLost itself.
//
// Errors are call's own, a *StartError when launching failed, or a
// *LostTwiceError.
func Call[T any](ctx context.Context, s *Supervisor, call func(*Runtime) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		rt, gen, err := s.Get(ctx)
		if err != nil {
			return zero, &StartError{Runtime: s.cfg.Name, Err: err}
		}
		v, err := call(rt)
		if err == nil || !IsLost(err) || ctx.Err() != nil {
			return v, err
		}
		s.Lost(gen)
		if attempt > 0 {
			return zero, &LostTwiceError{Runtime: s.cfg.Name, Err: err}
		}
		s.log("plugin gone before the request reached it; starting it again")
	}
}

// PingTimeout bounds each Info call of Ping.
const PingTimeout = 2 * time.Second

// Ping checks that the runtime answers Info, launching it when it is not
// running and once more when it was lost. Its error is the launch's or the
// last Info's, unwrapped.
func (s *Supervisor) Ping(ctx context.Context) error {
	_, err := Call(ctx, s, func(rt *Runtime) (struct{}, error) {
		ictx, cancel := context.WithTimeout(ctx, PingTimeout)
		defer cancel()
		_, err := rt.Info(ictx)
		return struct{}{}, err
	})
	return Cause(err)
}

// Cause is err without Call's wrapping (StartError, LostTwiceError): the
// launch's or the runtime's own error, for a caller that reports it in its
// own terms (Ping's caller, the daemon's gRPC status).
func Cause(err error) error {
	var se *StartError
	var lt *LostTwiceError
	switch {
	case errors.As(err, &se):
		return se.Err
	case errors.As(err, &lt):
		return lt.Err
	}
	return err
}
