// Package daemon is `rlm daemon`: one long-lived process behind a Unix
// socket (a named pipe on Windows) that keeps runtime plugins running and
// REPL sessions warm, and the client side that the daemon backend uses.
//
// The daemon serves the same gRPC runtime service as a plugin, so a daemon
// client is client.NewRuntime over a connection to the socket; requests name
// their runtime and the daemon routes them.
//
// # What the daemon does per request
//
//   - Session: the client gets a warm worker from the runtime's pool (a
//     session opened ahead of time, interpreter started, helpers loaded)
//     when its open asks for nothing a warm worker lacks: no context, no
//     environment, limits equal to the pool's (the wall limit and an unset
//     output limit excepted). Otherwise the daemon opens a session for it on
//     its long-lived plugin, which still saves the plugin start. The stream
//     is proxied both ways, callbacks (llm_query, rlm_query) included, and
//     the worker is killed when the client is done or goes away: a worker
//     is never handed to a second client.
//   - Run on a pooled runtime: a plain program (code only: no files, stdin,
//     args, env, requirements, context or produced files asked for) runs as
//     one cell in a fresh warm worker, which is then discarded. SystemExit
//     gives the exit status, as for a script. What differs from a real
//     script: tracebacks name "<cell 1>" rather than main.py, sys.argv is
//     [""], __file__ is not set, and the working directory is the
//     session's, not a fresh workspace. Anything else is proxied to the
//     plugin's own Run.
//   - Run on other runtimes, Check and Info: proxied to a plugin process
//     kept running per runtime (relaunched if it dies). Sessions use a
//     second process of the same plugin (see host).
//
// Every result says backend "daemon".
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/catalog"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/host/pool"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// BackendName is what results served by the daemon report as backend.
const BackendName = "daemon"

// Config configures a daemon.
type Config struct {
	// Socket to listen on; "" for DefaultSocket().
	Socket string
	// Workers is the number of warm sessions kept per pooled runtime.
	Workers int
	// Runtimes get a warm pool and a plugin started with the daemon. Other
	// runtimes are served too, with their plugin started on first use.
	Runtimes []string
	// Plugins is where runtime plugins are found.
	Plugins launch.SearchPath
	// MaxOutputBytes is the output limit warm sessions are opened with; a
	// request asking for another one gets a session of its own.
	MaxOutputBytes int64
	// Sandbox holds the isolation and resource limits warm sessions are
	// opened with (its wall clock and output fields are ignored): the
	// configured defaults, so that a plain `rlm exec` fits a warm worker.
	// A request asking for other limits gets a run or session of its own.
	Sandbox *pb.Limits
	// Drain is how long a stop waits for running requests and sessions
	// before it cuts them off (default 10s).
	Drain time.Duration
	// Log receives one line per notable event (nil: discarded).
	Log io.Writer
}

// Server is a running daemon.
type Server struct {
	cfg     Config
	paths   Paths
	started time.Time

	mu    sync.Mutex
	hosts map[string]*host

	stopOnce sync.Once
	stopped  chan struct{}
}

// New prepares a daemon; Serve runs it.
func New(cfg Config) *Server {
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return &Server{cfg: cfg, paths: PathsFor(cfg.Socket), hosts: map[string]*host{}, stopped: make(chan struct{})}
}

// Paths are the daemon's socket, pid and log files.
func (s *Server) Paths() Paths { return s.paths }

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "%s rlm daemon: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}

// Stop asks Serve to drain and return.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// AlreadyRunningError is returned by Serve when a daemon holds the pid file.
type AlreadyRunningError struct {
	PID    int
	Socket string
}

func (e *AlreadyRunningError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("already running (pid %d) on %s", e.PID, e.Socket)
	}
	return fmt.Sprintf("already running on %s", e.Socket)
}

