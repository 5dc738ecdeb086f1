// Package server is rlm's HTTP sandbox server: an http.Handler that runs
// programs (`POST /execute`), keeps stateful REPL sessions (`/sessions`),
// and reports health, metrics and its own OpenAPI document. `rlm serve`
// mounts it; a library user can mount it in any mux.
//
// The wire format is the earlier sandbox server's (seeds/README.md), so its
// clients work unchanged: `{code, timeout_seconds, requirements, files}` in,
// `{status, stdout, stderr, exit_code, execution_time_ms, files_produced}`
// out, plus the fields documented in docs/openapi.json.
//
// # Notes
//
//   - One plugin process per runtime lives as long as the Server; every
//     request is a call on it (the plugin runs calls concurrently), and a
//     plugin that dies is launched again on the next call. The keeping and
//     relaunching is client.Supervisor's, which the daemon uses too; what
//     is serve's own (a runtime must be available here, errors are 503s)
//     is in runtimes.go.
//   - At most MaxConcurrent runs (and session cells) are in flight; up to
//     Queue more wait at most QueueWait for a slot; anything beyond is
//     answered 429 with Retry-After at once, before its body is read, so
//     the memory held in request bodies is bounded as well.
//   - A plugin that died is relaunched and the call that found it dead is
//     made once more when it died before taking the request (while idle).
//     A program whose plugin dies once it has the request (one that kills
//     its own plugin) is never run twice: it ends crashed ("may have
//     partly run"). A plugin that dies twice before taking a request is a
//     503.
//   - User mistakes are 4xx, never 500: what the runtime itself refuses
//     (core.RefusedError, InvalidArgument) is 400.
//   - A request's context is the run's context: a client that disconnects
//     cancels its run, and the program's process group is killed.
//   - Bodies are read through http.MaxBytesReader: a body over BodyLimit is
//     answered 413 as soon as the limit is passed; the rest is never read.
//   - Session cells may call llm_query only when Bridges has an LLMQuery;
//     otherwise the call raises a Python error saying no LLM is configured.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/docs"
	"github.com/rlmkit/rlm/internal/host/pool"
	"github.com/rlmkit/rlm/internal/version"
)

// Config configures a Server. Zero values take the defaults noted.
type Config struct {
	// Modes are the enabled runtimes; the first is the default for a
	// request that names no language. Required.
	Modes []string
	// Open connects to a runtime by name. Required.
	Open Opener
	// MaxConcurrent bounds runs in flight (default: the number of CPUs).
	MaxConcurrent int
	// Queue is how many requests may wait for a slot (0: none, 429 at once).
	Queue int
	// QueueWait bounds one request's wait for a slot (default 10 s).
	QueueWait time.Duration
	// BodyLimit bounds a request body in bytes (default 8 MiB).
	BodyLimit int64
	// DefaultTimeout applies when a request gives none (default 30 s).
	DefaultTimeout time.Duration
	// MaxTimeout caps every request's timeout (default 5 min).
	MaxTimeout time.Duration
	// MaxOutput is the bytes of stdout and of stderr kept (0: runtime default).
	MaxOutput int64
	// Limits are the sandbox of every program and session: Isolation,
	// MemoryBytes, MaxProcesses, MaxDiskBytes, CPU, AllowNetwork (the wall
	// clock and output come from the fields above and the request).
	// Isolation may be auto; each runtime resolves it for its programs and
	// for its sessions from what its plugin declares (client.Runtime.Isolation),
	// and /health reports the outcome per runtime.
	Limits core.Limits
	// Token, when set, is required as `Authorization: Bearer TOKEN` (or
	// in TokenHeader, see agentsandbox.go) on everything but /health.
	Token string
	// SessionIdle closes a session unused this long (default 10 min).
	SessionIdle time.Duration
	// MaxSessions bounds open sessions (default 64).
	MaxSessions int
	// WarmSessions is how many sessions of each language the server keeps
	// open ahead of demand (interpreter started inside its sandbox, helpers
	// loaded), from that language's first POST /sessions on; a request
	// without a context takes one instead of starting one. 0: none.
	WarmSessions int
	// Bridges serve llm_query / rlm_query in session cells.
	Bridges core.Bridges
	// SessionBridges, when set, replaces Bridges: it gives each new
	// session its own bridges (and so its own model budget), with model
	// being the session's choice (POST /sessions {"model"}; "" for the
	// default). Its error refuses the session with 400. See sessionmodel.go.
	SessionBridges func(model string) (core.Bridges, error)
	// Logger receives one line per request (default: discard).
	Logger *slog.Logger
	// Version is reported by /health.
	Version string
	// Runtimes are connections already opened (by OpenModes); the server
	// takes them over instead of launching its own.
	Runtimes map[string]*client.Runtime
	// Runs, when set, lets the server run RLM loops (POST /runs, see
	// runs.go); nil refuses them.
	Runs *RunsConfig
	// Replica, when set, makes session ids name this replica, and calls
	// for another replica's session go there (replicas.go).
	Replica *Replica
}

