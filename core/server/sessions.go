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
	"sync/atomic"
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
	// ended remembers why recently ended sessions ended (see end).
	ended     map[string]string
	endedRing []string
	endedNext int
	// idSuffix ends every id: the replica's route (replicas.go), or "".
	idSuffix string
}

// endedMemory is how many ended sessions the server remembers, so that a
// call naming one answers 410 session_ended with why it ended (deleted,
// expired, its interpreter gone) rather than 404, which could not tell a
// session that is gone from a mistyped id. Ids are 128 random bits and
// never reused, so a remembered id cannot name a live session. The oldest
// is forgotten first; an id ended longer ago than the last endedMemory
// endings answers 404 like one that never existed. At about 150 bytes an
// entry this bounds the memory at well under a megabyte.
const endedMemory = 4096

// end records that session id ended, and why (a phrase after "it", such
// as "was deleted"). t.mu must be held.
func (t *sessionTable) end(id, why string) {
	if t.ended == nil {
		t.ended = map[string]string{}
		t.endedRing = make([]string, endedMemory)
	}
	if old := t.endedRing[t.endedNext]; old != "" {
		delete(t.ended, old)
	}
	t.endedRing[t.endedNext] = id
	t.endedNext = (t.endedNext + 1) % len(t.endedRing)
	t.ended[id] = why
}

// endedWhy says why session id ended, when it is among those remembered.
func (t *sessionTable) endedWhy(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	why, ok := t.ended[id]
	return why, ok
}

type sessionEntry struct {
	id       string
	language string
	sess     core.Session
	// closer ends the session: sess.Close, or the warm pool's worker that
	// holds it (see warmSessions).
	closer  func() error
	created time.Time
	// busy counts requests using the session; an idle sweep skips it.
	busy     int
	lastUsed time.Time
	// cell serializes cells: a REPL runs one at a time.
	cell sync.Mutex
	// deleted is set by DELETE /sessions/{id} before it interrupts the
	// running cell, so that the cell and the requests queued behind it
	// say the session was deleted, rather than report an interrupt that
	// "kept the session state" or the closed stream's gRPC error.
	deleted atomic.Bool
	// running is the cell running now, for POST /sessions/{id}/interrupt.
	running running
	// sb is the session as a sandbox: its commands, files and lifetime
	// (sandbox.go).
	sb sandboxState
}

// deletedError answers a request on a session that DELETE removed while
// the request ran or waited for the cell before it.
func (e *sessionEntry) deletedError(ran bool) *APIError {
	what := "waited for the cell before it; it did not run"
	if ran {
		what = "ran; it was interrupted"
	}
	return apiErr(http.StatusGone, CodeSessionEnded, fmt.Sprintf(
		"session %s was deleted (DELETE /sessions/%s) while this request %s, and the session's state is gone: open a new session with POST /sessions", e.id, e.id, what))
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
	id := hex.EncodeToString(b[:]) + t.idSuffix
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

// remove takes the session out of the table, remembering why it ended
// (end); the caller closes it.
func (t *sessionTable) remove(id, why string) *sessionEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return nil
	}
	delete(t.byID, id)
	t.end(id, why)
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
				if e != nil && e.busy == 0 && now.Sub(e.lastUsed) > t.idle && !e.sb.hasDeadline() {
					delete(t.byID, id)
					t.end(id, fmt.Sprintf("expired after %s idle", t.idle))
					expired = append(expired, e)
				}
			}
			if len(expired) > 0 {
				t.changed()
			}
			t.mu.Unlock()
			for _, e := range expired {
				_ = e.close()
			}
		}
	}
}

