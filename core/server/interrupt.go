package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// SessionInterrupted answers POST /sessions/{id}/interrupt.
type SessionInterrupted struct {
	ID string `json:"id"`
	// Interrupted says whether a cell was running (and has now ended);
	// false when the session was idle, which is not an error: the client
	// and the cell race, and either way the session is idle now.
	Interrupted bool `json:"interrupted"`
}

// running tracks the cell a session runs now, so that an interrupt knows
// whether there is one and when it has ended.
type running struct {
	mu   sync.Mutex
	done chan struct{} // closed when the running cell ends; nil when idle
}

// start marks a cell running: done is closed by end, when it has ended.
func (r *running) start() (done <-chan struct{}, end func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.done = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		r.done = nil
		r.mu.Unlock()
		close(ch)
	}
}

// current is the running cell's done channel, nil when none runs.
func (r *running) current() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// interruptResend is how often an interrupt is sent again while the cell
// it aims at runs on. The first can arrive before the runtime has started
// the cell (the server marks the cell running just before sending it), and
// a runtime drops an interrupt that finds no cell; a second one for a cell
// already stopping changes nothing (the runtimes' interrupts are
// idempotent), and one that ignores them all is killed after the runtime's
// grace (python: the interpreter is restarted, state_lost).
const interruptResend = 500 * time.Millisecond

// InterruptSession interrupts the cell session id is running, as POST
// /sessions/{id}/interrupt does: the cell's own call answers with what it
// printed so far and ended_by "cancelled", and the session and its state
// stay (a cell that ignores KeyboardInterrupt past the runtime's grace is
// killed and its interpreter restarted: state_lost). It returns once that
// cell has ended, so the next call finds the session idle.
func (s *Server) InterruptSession(ctx context.Context, id string) (*SessionInterrupted, error) {
	_, out, e := s.interruptSession(ctx, id)
	if e != nil {
		return nil, e
	}
	return out, nil
}

func (s *Server) interruptSession(ctx context.Context, id string) (string, *SessionInterrupted, *APIError) {
	e, done, ok := s.sessions.use(id)
	if !ok {
		return "", nil, s.sessionNotFound(id)
	}
	defer done()
	out := &SessionInterrupted{ID: id}
	cell := e.running.current()
	if cell == nil {
		return e.language, out, nil
	}
	out.Interrupted = true
	if !e.interrupt(ctx, cell) {
		return e.language, nil, clientGone()
	}
	return e.language, out, nil
}

// interrupt interrupts the cell whose done channel is cell until it has
// ended (true), or until ctx ends (false). It is how both an interrupt
// request and a client that goes away (a dropped /execute connection, an
// MCP notifications/cancelled) stop a cell.
func (e *sessionEntry) interrupt(ctx context.Context, cell <-chan struct{}) bool {
	tick := time.NewTicker(interruptResend)
	defer tick.Stop()
	for {
		if err := e.sess.Cancel(); err != nil {
			// The stream is gone: the cell's own call reports how the
			// session ended, and the next call on it says so.
			return true
		}
		select {
		case <-cell:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func (s *Server) handleSessionInterrupt(w http.ResponseWriter, r *http.Request, id string) {
	lang, out, e := s.interruptSession(r.Context(), id)
	w.(*recorder).language = lang
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
