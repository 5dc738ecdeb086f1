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
//     kept running per runtime (relaunched if it dies, by
//     client.Supervisor, as serve's are). Sessions use a second process of
//     the same plugin (see host).
//
// The files: server.go the listener and its lifecycle, host.go each
// runtime's plugins and warm pool, service.go the gRPC runtime service,
// status.go what `rlm daemon status` shows, worker.go a warm worker,
// client.go the client side, admin.go the admin service.
//
// Every result says backend "daemon".
package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/rlmkit/rlm/core/runtimepb"
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
	// Plugins are the directories runtime plugins are found in, in order.
	Plugins []string
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
