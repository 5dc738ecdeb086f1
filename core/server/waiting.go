package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/rlmkit/rlm/core"
)

// CodeQueueTimeout is the error code of a run that waited for a slot
// until its deadline (ExecuteWaiting): HTTP 504, which the clients of
// waiting front ends retry.
const CodeQueueTimeout = "queue_timeout"

// WaitOptions are how ExecuteWaiting differs from Execute.
type WaitOptions struct {
	// Wait is how long the request may wait for a run slot, however
	// many others wait too; 0 means the server's queue wait.
	Wait time.Duration
	// MemoryBytes, when positive, lowers the program's memory limit
	// (never raises it above the server's).
	MemoryBytes int64
	// CompileTimeout, when positive, is the compile step's own wall clock
	// (Limits.InstallTimeout, which the compiled-language and golang
	// plugins give their compiler), apart from the run's.
	CompileTimeout time.Duration
}

// ExecuteWaiting runs one program as Execute does (same validation,
// slots, limits, runtimes and metrics) but never refuses it for load: when
// every slot is taken it waits for one, without the queue's bound, up to
// o.Wait, then fails with a 504-class *APIError (CodeQueueTimeout). It is
// for front ends whose clients count a 429 or 503 as a verdict on the
// program but retry a 504 (SandboxFusion's, core/server/sandboxfusion).
func (s *Server) ExecuteWaiting(ctx context.Context, req *ExecuteRequest, o WaitOptions) (*ExecuteResponse, error) {
	wait := o.Wait
	if wait <= 0 {
		wait = s.cfg.QueueWait
	}
	admit := func(ctx context.Context) (func(), *APIError) {
		if s.draining.Load() {
			return nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
		}
		release, err := s.limit.acquireFor(ctx, wait, false)
		switch {
		case err == errBusy:
			s.metrics.rejected.Inc()
			return nil, &APIError{Status: http.StatusGatewayTimeout, Code: CodeQueueTimeout,
				Message: fmt.Sprintf("no run slot of %d freed within %s; retry", s.cfg.MaxConcurrent, wait)}
		case err != nil:
			return nil, clientGone()
		}
		return release, nil
	}
	adjust := func(p *core.Program) {
		if o.MemoryBytes > 0 && (p.Limits.MemoryBytes <= 0 || o.MemoryBytes < p.Limits.MemoryBytes) {
			p.Limits.MemoryBytes = o.MemoryBytes
		}
		if o.CompileTimeout > 0 {
			p.Limits.InstallTimeout = o.CompileTimeout
		}
	}
	lang, resp, e := s.executeWith(ctx, req, admit, adjust)
	if e != nil {
		return nil, e
	}
	s.metrics.results.WithLabelValues(lang, resp.Status).Inc()
	return resp, nil
}

// Enabled says whether runtime name (canonical, as Canonical gives) is
// enabled on this server.
func (s *Server) Enabled(name string) bool { return slices.Contains(s.cfg.Modes, name) }
