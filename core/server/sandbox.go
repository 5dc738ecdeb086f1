package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/sandbox"
)

// A session is a sandbox (core/sandbox): its interpreter also runs
// commands and file operations, which take turns with its cells under the
// session's cell lock. This file is the session side of it: the sandbox a
// session has, and the lifetime a front end may set (E2B's timeout).

// sandboxState is what a session holds for its sandbox.
type sandboxState struct {
	once sync.Once
	box  *sandbox.Sandbox

	mu sync.Mutex
	// deadline, when set, ends the session at that time (timer) whether
	// or not it is used; the idle limit no longer applies to it.
	deadline time.Time
	timer    *time.Timer
}

func (st *sandboxState) hasDeadline() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.deadline.IsZero()
}

// sandboxOf is session e's sandbox, made on first use.
func (s *Server) sandboxOf(e *sessionEntry) *sandbox.Sandbox {
	e.sb.once.Do(func() {
		e.sb.box = sandbox.New(func(ctx context.Context, c core.Cell) (*core.Result, error) {
			return s.sandboxCell(ctx, e, c)
		})
	})
	return e.sb.box
}

// sandboxCell runs one of the sandbox's own cells in session e, in turn
// with the user's cells. It takes no run slot: a poll of a command or a
// file operation is a few milliseconds of the sandbox's own interpreter,
// bounded by the sandbox's limits, and waiting in the queue behind other
// clients' programs would stall a command's output for no one's benefit.
func (s *Server) sandboxCell(ctx context.Context, e *sessionEntry, c core.Cell) (*core.Result, error) {
	cr, ok := e.sess.(core.CellRunner)
	if !ok || e.language != "python" {
		// The sandbox's helper is Python (core/sandbox/agent.py).
		return nil, apiErr(http.StatusNotImplemented, CodeUnsupported, fmt.Sprintf(
			"session %s is a %s session: commands and file operations run through a python session's interpreter; open one with POST /sessions {\"language\": \"python\"}", e.id, e.language))
	}
	e.cell.Lock()
	defer e.cell.Unlock()
	if e.deleted.Load() {
		return nil, e.deletedError(false)
	}
	res, err := cr.RunCell(ctx, c)
	if err != nil {
		if e.deleted.Load() {
			return nil, e.deletedError(true)
		}
		return nil, s.sessionError(ctx, e, err)
	}
	return res, nil
}

// Sandbox gives session id as a sandbox; done must be called when the
// caller is finished with it (the session counts as in use until then, so
// it does not expire under a running command).
func (s *Server) Sandbox(id string) (*sandbox.Sandbox, func(), error) {
	e, done, ok := s.sessions.use(id)
	if !ok {
		return nil, nil, s.sessionNotFound(id)
	}
	return s.sandboxOf(e), done, nil
}

// SetDeadline ends session id at t (E2B's sandbox timeout), replacing an
// earlier deadline; from then on its idle limit no longer applies. It
// returns the deadline set.
func (s *Server) SetDeadline(id string, t time.Time) (time.Time, error) {
	e, done, ok := s.sessions.use(id)
	if !ok {
		return time.Time{}, s.sessionNotFound(id)
	}
	defer done()
	st := &e.sb
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timer != nil {
		st.timer.Stop()
	}
	st.deadline = t
	st.timer = time.AfterFunc(time.Until(t), func() {
		_, _ = s.endSession(id, fmt.Sprintf("reached its timeout (%s)", t.UTC().Format(time.RFC3339)))
	})
	return t, nil
}

// Deadline is when session id ends by SetDeadline (zero: none set).
func (s *Server) Deadline(id string) (time.Time, error) {
	e, done, ok := s.sessions.use(id)
	if !ok {
		return time.Time{}, s.sessionNotFound(id)
	}
	defer done()
	e.sb.mu.Lock()
	defer e.sb.mu.Unlock()
	return e.sb.deadline, nil
}

// stopDeadline stops a removed session's timer.
func (st *sandboxState) stopDeadline() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timer != nil {
		st.timer.Stop()
	}
}

// SessionOpened describes an open session for a front end (E2B's
// sandbox info).
type SessionOpened struct {
	ID       string
	Language string
	Created  time.Time
	Deadline time.Time
}

// Sessions lists the open sessions, oldest first.
func (s *Server) Sessions() []SessionOpened {
	var out []SessionOpened
	for _, info := range s.sessions.list() {
		d, err := s.Deadline(info.ID)
		if err != nil {
			continue // ended meanwhile
		}
		out = append(out, SessionOpened{ID: info.ID, Language: info.Language, Created: info.Created, Deadline: d})
	}
	return out
}

// sandboxError answers a failed sandbox operation: the sandbox's own
// refusals are 4xx with the helper's message, the rest as session errors.
func sandboxError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	switch sandbox.ErrorKind(err) {
	case sandbox.NotFound, sandbox.NoProcess:
		return apiErr(http.StatusNotFound, CodeNotFound, err.Error())
	case sandbox.Exists:
		return apiErr(http.StatusConflict, CodeBadRequest, err.Error())
	case sandbox.Invalid, sandbox.Outside, sandbox.Permission, sandbox.OS:
		return apiErr(http.StatusBadRequest, CodeBadRequest, err.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return clientGone()
	}
	return apiErr(http.StatusInternalServerError, CodeInternal, err.Error())
}

// MaxTimeout is the longest a run or cell may be given (Config.MaxTimeout).
func (s *Server) MaxTimeout() time.Duration { return s.cfg.MaxTimeout }

// DefaultTimeout is a run's or cell's timeout when it gives none
// (Config.DefaultTimeout).
func (s *Server) DefaultTimeout() time.Duration { return s.cfg.DefaultTimeout }