// Serve runs the daemon until ctx is cancelled or Stop is called, then
// drains: running requests get Config.Drain to finish, then every
// session, worker and plugin is killed and the socket and pid file are
// removed. ready, if not nil, is called once the socket accepts requests
// and the warm pools have had their first fill.
func (s *Server) Serve(ctx context.Context, ready func()) error {
	pid, err := claimPIDFile(s.paths)
	if err != nil {
		return err
	}
	defer pid.release()
	if socketExists(s.paths.Socket) {
		if Alive(ctx, s.paths.Socket) {
			// A daemon that does not hold our pid file (another pid file
			// path, or a foreign server): never steal its socket.
			return &AlreadyRunningError{Socket: s.paths.Socket}
		}
		s.logf("removing stale socket %s (no daemon answers on it)", s.paths.Socket)
	}
	s.started = time.Now()
	for _, name := range s.cfg.Runtimes {
		s.host(name)
	}
	defer s.closeHosts()
	s.warmUp(ctx)

	l, err := listen(s.paths.Socket)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", s.paths.Socket, err)
	}
	defer removeSocket(s.paths.Socket)
	srv := grpc.NewServer(pb.ServerOptions()...)
	pb.RegisterRuntimeServer(srv, &runtimeService{s: s})
	registerAdmin(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	s.mu.Lock()
	workers := s.cfg.Workers
	s.mu.Unlock()
	s.logf("listening on %s (pid %d, %d warm workers each for %v)", s.paths.Socket, os.Getpid(), workers, s.cfg.Runtimes)
	if ready != nil {
		ready()
	}

	select {
	case <-ctx.Done():
		s.logf("signalled: draining")
	case <-s.stopped:
		s.logf("stop requested: draining")
	case err := <-served:
		return fmt.Errorf("serving %s: %w", s.paths.Socket, err)
	}
	drained := make(chan struct{})
	go func() { srv.GracefulStop(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(s.cfg.Drain):
		s.logf("drain timeout (%s): cutting off remaining clients", s.cfg.Drain)
		srv.Stop()
		<-drained
	}
	s.logf("stopped")
	return nil
}

// warmUp waits (bounded) until each pool is full or has failed once, so
// that a daemon that says it is ready is warm.
func (s *Server) warmUp(ctx context.Context) {
	deadline := time.Now().Add(30 * time.Second)
	for _, h := range s.hostList() {
		if _, err := h.client(forRuns); err != nil {
			s.logf("%s: %s", h.name, errText(err))
		}
		for h.pool != nil && time.Now().Before(deadline) && ctx.Err() == nil {
			st := h.pool.Stats()
			if st.Idle >= st.Size || st.Failed > 0 {
				if st.LastError != "" {
					s.logf("%s: warm sessions unavailable: %s", h.name, st.LastError)
				}
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func (s *Server) hostList() []*host {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*host, 0, len(s.hosts))
	for _, h := range s.hosts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (s *Server) closeHosts() {
	for _, h := range s.hostList() {
		h.close()
	}
}

// host returns the runtime's host, creating it (and, for a pooled runtime,
// its pool) on first use.
func (s *Server) host(name string) *host {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hosts[name]; h != nil {
		return h
	}
	h := &host{s: s, name: name}
	// A pooled runtime has its pool even at size 0, so SetWorkers can
	// grow it later.
	if slices.Contains(s.cfg.Runtimes, name) {
		lim := &pb.Limits{}
		if s.cfg.Sandbox != nil {
			lim = proto.Clone(s.cfg.Sandbox).(*pb.Limits)
			lim.WallMs = 0
		}
		lim.MaxOutputBytes = s.cfg.MaxOutputBytes
		lim.Isolation = h.sessionLevel(lim.Isolation)
		h.template = &pb.OpenSession{Runtime: name, Limits: lim}
		h.pool = pool.New(h.openWarm, s.cfg.Workers)
	}
	s.hosts[name] = h
	return h
}

// SetWorkers changes the number of warm workers kept per pooled runtime.
// Idle workers above the new number are closed at once; new ones are
// opened in the background.
func (s *Server) SetWorkers(n int) {
	s.mu.Lock()
	old := s.cfg.Workers
	s.cfg.Workers = max(n, 0)
	s.mu.Unlock()
	for _, h := range s.hostList() {
		if h.pool != nil {
			h.pool.SetSize(n)
		}
	}
	s.logf("warm workers per runtime: %d -> %d", old, n)
}

// host serves one runtime: its plugin processes and, when pooled, its warm
// sessions.
//
// Programs and sessions get a plugin process each. A plugin that runs a
// program sweeps up the orphans it leaves (proctree.KillOrphans), which
// would include the interpreters of sessions served by the same process;
// two processes keep a Run from ever touching a session, and cost one idle
// plugin.
type host struct {
	s        *Server
	name     string
	template *pb.OpenSession // how warm sessions are opened
	pool     *pool.Pool[*worker]

	mu       sync.Mutex
	plugs    [2]*catalog.Launched // by role
	launches int
	closed   bool

	sessions    atomic.Int64 // sessions served
	warmHits    atomic.Int64 // of which from the pool
	runs        atomic.Int64 // programs run
	warmRuns    atomic.Int64 // of which as a warm cell
	workersLost atomic.Int64 // workers that died while serving a client
}

// Plugin roles: one process for Run, Check and Info, one for sessions.
const (
	forRuns = iota
	forSessions
)

// client returns the plugin client for role, launching the plugin if it
// is not running (first use, or it died).
func (h *host) client(role int) (pb.RuntimeClient, error) {
	p, err := h.plugin(role)
	if err != nil {
		return nil, err
	}
	return p.Client, nil
}

// plugin returns role's running plugin and its fingerprint, launching it
// through the catalog if it is not running.
func (h *host) plugin(role int) (*catalog.Launched, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, status.Error(codes.Unavailable, "the daemon is stopping")
	}
	p := h.plugs[role]
	if p != nil && !p.Exited() {
		return p, nil
	}
	if p != nil {
		h.s.logf("%s: plugin exited; starting it again", h.name)
		p.Kill()
		h.plugs[role] = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := catalog.Open(ctx, h.s.cfg.Plugins, h.name, h.name)
	if err != nil {
		if nf := (*launch.NotFoundError)(nil); errors.As(err, &nf) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	h.plugs[role] = p
	h.launches++
	return p, nil
}

// drop forgets role's plugin if it is still the one behind c, so that the
// next client call launches a fresh one (Exited may not know yet that it
// died).
func (h *host) drop(role int, c pb.RuntimeClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.plugs[role]; p != nil && p.Client == c {
		p.Kill()
		h.plugs[role] = nil
	}
}

// sessionLevel is the isolation warm sessions are opened at for the
// configured one: auto becomes what the plugin declares for its sessions
// (core.ResolveIsolation), as it does in the client, so that a session
// asked for with the configured limits fits a warm worker. When that cannot
// be known (no plugin, or an explicit level its sessions lack) the level
// stays as configured and opening a worker reports the reason.
func (h *host) sessionLevel(configured string) string {
	p, err := h.plugin(forSessions)
	if err != nil || p.Info == nil {
		return configured
	}
	level, err := core.ResolveIsolation(p.Info, h.name, configured, true, isolate.Available)
	if err != nil {
		h.s.logf("%s: warm sessions: %v", h.name, err)
		return configured
	}
	return level
}

// openWarm opens one pool worker.
func (h *host) openWarm(ctx context.Context) (*worker, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := h.client(forSessions)
	if err != nil {
		return nil, errors.New(errText(err))
	}
	w, err := openWorker(ctx, c, h.template)
	if err != nil {
		return nil, errors.New(errText(err))
	}
	w.probeIdle()
	return w, nil
}

// warmWorker takes a worker from the pool, skipping any that died between
// its last health check and now.
func (h *host) warmWorker(ctx context.Context) (*worker, error) {
	for {
		w, err := h.pool.Get(ctx)
		if err != nil {
			return nil, err
		}
		if err := w.claim(); err == nil {
			return w, nil
		}
		w.Close()
	}
}

// warmFits reports whether a warm worker can serve a session opened with
// open: the same start-up state as the template.
func (h *host) warmFits(open *pb.OpenSession) bool {
	if !h.pooled() || open.GetContext() != nil || len(open.GetEnv()) > 0 {
		return false
	}
	return h.limitsFit(open.GetLimits())
}

// pooled reports whether the runtime keeps warm workers now.
func (h *host) pooled() bool { return h.pool != nil && h.pool.Stats().Size > 0 }

// limitsFit: everything but the wall limit (applied per cell) must match
// the template; an unset output limit means the daemon's default.
func (h *host) limitsFit(l *pb.Limits) bool {
	got := &pb.Limits{}
	if l != nil {
		got = proto.Clone(l).(*pb.Limits)
	}
	got.WallMs = 0
	if got.MaxOutputBytes == 0 {
		got.MaxOutputBytes = h.template.GetLimits().GetMaxOutputBytes()
	}
	return proto.Equal(got, h.template.GetLimits())
}

// warmRunnable reports whether a Run can be served as a warm cell.
func (h *host) warmRunnable(req *pb.RunRequest) bool {
	return h.pooled() && len(req.GetFiles()) == 0 && len(req.GetStdin()) == 0 &&
		len(req.GetArgs()) == 0 && len(req.GetEnv()) == 0 && len(req.GetRequirements()) == 0 &&
		req.GetContext() == nil && !req.GetReturnFiles() && h.limitsFit(req.GetLimits())
}

func (h *host) close() {
	if h.pool != nil {
		h.pool.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for i, p := range h.plugs {
		if p != nil {
			p.Kill()
			h.plugs[i] = nil
		}
	}
}

// RuntimeStatus is one runtime's line in the daemon's status.
type RuntimeStatus struct {
	Name string `json:"name"`
	// Pooled runtimes keep warm workers.
	Pooled  bool        `json:"pooled"`
	Workers *pool.Stats `json:"workers,omitempty"`
	// Sessions is the number of sessions served, WarmSessions how many of
	// them from the pool.
	Sessions     int64 `json:"sessions"`
	WarmSessions int64 `json:"warm_sessions"`
	Runs         int64 `json:"runs"`
	WarmRuns     int64 `json:"warm_runs"`
	// WorkersLost counts workers that died while serving a client (the
	// client got an error).
	WorkersLost int64 `json:"workers_lost"`
	// PluginRunning: a plugin process for this runtime is up; PluginStarts
	// counts launches (two processes per runtime, one for programs and one
	// for sessions; more when one died and was started again).
	PluginRunning bool   `json:"plugin_running"`
	PluginStarts  int    `json:"plugin_starts"`
	PluginPath    string `json:"plugin_path,omitempty"`
}

// Status is what `rlm daemon status` shows.
type Status struct {
	PID      int             `json:"pid"`
	Started  time.Time       `json:"started"`
	Uptime   float64         `json:"uptime_seconds"`
	Socket   string          `json:"socket"`
	Workers  int             `json:"workers_per_runtime"`
	Runtimes []RuntimeStatus `json:"runtimes"`
}

// Status reports the daemon's state.
func (s *Server) Status() Status {
	st := Status{
		PID: os.Getpid(), Started: s.started, Uptime: time.Since(s.started).Seconds(),
		Socket: s.paths.Socket, Runtimes: []RuntimeStatus{},
	}
	s.mu.Lock()
	st.Workers = s.cfg.Workers
	s.mu.Unlock()
	for _, h := range s.hostList() {
		rs := RuntimeStatus{
			Name: h.name, Pooled: h.pool != nil,
			Sessions: h.sessions.Load(), WarmSessions: h.warmHits.Load(),
			Runs: h.runs.Load(), WarmRuns: h.warmRuns.Load(), WorkersLost: h.workersLost.Load(),
		}
		if h.pool != nil {
			ps := h.pool.Stats()
			rs.Workers = &ps
		}
		h.mu.Lock()
		rs.PluginStarts = h.launches
		for _, p := range h.plugs {
			if p != nil && !p.Exited() {
				rs.PluginRunning = true
				rs.PluginPath = p.Path
			}
		}
		h.mu.Unlock()
		st.Runtimes = append(st.Runtimes, rs)
	}
	return st
}

// runtimeService is the runtime gRPC service on the daemon's socket.
type runtimeService struct {
	pb.UnimplementedRuntimeServer
	s *Server
}

func (r *runtimeService) hostFor(name string) (*host, error) {
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "the request names no runtime")
	}
	return r.s.host(name), nil
}

// runClient is the client of the plugin that serves runs of runtime name,
// launched if need be: Info and Check are passed on to it as they are.
func (r *runtimeService) runClient(name string) (pb.RuntimeClient, error) {
	h, err := r.hostFor(name)
	if err != nil {
		return nil, err
	}
	return h.client(forRuns)
}

// Info with no runtime answers for the daemon itself (the liveness ping);
// with one, for that runtime as served by the daemon.
func (r *runtimeService) Info(ctx context.Context, req *pb.InfoRequest) (*pb.InfoResponse, error) {
	if req.GetRuntime() == "" {
		return &pb.InfoResponse{Name: "rlm-daemon", Backend: BackendName, Available: true}, nil
	}
	c, err := r.runClient(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx, req)
	if err != nil {
		return nil, err
	}
	info.Backend = BackendName
	return info, nil
}

func (r *runtimeService) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	c, err := r.runClient(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	return c.Check(ctx, req)
}

func (r *runtimeService) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	h, err := r.hostFor(req.GetRuntime())
	if err != nil {
		return nil, err
	}
	h.runs.Add(1)
	if h.warmRunnable(req) {
		if w, err := h.warmWorker(ctx); err == nil {
			defer w.Close()
			res, err := w.runCell(ctx, string(req.GetCode()), time.Duration(req.GetLimits().GetWallMs())*time.Millisecond)
			if err != nil {
				if ctx.Err() != nil {
					return nil, status.Error(codes.Aborted, err.Error())
				}
				// The cell was sent: it may have run. Never run it again.
				h.workersLost.Add(1)
				return crashed(h.name, errText(err)), nil
			}
			h.warmRuns.Add(1)
			res.Backend = BackendName
			res.StateLost = false // the worker is discarded: no state to lose
			res.Value = nil       // a program runs as a script: no final value
			asProgramEnding(res)
			if res.GetEndedBy() == pb.EndedBy_TIMEOUT {
				// Say it as a program run does, not as a cell would.
				res.Error = fmt.Sprintf("timed out after %s", time.Duration(req.GetLimits().GetWallMs())*time.Millisecond)
			}
			return res, nil
		}
		// No warm worker could be had (the runtime's sessions are
		// failing): the plugin's own Run still works.
	}
	for attempt := 0; ; attempt++ {
		c, err := h.client(forRuns)
		if err != nil {
			return nil, err
		}
		var hdr metadata.MD
		res, err := c.Run(ctx, req, grpc.Header(&hdr))
		if lost := client.RunLost(ctx, err, hdr); lost != "" {
			return crashed(h.name, lost), nil
		}
		if err != nil {
			// A plugin that died before it took the request (while idle)
			// is relaunched and asked once more: nothing ran.
			if status.Code(err) == codes.Unavailable && ctx.Err() == nil && attempt == 0 {
				h.s.logf("%s: plugin gone before the request reached it; starting it again", h.name)
				h.drop(forRuns, c)
				continue
			}
			return nil, err
		}
		res.Backend = BackendName
		return res, nil
	}
}

// asProgramEnding restates a warm cell whose interpreter ended itself
// (os._exit(3), a signal it sent itself) as the program run it stands in
// for would end: exit or signal with the status, and no "the interpreter
// died" error, which speaks of a session the caller never had. A worker
// killed by a limit keeps its ending (memory, processes).
func asProgramEnding(res *pb.Result) {
	if res.GetEndedBy() != pb.EndedBy_CRASHED || res.GetExitCode() < 0 {
		return
	}
	res.EndedBy, res.Error = pb.EndedBy_EXIT, ""
	if res.GetSignal() != "" {
		res.EndedBy = pb.EndedBy_SIGNAL
	}
}

// crashed is the result of a program whose plugin (or warm worker) died
// after taking it: it may have partly run, so it is reported, not retried.
func crashed(runtime, why string) *pb.Result {
	return &pb.Result{EndedBy: pb.EndedBy_CRASHED, ExitCode: -1, Backend: BackendName,
		Error: fmt.Sprintf("the %s runtime plugin exited while the program was running (%s); %s", runtime, why, core.PartlyRun)}
}

// Session proxies a client's session to a worker of its own.
func (r *runtimeService) Session(cs pb.Runtime_SessionServer) error {
	first, err := cs.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "a session starts with an open message")
	}
	h, err := r.hostFor(open.GetRuntime())
	if err != nil {
		return err
	}
	ctx := cs.Context()
	t0 := time.Now()
	var w *worker
	warm := h.warmFits(open)
	if warm {
		w, err = h.warmWorker(ctx)
	} else {
		var c pb.RuntimeClient
		if c, err = h.client(forSessions); err == nil {
			w, err = openWorker(ctx, c, open)
		}
	}
	if err != nil {
		return cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{
			Message: fmt.Sprintf("the daemon could not open a %s session: %v", h.name, errText(err)), Fatal: true}}})
	}
	defer w.Close()
	h.sessions.Add(1)
	if warm {
		h.warmHits.Add(1)
	}
	opened := proto.Clone(w.opened).(*pb.Opened)
	opened.Backend = BackendName
	opened.StartupMs = time.Since(t0).Milliseconds()
	if err := cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: opened}}); err != nil {
		return err
	}

	// Client to worker. A warm worker was opened without the client's
	// wall limit, so it is applied to each cell that relies on it.
	wall := open.GetLimits().GetWallMs()
	pctx, clientDone := context.WithCancel(ctx)
	defer clientDone()
	go func() {
		defer clientDone()
		for {
			m, err := cs.Recv()
			if err != nil || m.GetClose() != nil {
				return
			}
			if ex := m.GetExecute(); ex != nil && warm && ex.GetTimeoutMs() == 0 {
				ex.TimeoutMs = wall
			}
			if err := w.send(m); err != nil {
				return
			}
		}
	}()

	// Worker to client, until either side is done.
	for {
		m, err := w.next(pctx)
		if err != nil {
			if pctx.Err() != nil {
				return nil // the client closed or went away: its worker is killed
			}
			h.workersLost.Add(1)
			return cs.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Error{Error: &pb.SessionError{
				Message: err.Error(), Fatal: true}}})
		}
		if res := m.GetResult().GetResult(); res != nil {
			res.Backend = BackendName
		}
		if err := cs.Send(m); err != nil {
			return nil
		}
		if e := m.GetError(); e != nil && e.GetFatal() {
			return nil
		}
	}
}

// errText is a gRPC error's message without the "rpc error: code = ..."
// prefix.
func errText(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}
