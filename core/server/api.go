package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/jsontext"
)

// The methods in this file are the Server's work without HTTP around it:
// POST /execute and the session endpoints call the same code after reading
// their bodies, and other front ends (core/mcpserver, the MCP tools of
// `rlm mcp` and of /mcp) call them directly. So every front end shares one
// set of run slots, one queue, one session table, the limits and the
// metrics. Errors are *APIError: the message is written for the user and
// the HTTP status says which class of error it is.

// Execute runs one program as POST /execute does: the same validation,
// slot and queue (429-class *APIError when full), limits and metrics.
func (s *Server) Execute(ctx context.Context, req *ExecuteRequest) (*ExecuteResponse, error) {
	if !s.limit.enter() {
		return nil, s.busy()
	}
	defer s.limit.leave()
	lang, resp, e := s.execute(ctx, req)
	if e != nil {
		return nil, e
	}
	s.metrics.results.WithLabelValues(lang, resp.Status).Inc()
	return resp, nil
}

// execute is the body of POST /execute once the request is admitted and
// read: it returns the language it resolved (for logs and metrics).
func (s *Server) execute(ctx context.Context, req *ExecuteRequest) (string, *ExecuteResponse, *APIError) {
	return s.executeWith(ctx, req, s.admit, nil)
}

// executeWith is execute taking its run slot with admit, so that a front
// end may wait for a slot its own way (ExecuteWaiting).
func (s *Server) executeWith(ctx context.Context, req *ExecuteRequest, admit func(context.Context) (func(), *APIError), adjust func(*core.Program)) (string, *ExecuteResponse, *APIError) {
	if e := s.commandProgram(req); e != nil {
		return "", nil, e
	}
	lang, e := s.language(req.Language)
	if e != nil {
		return "", nil, e
	}
	prog, e := s.program(req)
	if e != nil {
		return lang, nil, e
	}
	if adjust != nil {
		adjust(&prog)
	}
	release, e := admit(ctx)
	if e != nil {
		return lang, nil, e
	}
	defer release()
	res, err := withRuntime(ctx, s.slots[lang], func(rt *client.Runtime) (*core.Result, error) {
		return rt.Run(ctx, prog)
	})
	if err != nil {
		return lang, nil, s.runError(ctx, lang, err)
	}
	if res.EndedBy == ending.Crashed {
		// The plugin panicked or died under the program: its error
		// carries what the plugin said (its panic, its stderr).
		s.cfg.Logger.Error("runtime crashed", "language", lang, "error", res.Error)
	}
	resp := Response(lang, res)
	return lang, &resp, nil
}

// OpenSession opens a REPL session as POST /sessions does, within the
// same bound on open sessions.
func (s *Server) OpenSession(ctx context.Context, req *SessionRequest) (*SessionCreated, error) {
	lang, sctx, e := s.sessionSpec(req)
	if e != nil {
		return nil, e
	}
	id, e := s.reserveSession()
	if e != nil {
		return nil, e
	}
	_, created, e := s.openSession(ctx, id, lang, sctx, req)
	if e != nil {
		return nil, e
	}
	return created, nil
}

// reserveSession claims room for one session before its request (which
// may hold a large context) is read.
func (s *Server) reserveSession() (string, *APIError) {
	if s.draining.Load() {
		return "", &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	}
	id, ok := s.sessions.reserve()
	if !ok {
		return "", &APIError{Status: http.StatusTooManyRequests, Code: CodeTooManySessions, RetryAfter: s.retryAfter(),
			Message: fmt.Sprintf("the server holds its maximum of %d sessions: close one, or wait for idle ones to expire", s.cfg.MaxSessions)}
	}
	return id, nil
}

// sessionSpec is the one check of a session request's fields, giving the
// runtime and the context to open it with. Both front ends call it before
// looking at the session cap, so a bad request hears what is wrong with
// it rather than that the server is full.
func (s *Server) sessionSpec(req *SessionRequest) (string, *core.Context, *APIError) {
	lang, e := s.language(req.Language)
	if e != nil {
		return "", nil, e
	}
	if _, e := checkEnv(req.Env); e != nil {
		return lang, nil, e
	}
	if e := checkRequirements(req.Requirements); e != nil {
		return lang, nil, e
	}
	if e := s.checkSessionModel(req.Model); e != nil {
		return lang, nil, e
	}
	c, e := requestContext(req.Context)
	return lang, c, e
}