func (e *sessionEntry) close() error {
	e.sb.stopDeadline()
	if e.closer != nil {
		return e.closer()
	}
	return e.sess.Close()
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
				_ = e.close()
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
	// Env is added to the interpreter's environment (os.environ), under
	// /execute's rules for its env field (core.CheckEnv); a session with
	// env is opened for the request, never taken from the warm pool.
	Env map[string]string `json:"env,omitempty"`
	// Requirements are installed once, before the session's interpreter
	// starts, as /execute installs them (the same cache), and importable
	// in every cell. A runtime that installs none refuses them (400), as
	// one whose installer fails does, with its output: the session does
	// not open. Like env, they rule out a warm session.
	Requirements []string `json:"requirements,omitempty"`
	// Model answers the session's llm_query calls that name none, among
	// the models the server allows (Config.SessionBridges); "" is the
	// server's default. Like env, it rules out a warm session.
	Model string `json:"model,omitempty"`
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
	// Files (name → base64) are written into the session's working
	// directory before the cell runs, where its code opens them by
	// relative path; a file of the same name is replaced. A cell with
	// files and code "" only uploads.
	//
	// Uploads are a field of the cell rather than an endpoint of their
	// own (say PUT /sessions/{id}/files/{path}) because that is how
	// /execute and MCP's run_code already take files: clients build one
	// shape, the names go through /execute's validation with its errors,
	// MCP's session_run gets them with no new tool, and an upload is
	// serialised with the session's cells, so a running cell never sees a
	// file change under it. The body limit (--body-limit) bounds an upload
	// as it bounds /execute's files; --max-disk, when set, bounds the
	// directory. Names are relative without ".." (400 before anything is
	// written); a name whose path meets a symlink, or a directory where the
	// file should go, is refused with 400 and the cell does not run.
	Files FileMap `json:"files,omitempty"`
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
	// Room is reserved before the body (which may hold a large context) is
	// read, so at most MaxSessions bodies are held.
	id, full := s.reserveSession()
	if full != nil && full.Code != CodeTooManySessions {
		writeError(w, full)
		return
	}
	if full != nil {
		// The body is read anyway, so that a bad request is told what is
		// wrong with it rather than to retry; the run queue bounds how
		// many of these bodies are held.
		if !s.limit.enter() {
			w.Header().Set("Connection", "close") // its body is not read
			writeError(w, full)
			return
		}
		defer s.limit.leave()
	}
	created, ok := decodeRun(s, w, r, func(ctx context.Context, req *SessionRequest) (string, *SessionCreated, *APIError) {
		lang, sctx, e := s.sessionSpec(req)
		if e != nil {
			return lang, nil, e
		}
		if full != nil {
			return lang, nil, full
		}
		return s.openSession(ctx, id, lang, sctx, req)
	})
	if !ok {
		// A request that never reached openSession (which gives the
		// reservation back when it fails) gives it back here; twice does
		// no harm.
		if full == nil {
			s.sessions.unreserve(id)
		}
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

// sessionNotFound answers a call naming a session that is not open: 410
// session_ended, with why, for one that ended recently (endedMemory); 404
// for any other id.
func (s *Server) sessionNotFound(id string) *APIError {
	if why, ok := s.sessions.endedWhy(id); ok {
		return apiErr(http.StatusGone, CodeSessionEnded, fmt.Sprintf(
			"session %q has ended: it %s, and its state is gone: open a new session (POST /sessions, or MCP session_open)", id, why))
	}
	return apiErr(http.StatusNotFound, CodeSessionNotFound, fmt.Sprintf(
		"no session %q: no session with this id is open or ended recently (sessions close after %s idle); open one with POST /sessions", id, s.cfg.SessionIdle))
}

func (s *Server) handleSessionExecute(w http.ResponseWriter, r *http.Request, id string) {
	serveRun(s, w, r, func(ctx context.Context, req *CellRequest) (string, *ExecuteResponse, *APIError) {
		return s.runCell(ctx, id, req)
	})
}

// sessionError answers a failed session call; a session whose runtime is
// gone is removed, and its id answers 410 afterwards too (sessionNotFound).
func (s *Server) sessionError(ctx context.Context, e *sessionEntry, err error) *APIError {
	if ctx.Err() != nil {
		return s.runError(ctx, e.language, err)
	}
	var refused *core.RefusedError
	if errors.Is(err, core.ErrUnsupported) || errors.As(err, &refused) {
		// the runtime refused the request (say, a cell's file through a
		// symlink); the session is fine
		return s.runError(ctx, e.language, err)
	}
	if s.sessions.remove(e.id, fmt.Sprintf("ended when its interpreter failed (%v)", err)) != nil {
		s.closeLater(e)
	}
	return apiErr(http.StatusGone, CodeSessionEnded, fmt.Sprintf("session %s ended: %v", e.id, err))
}

func (s *Server) handleSessionVariable(w http.ResponseWriter, r *http.Request, id, name string) {
	lang, v, e := s.variable(r.Context(), id, name)
	w.(*recorder).language = lang
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, _ *http.Request, id string) {
	lang, e := s.closeSession(id)
	w.(*recorder).language = lang
	if e != nil {
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// closeLater closes a removed session in the background; Server.Close
// waits for it.
func (s *Server) closeLater(e *sessionEntry) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = e.close()
	}()
}
