package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
)

// sessionTable holds open sessions, closes idle ones and bounds their
// number.
type sessionTable struct {
	mu       sync.Mutex
	byID     map[string]*sessionEntry
	max      int
	idle     time.Duration
	onChange func(n int)
	closed   bool
}

type sessionEntry struct {
	id       string
	language string
	sess     core.Session
	created  time.Time
	// busy counts requests using the session; an idle sweep skips it.
	busy     int
	lastUsed time.Time
	// cell serializes cells: a REPL runs one at a time.
	cell sync.Mutex
}

func newSessionTable(max int, idle time.Duration, onChange func(int)) *sessionTable {
	return &sessionTable{byID: map[string]*sessionEntry{}, max: max, idle: idle, onChange: onChange}
}

func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

func (t *sessionTable) changed() {
	if t.onChange != nil {
		t.onChange(len(t.byID))
	}
}

// reserve claims room for one more session; the caller must add or
// unreserve. Reserving before opening keeps a burst of creates from
// overshooting max while their interpreters start.
func (t *sessionTable) reserve() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.byID) >= t.max {
		return "", false
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t.byID[id] = nil
	return id, true
}

func (t *sessionTable) unreserve(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byID, id)
}

// add stores an opened session; false when the table was closed meanwhile.
func (t *sessionTable) add(e *sessionEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	e.lastUsed = time.Now()
	t.byID[e.id] = e
	t.changed()
	return true
}

// use marks the session busy; done must be called after.
func (t *sessionTable) use(id string) (*sessionEntry, func(), bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return nil, nil, false
	}
	e.busy++
	return e, func() {
		t.mu.Lock()
		e.busy--
		e.lastUsed = time.Now()
		t.mu.Unlock()
	}, true
}

// remove takes the session out of the table; the caller closes it.
func (t *sessionTable) remove(id string) *sessionEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return nil
	}
	delete(t.byID, id)
	t.changed()
	return e
}

// janitor closes sessions idle longer than the limit until stop closes.
func (t *sessionTable) janitor(stop <-chan struct{}) {
	every := min(max(t.idle/4, 10*time.Millisecond), 30*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			var expired []*sessionEntry
			t.mu.Lock()
			for id, e := range t.byID {
				if e != nil && e.busy == 0 && now.Sub(e.lastUsed) > t.idle {
					delete(t.byID, id)
					expired = append(expired, e)
				}
			}
			if len(expired) > 0 {
				t.changed()
			}
			t.mu.Unlock()
			for _, e := range expired {
				_ = e.sess.Close()
			}
		}
	}
}

func (t *sessionTable) closeAll() {
	t.mu.Lock()
	all := t.byID
	t.byID = map[string]*sessionEntry{}
	t.closed = true
	t.changed()
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		if e != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = e.sess.Close()
			}()
		}
	}
	wg.Wait()
}

// SessionRequest is the body of POST /sessions.
type SessionRequest struct {
	Language string `json:"language,omitempty"`
	// Context becomes the session's `context` variable: a JSON string is
	// given as text, any other JSON value as decoded data.
	Context json.RawMessage `json:"context,omitempty"`
}

// SessionCreated answers POST /sessions.
type SessionCreated struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	// IdleTimeoutSeconds is how long the session may stay unused.
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds"`
}

// CellRequest is the body of POST /sessions/{id}/execute.
type CellRequest struct {
	Code *string `json:"code"`
	// TimeoutSeconds and TimeoutMs are /execute's two spellings; one of
	// them, or neither for the server's default.
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
	TimeoutMs      *int64   `json:"timeout_ms,omitempty"`
}

// SessionList answers GET /sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionInfo is one open session in a SessionList.
type SessionInfo struct {
	ID          string    `json:"id"`
	Language    string    `json:"language"`
	Created     time.Time `json:"created"`
	IdleSeconds float64   `json:"idle_seconds"`
	Busy        bool      `json:"busy,omitempty"`
}

// list is the open sessions, oldest first (reserved ids still opening are
// not sessions yet).
func (t *sessionTable) list() []SessionInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []SessionInfo{}
	now := time.Now()
	for _, e := range t.byID {
		if e == nil {
			continue
		}
		out = append(out, SessionInfo{ID: e.id, Language: e.language, Created: e.created.UTC(),
			IdleSeconds: now.Sub(e.lastUsed).Seconds(), Busy: e.busy > 0})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

func (s *Server) handleSessionList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, SessionList{Sessions: s.sessions.list()})
}