// requestContext is a request's context field as the REPL gets it: a JSON
// string as text, any other JSON value decoded by the runtime, nothing
// for null or absent (POST /sessions and POST /runs).
func requestContext(raw json.RawMessage) (*core.Context, *APIError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return &core.Context{Data: []byte(text), Kind: "text"}, nil
	}
	// The runtime decodes the JSON itself; 1e999 would become infinity.
	if err := jsontext.Finite("field context", raw); err != nil {
		return nil, apiErr(http.StatusBadRequest, CodeBadField, err.Error())
	}
	return &core.Context{Data: raw, Kind: "json"}, nil
}

// openSession opens the session reserved as id, with req's env and
// requirements (checked by sessionSpec); on failure the reservation is
// given back.
func (s *Server) openSession(ctx context.Context, id, lang string, sctx *core.Context, req *SessionRequest) (string, *SessionCreated, *APIError) {
	added := false
	defer func() {
		if !added {
			s.sessions.unreserve(id)
		}
	}()
	entry := &sessionEntry{id: id, language: lang, created: time.Now()}
	if sctx == nil && len(req.Env) == 0 && len(req.Requirements) == 0 && req.Model == "" && s.cfg.WarmSessions > 0 {
		// The common case (no context, env or requirements: the client
		// sends its data in cells) takes a session opened ahead of demand.
		w, err := s.warm.get(ctx, lang)
		if err != nil {
			return lang, nil, s.runError(ctx, lang, err)
		}
		entry.sess, entry.closer = w.sess, w.Close
	} else {
		bridges, e := s.sessionBridges(req.Model)
		if e != nil {
			return lang, nil, e
		}
		sess, err := withRuntime(ctx, s.slots[lang], func(rt *client.Runtime) (core.Session, error) {
			return rt.OpenSession(ctx, core.SessionOptions{
				Runtime: lang, Context: sctx, Env: req.Env, Requirements: req.Requirements, Bridges: bridges,
				Limits: s.sessionLimits(), ReturnFiles: true,
			})
		})
		if err != nil {
			return lang, nil, s.runError(ctx, lang, err)
		}
		entry.sess = sess
	}
	if !s.sessions.add(entry) {
		_ = entry.close()
		return lang, nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	}
	added = true
	return lang, &SessionCreated{ID: id, Language: lang, IdleTimeoutSeconds: s.cfg.SessionIdle.Seconds()}, nil
}

// RunCell runs code in session id as POST /sessions/{id}/execute does,
// taking a run slot like a program.
func (s *Server) RunCell(ctx context.Context, id string, req *CellRequest) (*ExecuteResponse, error) {
	if !s.limit.enter() {
		return nil, s.busy()
	}
	defer s.limit.leave()
	lang, resp, e := s.runCell(ctx, id, req)
	if e != nil {
		return nil, e
	}
	s.metrics.results.WithLabelValues(lang, resp.Status).Inc()
	return resp, nil
}

