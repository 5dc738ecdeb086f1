package daemon

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlmkit/rlm/core"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/catalog"
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
