package daemon

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/host/pool"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

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
	h := newHost(s, name)
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

// host serves one runtime: its plugin processes and, when pooled, its warm
// sessions.
//
// Programs and sessions get a plugin process each, each kept by a
// client.Supervisor (the one serve uses): launched on first use, launched
// again when it exited or a call found it gone. A plugin that runs a
// program sweeps up the orphans it leaves (proctree.KillOrphans), which
// would include the interpreters of sessions served by the same process;
// two processes keep a Run from ever touching a session, and cost one idle
// plugin.
type host struct {
	s        *Server
	name     string
	template *pb.OpenSession // how warm sessions are opened
	pool     *pool.Pool[*worker]
	plugs    [2]*client.Supervisor // by role

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

func newHost(s *Server, name string) *host {
	h := &host{s: s, name: name}
	for role := range h.plugs {
		h.plugs[role] = client.NewSupervisor(client.SupervisorConfig{
			Name:   name,
			Open:   h.launch,
			Closed: status.Error(codes.Unavailable, "the daemon is stopping"),
			Log:    func(msg string) { s.logf("%s: %s", name, msg) },
		})
	}
	return h
}

// launch starts the runtime's plugin through the catalog. The request
// that needs it does not bound the launch: a plugin is kept for the next
// ones. Errors are gRPC statuses, passed on to the daemon's client.
func (h *host) launch(_ context.Context, name string) (*client.Runtime, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := client.Launch(ctx, h.s.cfg.Plugins, name, name, client.Native)
	if err != nil {
		if nf := (*launch.NotFoundError)(nil); errors.As(err, &nf) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return rt, nil
}

// client returns the plugin client for role, launching the plugin if it
// is not running (first use, or it died).
func (h *host) client(role int) (pb.RuntimeClient, error) {
	rt, _, err := h.plugs[role].Get(context.Background())
	if err != nil {
		return nil, err
	}
	return rt.Client, nil
}

// sessionLevel is the isolation warm sessions are opened at for the
// configured one: auto becomes what the plugin declares for its sessions
// (core.ResolveIsolation), as it does in the client, so that a session
// asked for with the configured limits fits a warm worker. When that cannot
// be known (no plugin, or an explicit level its sessions lack) the level
// stays as configured and opening a worker reports the reason.
func (h *host) sessionLevel(configured string) string {
	if _, err := h.client(forSessions); err != nil {
		return configured
	}
	info := h.plugs[forSessions].Declared()
	if info == nil {
		return configured
	}
	level, err := core.ResolveIsolation(info, h.name, configured, true, isolate.Available)
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
	rt, gen, err := h.plugs[forSessions].Get(ctx)
	if err != nil {
		return nil, errors.New(errText(err))
	}
	w, err := openWorker(ctx, rt.Client, h.template)
	if err != nil {
		return nil, errors.New(errText(err))
	}
	w.gen = gen
	w.probeIdle()
	return w, nil
}

// warmWorker takes a worker from the pool, skipping any that died between
// its last health check and now, and any opened by a plugin process older
// than the current one (the supervisor's Get starts the new binary when
// the old one was rebuilt on disk; its workers must not serve old code).
func (h *host) warmWorker(ctx context.Context) (*worker, error) {
	_, gen, err := h.plugs[forSessions].Get(ctx)
	if err != nil {
		return nil, err
	}
	for {
		w, err := h.pool.Get(ctx)
		if err != nil {
			return nil, err
		}
		if w.gen >= gen {
			if err := w.claim(); err == nil {
				return w, nil
			}
		}
		w.Close()
	}
}

// warmFits reports whether a warm worker can serve a session opened with
// open: the same start-up state as the template.
func (h *host) warmFits(open *pb.OpenSession) bool {
	if !h.pooled() || open.GetContext() != nil || len(open.GetEnv()) > 0 || len(open.GetRequirements()) > 0 {
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
	for _, p := range h.plugs {
		p.Close()
	}
}