// Server is the handler. Create it with New; Close it to end every session
// and plugin.
type Server struct {
	cfg      Config
	slots    map[string]*client.Supervisor
	limit    *limiter
	sessions *sessionTable
	warm     *warmSessions
	metrics  *metrics
	// mounts are handlers added with Handle, by exact path.
	mounts   map[string]http.Handler
	runTab   runTable
	started  time.Time
	draining atomic.Bool
	// unready fails /health while work is still served (drain.go).
	unready atomic.Bool
	// replica routes other replicas' sessions (replicas.go); nil alone.
	replica  *replicaRouting
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New builds a Server. Runtimes are launched lazily unless cfg.Runtimes
// hands over open ones.
func New(cfg Config) (*Server, error) {
	if len(cfg.Modes) == 0 {
		return nil, errorf("server: no modes configured")
	}
	if cfg.Open == nil {
		return nil, errorf("server: Config.Open is required")
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = runtime.NumCPU()
	}
	if cfg.Queue < 0 {
		cfg.Queue = 0
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = 10 * time.Second
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 8 << 20
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 5 * time.Minute
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = defaults.Timeout
	}
	cfg.DefaultTimeout = min(cfg.DefaultTimeout, cfg.MaxTimeout)
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 10 * time.Minute
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = version.String()
	}
	s := &Server{
		cfg:     cfg,
		slots:   map[string]*client.Supervisor{},
		limit:   newLimiter(cfg.MaxConcurrent, cfg.Queue, cfg.QueueWait),
		metrics: newMetrics(),
		started: time.Now(),
		stop:    make(chan struct{}),
	}
	s.metrics.capacity.Set(float64(cfg.MaxConcurrent))
	s.limit.onChange = func(inFlight, waiting int64) {
		s.metrics.inFlight.Set(float64(inFlight))
		s.metrics.queue.Set(float64(waiting))
	}
	for i, m := range cfg.Modes {
		m = Canonical(m)
		cfg.Modes[i] = m
		sup := supervise(m, cfg.Open, func(name string) {
			s.metrics.restarts.WithLabelValues(name).Inc()
			cfg.Logger.Warn("runtime relaunched", "language", name)
		})
		if rt := cfg.Runtimes[m]; rt != nil {
			_, _ = rt.Declared(context.Background()) // cached for /health
			sup.Adopt(rt)
		}
		s.slots[m] = sup
	}
	s.sessions = newSessionTable(cfg.MaxSessions, cfg.SessionIdle, func(n int) { s.metrics.sessions.Set(float64(n)) })
	if cfg.Replica != nil {
		rr, err := newReplicaRouting(*cfg.Replica)
		if err != nil {
			return nil, err
		}
		s.replica, s.sessions.idSuffix = rr, rr.suffix()
	}
	s.warm = &warmSessions{srv: s, pools: map[string]*pool.Pool[*warmSession]{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.sessions.janitor(s.stop)
	}()
	return s, nil
}

// Capacity is the number of run slots.
func (s *Server) Capacity() int { return s.cfg.MaxConcurrent }

// InFlight is the number of runs and cells executing now.
func (s *Server) InFlight() int64 { return s.limit.inFlight.Load() }

// Drain makes /health answer 503 and new work be refused, so a load
// balancer stops sending requests while in-flight ones finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Close ends every session and kills every plugin process. In-flight runs
// fail; call it after http.Server.Shutdown.
func (s *Server) Close() {
	s.Drain()
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.runs().closeKept()
	s.warm.close()
	s.sessions.closeAll()
	for _, sl := range s.slots {
		sl.Close()
	}
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: 200}
	reqID := requestID(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", reqID)
	route, h := s.route(r)
	func() {
		if route != "/health" && s.cfg.Token != "" && !s.authorized(r) {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="rlm"`)
			writeError(rec, apiErr(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token: send Authorization: Bearer TOKEN (or "+TokenHeader+": TOKEN behind a proxy that strips Authorization)"))
			return
		}
		h(rec, r)
	}()
	d := time.Since(start)
	s.metrics.observe(route, rec.status, rec.language, rec.result, d)
	attrs := []any{"request_id", reqID, "method", r.Method, "path", r.URL.Path, "route", route, "status", rec.status,
		"duration_ms", float64(d.Microseconds()) / 1000, "bytes", rec.bytes, "remote", r.RemoteAddr}
	if rec.language != "" {
		attrs = append(attrs, "language", rec.language)
	}
	if rec.result != "" {
		attrs = append(attrs, "result", rec.result)
	}
	if rec.errCode != "" {
		attrs = append(attrs, "error", rec.errCode)
	}
	s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", argsToAttrs(attrs)...)
}

// requestID keeps a client's X-Request-Id when it is short and printable,
// else makes one, so a log line can be matched with a client's report.
func requestID(given string) string {
	if n := len(given); n > 0 && n <= 64 && strings.IndexFunc(given, func(r rune) bool { return r <= ' ' || r > '~' }) < 0 {
		return given
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func argsToAttrs(args []any) []slog.Attr {
	out := make([]slog.Attr, 0, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		out = append(out, slog.Any(args[i].(string), args[i+1]))
	}
	return out
}

func (s *Server) authorized(r *http.Request) bool {
	tok, ok := requestToken(r)
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
}

// route picks the handler; the route name (a pattern) labels metrics.
func (s *Server) route(r *http.Request) (string, http.HandlerFunc) {
	p := r.URL.Path
	parts := strings.Split(strings.Trim(p, "/"), "/")
	allow := func(route string, methods string, h http.HandlerFunc) (string, http.HandlerFunc) {
		for _, m := range strings.Split(methods, ",") {
			if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
				return route, h
			}
		}
		return route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.ReplaceAll(methods, ",", ", "))
			writeError(w, apiErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				r.Method+" is not allowed on "+route+": use "+strings.ReplaceAll(methods, ",", " or ")))
		}
	}
	if len(parts) >= 2 && parts[0] == "sessions" {
		if h := s.elsewhere(r, parts[1]); h != nil {
			return "/sessions/{id} (other replica)", h
		}
	}
	switch {
	case p == "/health":
		return allow("/health", "GET", s.handleHealth)
	case p == "/metrics":
		return allow("/metrics", "GET", s.metrics.handler().ServeHTTP)
	case p == "/openapi.json":
		return allow("/openapi.json", "GET", serveOpenAPI)
	case p == "/execute":
		return allow("/execute", "POST", s.handleExecute)
	case s.mounts[p] != nil:
		h := s.mounts[p]
		return p, func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.BodyLimit)
			h.ServeHTTP(w, r)
		}
	case p == "/sessions":
		return allow("/sessions", "GET,POST", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				s.handleSessionCreate(w, r)
				return
			}
			s.handleSessionList(w, r)
		})
	case len(parts) == 2 && parts[0] == "sessions" && parts[1] != "":
		return allow("/sessions/{id}", "DELETE", func(w http.ResponseWriter, r *http.Request) {
			s.handleSessionDelete(w, r, parts[1])
		})
	case len(parts) == 3 && parts[0] == "sessions" && parts[1] != "" && parts[2] == "execute":
		return allow("/sessions/{id}/execute", "POST", func(w http.ResponseWriter, r *http.Request) {
			s.handleSessionExecute(w, r, parts[1])
		})
	case len(parts) == 3 && parts[0] == "sessions" && parts[1] != "" && parts[2] == "interrupt":
		return allow("/sessions/{id}/interrupt", "POST", func(w http.ResponseWriter, r *http.Request) {
			s.handleSessionInterrupt(w, r, parts[1])
		})
	case p == "/runs":
		return allow("/runs", "GET,POST", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				s.handleRunCreate(w, r)
				return
			}
			s.handleRunList(w, r)
		})
	case len(parts) == 2 && parts[0] == "runs" && parts[1] != "":
		return allow("/runs/{id}", "GET,DELETE", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				s.handleRunCancel(w, r, parts[1], true)
				return
			}
			s.handleRunGet(w, r, parts[1])
		})
	case len(parts) == 3 && parts[0] == "runs" && parts[1] != "" && parts[2] == "events":
		return allow("/runs/{id}/events", "GET", func(w http.ResponseWriter, r *http.Request) { s.handleRunEvents(w, r, parts[1]) })
	case len(parts) == 3 && parts[0] == "runs" && parts[1] != "" && parts[2] == "cancel":
		return allow("/runs/{id}/cancel", "POST", func(w http.ResponseWriter, r *http.Request) { s.handleRunCancel(w, r, parts[1], false) })
	case len(parts) == 4 && parts[0] == "sessions" && parts[1] != "" && parts[2] == "variables" && parts[3] != "":
		return allow("/sessions/{id}/variables/{name}", "GET", func(w http.ResponseWriter, r *http.Request) {
			s.handleSessionVariable(w, r, parts[1], parts[3])
		})
	case len(parts) >= 3 && parts[0] == "sessions" && parts[1] != "" && (parts[2] == "commands" || parts[2] == "files"):
		return s.sandboxRoute(parts, allow)
	}
	return "other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiErr(http.StatusNotFound, CodeNotFound, "no such endpoint: "+p+" (see GET /openapi.json)"))
	}
}

// programLimits are the limits of one program run with the given wall clock.
func (s *Server) programLimits(wall time.Duration) core.Limits {
	l := s.cfg.Limits
	l.Wall, l.MaxOutputBytes = wall, s.cfg.MaxOutput
	return l
}

// sessionLimits are the limits a REPL session is opened with.
func (s *Server) sessionLimits() core.Limits {
	return s.programLimits(s.cfg.DefaultTimeout)
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(docs.OpenAPI)
}

// Health is the body of GET /health.
type Health struct {
	// Status is "ok", or "unavailable" (with HTTP 503) when the server
	// cannot serve: draining, or its default runtime does not answer.
	Status string `json:"status"`
	// Mode is the default runtime; Modes every enabled one.
	Mode           string            `json:"mode"`
	Modes          []string          `json:"modes"`
	RuntimeVersion string            `json:"runtime_version"`
	Runtimes       map[string]string `json:"runtimes"`
	Capacity       int               `json:"capacity"`
	CurrentLoad    int64             `json:"current_load"`
	QueueDepth     int64             `json:"queue_depth"`
	Sessions       int               `json:"sessions"`
	UptimeSeconds  float64           `json:"uptime_seconds"`
	Version        string            `json:"version"`
	// Isolation is the level the default mode's programs run under (none,
	// process, namespace, or a plugin's own such as wasm);
	// SessionIsolation that of its REPL sessions. RuntimeIsolation says
	// the same for every mode: each plugin declares what it can enforce.
	Isolation        string                      `json:"isolation"`
	SessionIsolation string                      `json:"session_isolation"`
	RuntimeIsolation map[string]RuntimeIsolation `json:"runtime_isolation"`
	// WarmSessions counts, per language, the sessions opened ahead of
	// demand and not yet handed out.
	WarmSessions map[string]int `json:"warm_sessions,omitempty"`
	Error        string         `json:"error,omitempty"`
}

// RuntimeIsolation is what one runtime's programs and sessions run under.
// A level the runtime cannot give (the server was started with an explicit
// level its sessions do not support) is empty, with the reason.
type RuntimeIsolation struct {
	Programs      string `json:"programs"`
	Sessions      string `json:"sessions"`
	ProgramsError string `json:"programs_error,omitempty"`
	SessionsError string `json:"sessions_error,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := Health{
		Status:           "ok",
		Mode:             s.cfg.Modes[0],
		Modes:            s.cfg.Modes,
		Runtimes:         map[string]string{},
		Capacity:         s.cfg.MaxConcurrent,
		CurrentLoad:      s.limit.inFlight.Load(),
		QueueDepth:       s.limit.waiting.Load(),
		Sessions:         s.sessions.count(),
		UptimeSeconds:    float64(time.Since(s.started).Milliseconds()) / 1000,
		Version:          s.cfg.Version,
		RuntimeIsolation: map[string]RuntimeIsolation{},
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	for i, m := range s.cfg.Modes {
		err := s.slots[m].Ping(ctx)
		if info := s.slots[m].Declared(); info != nil {
			h.Runtimes[m] = info.RuntimeVersion
			h.RuntimeIsolation[m] = runtimeIsolation(s.slots[m], s.cfg.Limits.Isolation)
		}
		if err != nil && i == 0 {
			h.Status, h.Error = "unavailable", err.Error()
		}
	}
	h.WarmSessions = s.warm.idle()
	h.RuntimeVersion = h.Runtimes[h.Mode]
	h.Isolation = h.RuntimeIsolation[h.Mode].Programs
	h.SessionIsolation = h.RuntimeIsolation[h.Mode].Sessions
	if why := s.healthDraining(); why != "" {
		h.Status, h.Error = "unavailable", why
	}
	code := http.StatusOK
	if h.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

// recorder remembers what a handler answered, for logs and metrics.
type recorder struct {
	http.ResponseWriter
	status   int
	bytes    int
	wrote    bool
	language string
	result   string
	errCode  string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