func (s *Server) runCell(ctx context.Context, id string, req *CellRequest) (string, *ExecuteResponse, *APIError) {
	if req.Code == nil {
		return "", nil, badField("code", "is required")
	}
	var timeout time.Duration
	if req.TimeoutSeconds != nil || req.TimeoutMs != nil {
		t, e := s.timeout(req.TimeoutSeconds, req.TimeoutMs)
		if e != nil {
			return "", nil, e
		}
		timeout = t
	}
	files, fe := inputFiles(req.Files)
	if fe != nil {
		return "", nil, fe
	}
	e, done, ok := s.sessions.use(id)
	if !ok {
		return "", nil, s.sessionNotFound(id)
	}
	defer done()
	cr, canFiles := e.sess.(core.CellRunner)
	if len(files) > 0 && !canFiles {
		return e.language, nil, apiErr(http.StatusNotImplemented, CodeUnsupported, fmt.Sprintf("the %s runtime's sessions cannot take files", e.language))
	}
	release, ae := s.admit(ctx)
	if ae != nil {
		return e.language, nil, ae
	}
	defer release()
	e.cell.Lock()
	defer e.cell.Unlock()
	if e.deleted.Load() {
		return e.language, nil, e.deletedError(false)
	}
	cell, end := e.running.start()
	defer end()
	// A caller that goes away (a dropped connection, an MCP
	// notifications/cancelled) interrupts the cell as POST
	// /sessions/{id}/interrupt does, so the session and its state stay.
	stop := context.AfterFunc(ctx, func() { e.interrupt(context.Background(), cell) })
	defer stop()
	var (
		res *core.Result
		err error
	)
	if canFiles {
		res, err = cr.RunCell(ctx, core.Cell{Code: *req.Code, Timeout: timeout, Files: files})
	} else {
		res, err = e.sess.Execute(ctx, *req.Code, timeout)
	}
	// A cell that finished before the DELETE keeps its result; one the
	// DELETE interrupted or cut off is answered as deleted.
	if e.deleted.Load() && (err != nil || res.EndedBy == ending.Cancelled) {
		return e.language, nil, e.deletedError(true)
	}
	if err != nil {
		return e.language, nil, s.sessionError(ctx, e, err)
	}
	resp := Response(e.language, res)
	return e.language, &resp, nil
}

// Variable reads a variable of session id as GET
// /sessions/{id}/variables/{name} does.
func (s *Server) Variable(ctx context.Context, id, name string) (*VariableResponse, error) {
	_, v, e := s.variable(ctx, id, name)
	if e != nil {
		return nil, e
	}
	return v, nil
}

func (s *Server) variable(ctx context.Context, id, name string) (string, *VariableResponse, *APIError) {
	if !isIdentifier(name) {
		// Not a name any runtime's global can have; the runtimes answer
		// "not found" for it, which would hide the typo behind a 404.
		return "", nil, apiErr(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(
			"variable name %q is not an identifier: give a global's name, a letter, _ or $ then letters, digits, _ or $ (such as x or my_var)", name))
	}
	e, done, ok := s.sessions.use(id)
	if !ok {
		return "", nil, s.sessionNotFound(id)
	}
	defer done()
	e.cell.Lock()
	defer e.cell.Unlock()
	if e.deleted.Load() {
		return e.language, nil, e.deletedError(false)
	}
	v, found, err := e.sess.Variable(ctx, name)
	if err != nil && e.deleted.Load() {
		return e.language, nil, e.deletedError(true)
	}
	if err != nil {
		if ctx.Err() != nil {
			return e.language, nil, s.runError(ctx, e.language, err)
		}
		// The runtime could not read it (say, not a valid name). The
		// session stays: if it is gone, its next cell says so.
		return e.language, nil, apiErr(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("reading %q: %v", name, err))
	}
	if !found {
		return e.language, nil, apiErr(http.StatusNotFound, CodeVariableNotFound, fmt.Sprintf("session %s has no variable %q", id, name))
	}
	return e.language, &VariableResponse{Name: name, Value: v}, nil
}

// isIdentifier says whether name can name a global in some runtime: a
// letter, _ or $ (JavaScript's), then letters, digits, _ or $. Letters and
// digits are Unicode's, as Python's and JavaScript's identifiers allow.
func isIdentifier(name string) bool {
	for i, r := range name {
		switch {
		case unicode.IsLetter(r) || r == '_' || r == '$':
		case i > 0 && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)):
		default:
			return false
		}
	}
	return name != ""
}

// CloseSession ends session id as DELETE /sessions/{id} does: a running
// cell is interrupted and the interpreter exits in the background.
func (s *Server) CloseSession(id string) error {
	if _, e := s.closeSession(id); e != nil {
		return e
	}
	return nil
}

func (s *Server) closeSession(id string) (string, *APIError) {
	return s.endSession(id, "was deleted (DELETE /sessions/"+id+", or MCP session_close)")
}

// endSession ends session id, remembering why (a phrase after "it"), as
// DELETE does.
func (s *Server) endSession(id, why string) (string, *APIError) {
	e := s.sessions.remove(id, why)
	if e == nil {
		return "", s.sessionNotFound(id)
	}
	// Interrupt a running cell, then close in the background: the client
	// has its answer, and Close waits for the interpreter to exit. The
	// mark comes first, so the interrupted cell sees it.
	e.deleted.Store(true)
	_ = e.sess.Cancel()
	s.closeLater(e)
	return e.language, nil
}