// VariableResponse answers GET /sessions/{id}/variables/{name}.
type VariableResponse struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	rec := w.(*recorder)
	if s.draining.Load() {
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1})
		return
	}
	// Room is reserved before the body (which may hold a large context) is
	// read, so at most MaxSessions bodies are held.
	id, ok := s.sessions.reserve()
	if !ok {
		w.Header().Set("Connection", "close") // its body is not read
		writeError(w, &APIError{Status: http.StatusTooManyRequests, Code: CodeTooManySessions, RetryAfter: s.retryAfter(),
			Message: fmt.Sprintf("the server holds its maximum of %d sessions: DELETE one, or wait for idle ones to expire", s.cfg.MaxSessions)})
		return
	}
	added := false
	defer func() {
		if !added {
			s.sessions.unreserve(id)
		}
	}()
	var req SessionRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	lang, e := s.language(req.Language)
	if e != nil {
		writeError(w, e)
		return
	}
	rec.language = lang
	var sctx *core.Context
	if len(req.Context) > 0 && string(req.Context) != "null" {
		var text string
		if json.Unmarshal(req.Context, &text) == nil {
			sctx = &core.Context{Data: []byte(text), Kind: "text"}
		} else {
			sctx = &core.Context{Data: req.Context, Kind: "json"}
		}
	}
	sess, err := withRuntime(r.Context(), s.slots[lang], func(rt *core.Runtime) (core.Session, error) {
		return rt.OpenSession(r.Context(), core.SessionOptions{
			Runtime: lang, Context: sctx, Bridges: s.cfg.Bridges,
			Limits: s.sessionLimits(),
		})
	})
	if err != nil {
		writeError(w, s.runError(r.Context(), lang, err))
		return
	}
	if !s.sessions.add(&sessionEntry{id: id, language: lang, sess: sess, created: time.Now()}) {
		_ = sess.Close()
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1})
		return
	}
	added = true
	writeJSON(w, http.StatusCreated, SessionCreated{ID: id, Language: lang, IdleTimeoutSeconds: s.cfg.SessionIdle.Seconds()})
}

func (s *Server) sessionNotFound(id string) *APIError {
	return apiErr(http.StatusNotFound, CodeSessionNotFound,
		fmt.Sprintf("no session %q: it never existed, was deleted, or expired after %s idle", id, s.cfg.SessionIdle))
}

func (s *Server) handleSessionExecute(w http.ResponseWriter, r *http.Request, id string) {
	rec := w.(*recorder)
	if !s.enter(w) {
		return
	}
	defer s.limit.leave()
	var req CellRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Code == nil {
		writeError(w, badField("code", "is required"))
		return
	}
	var timeout time.Duration
	if req.TimeoutSeconds != nil || req.TimeoutMs != nil {
		t, e := s.timeout(req.TimeoutSeconds, req.TimeoutMs)
		if e != nil {
			writeError(w, e)
			return
		}
		timeout = t
	}
	e, done, ok := s.sessions.use(id)
	if !ok {
		writeError(w, s.sessionNotFound(id))
		return
	}
	defer done()
	rec.language = e.language
	release, ae := s.admit(r.Context())
	if ae != nil {
		writeError(w, ae)
		return
	}
	defer release()
	e.cell.Lock()
	defer e.cell.Unlock()
	res, err := e.sess.Execute(r.Context(), *req.Code, timeout)
	if err != nil {
		writeError(w, s.sessionError(r.Context(), e, err))
		return
	}
	resp := Response(e.language, res)
	rec.result = resp.Status
	writeJSON(w, http.StatusOK, resp)
}

// sessionError answers a failed session call; a session whose runtime is
// gone is removed, so its id answers 404 afterwards.
func (s *Server) sessionError(ctx context.Context, e *sessionEntry, err error) *APIError {
	if ctx.Err() != nil {
		return s.runError(ctx, e.language, err)
	}
	if errors.Is(err, core.ErrUnsupported) {
		return s.runError(ctx, e.language, err)
	}
	if s.sessions.remove(e.id) != nil {
		s.closeLater(e)
	}
	return apiErr(http.StatusGone, "session_ended", fmt.Sprintf("session %s ended: %v", e.id, err))
}

func (s *Server) handleSessionVariable(w http.ResponseWriter, r *http.Request, id, name string) {
	e, done, ok := s.sessions.use(id)
	if !ok {
		writeError(w, s.sessionNotFound(id))
		return
	}
	defer done()
	w.(*recorder).language = e.language
	e.cell.Lock()
	defer e.cell.Unlock()
	v, found, err := e.sess.Variable(r.Context(), name)
	if err != nil {
		if r.Context().Err() != nil {
			writeError(w, s.runError(r.Context(), e.language, err))
			return
		}
		// The runtime could not read it (say, not a valid name). The
		// session stays: if it is gone, its next cell says so.
		writeError(w, apiErr(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("reading %q: %v", name, err)))
		return
	}
	if !found {
		writeError(w, apiErr(http.StatusNotFound, CodeVariableNotFound, fmt.Sprintf("session %s has no variable %q", id, name)))
		return
	}
	writeJSON(w, http.StatusOK, VariableResponse{Name: name, Value: v})
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, _ *http.Request, id string) {
	e := s.sessions.remove(id)
	if e == nil {
		writeError(w, s.sessionNotFound(id))
		return
	}
	w.(*recorder).language = e.language
	// Interrupt a running cell, then close in the background: the client
	// has its answer, and Close waits for the interpreter to exit.
	_ = e.sess.Cancel()
	s.closeLater(e)
	w.WriteHeader(http.StatusNoContent)
}

// closeLater closes a removed session in the background; Server.Close
// waits for it.
func (s *Server) closeLater(e *sessionEntry) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = e.sess.Close()
	}()
}