// RuntimeInfo describes one enabled runtime.
type RuntimeInfo struct {
	// Name is what a request's language names (python, golang, node, shell).
	Name string `json:"name" jsonschema:"the value to pass as language"`
	// Default is true for the runtime used when no language is given.
	Default        bool   `json:"default" jsonschema:"true for the runtime used when language is omitted"`
	Available      bool   `json:"available" jsonschema:"whether the runtime answers now"`
	Error          string `json:"error,omitempty" jsonschema:"why the runtime is not available"`
	RuntimeVersion string `json:"runtime_version,omitempty" jsonschema:"the interpreter or toolchain version, e.g. Python 3.11.7"`
	PluginVersion  string `json:"plugin_version,omitempty" jsonschema:"the version of rlm's plugin for it"`
	FileExtension  string `json:"file_extension,omitempty" jsonschema:"the extension code is saved with"`
	Backend        string `json:"backend,omitempty" jsonschema:"what runs it: native, daemon or pyodide"`
	// Isolation is the sandbox programs run under, resolved from what the
	// runtime's plugin declares and this host enforces (never auto);
	// SessionIsolation that of REPL sessions. Empty, with the reason in
	// IsolationError or SessionIsolationError, when the configured level
	// cannot be given (every such request is refused), or when the
	// runtime has not declared itself yet (see Error); SessionIsolation is
	// empty for a runtime without sessions (no repl capability).
	Isolation             string   `json:"isolation" jsonschema:"the sandbox level programs run under (none, process, namespace, wasm), as enforced here"`
	SessionIsolation      string   `json:"session_isolation" jsonschema:"the sandbox level sessions run under, as enforced here (empty for a runtime without sessions)"`
	IsolationError        string   `json:"isolation_error,omitempty" jsonschema:"why programs cannot run at the configured level"`
	SessionIsolationError string   `json:"session_isolation_error,omitempty" jsonschema:"why sessions cannot run at the configured level"`
	Capabilities          []string `json:"capabilities" jsonschema:"features of the runtime; repl means it supports sessions"`
}

// Runtimes describes the enabled runtimes, default first, launching a
// plugin that is not running (as GET /health does).
func (s *Server) Runtimes(ctx context.Context) []RuntimeInfo {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out := make([]RuntimeInfo, 0, len(s.cfg.Modes))
	for i, m := range s.cfg.Modes {
		ri := RuntimeInfo{Name: m, Default: i == 0, Capabilities: []string{}}
		err := s.slots[m].Ping(ctx)
		ri.Available = err == nil
		if err != nil {
			ri.Error = err.Error()
		}
		if info := s.slots[m].Declared(); info != nil {
			ri.RuntimeVersion, ri.PluginVersion = info.RuntimeVersion, info.PluginVersion
			ri.FileExtension, ri.Backend = info.FileExtension, info.Backend
			ri.Capabilities = append(ri.Capabilities, info.Capabilities...)
			// The levels runs get (as /health's runtime_isolation says),
			// not the one configured: auto is a request, not a sandbox.
			iso := runtimeIsolation(s.slots[m], s.sessionLimits().Isolation)
			ri.Isolation, ri.SessionIsolation = iso.Programs, iso.Sessions
			ri.IsolationError, ri.SessionIsolationError = iso.ProgramsError, iso.SessionsError
			if !info.Has("repl") {
				// No sessions: no level to report for them.
				ri.SessionIsolation, ri.SessionIsolationError = "", ""
			}
		}
		out = append(out, ri)
	}
	return out
}

// Handle mounts h at path (exactly that path) behind the server's token,
// body limit, request log and metrics; `rlm serve` mounts MCP at /mcp this
// way. Call it before serving.
func (s *Server) Handle(path string, h http.Handler) {
	if s.mounts == nil {
		s.mounts = map[string]http.Handler{}
	}
	s.mounts[path] = h
}

// BodyLimit is the largest request body in bytes (Config.BodyLimit).
func (s *Server) BodyLimit() int64 { return s.cfg.BodyLimit }
