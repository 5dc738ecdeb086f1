package server

import (
	"context"
	"sync"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/host/pool"
)

// warmSessions keeps, per language, Config.WarmSessions sessions opened
// ahead of demand with the server's session limits and no context, so that
// POST /sessions without a context is a hand-over instead of a sandbox and
// interpreter start (at isolation namespace: bubblewrap, cgroups, python
// and its driver, hundreds of milliseconds on a loaded 2-core machine).
// Each session is handed out once and never comes back (internal/host/pool): no
// client ever sees another's state. A language's pool starts at its first
// POST /sessions, so a server whose clients never open sessions keeps no
// interpreters.
type warmSessions struct {
	srv *Server

	mu     sync.Mutex
	pools  map[string]*pool.Pool[*warmSession]
	closed bool
}

// warmSession is one pooled session, with the runtime generation that
// opened it: a session of a plugin that has since died and been relaunched
// is dead too, and is dropped instead of handed out.
type warmSession struct {
	sess core.Session
	gen  int
	done chan struct{}
	once sync.Once
}

func (w *warmSession) Done() <-chan struct{} { return w.done }

func (w *warmSession) Close() error {
	w.once.Do(func() { close(w.done) })
	return w.sess.Close()
}

// get hands out a session of lang: a warm one, or one opened now.
func (ws *warmSessions) get(ctx context.Context, lang string) (*warmSession, error) {
	p, err := ws.pool(lang)
	if err != nil {
		return nil, err
	}
	slot := ws.srv.slots[lang]
	for {
		w, err := p.Get(ctx)
		if err != nil {
			return nil, err
		}
		if slot.Generation() == w.gen {
			return w, nil
		}
		_ = w.Close() // its plugin was relaunched since
	}
}

func (ws *warmSessions) pool(lang string) (*pool.Pool[*warmSession], error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, &APIError{Status: 503, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	}
	if p := ws.pools[lang]; p != nil {
		return p, nil
	}
	p := pool.New(func(ctx context.Context) (*warmSession, error) { return ws.open(ctx, lang) }, ws.srv.cfg.WarmSessions)
	ws.pools[lang] = p
	return p, nil
}

func (ws *warmSessions) open(ctx context.Context, lang string) (*warmSession, error) {
	slot := ws.srv.slots[lang]
	var gen int
	bridges, e := ws.srv.sessionBridges("")
	if e != nil {
		return nil, e
	}
	sess, err := withRuntime(ctx, slot, func(rt *client.Runtime) (core.Session, error) {
		gen = slot.Generation()
		return rt.OpenSession(ctx, core.SessionOptions{
			Runtime: lang, Bridges: bridges,
			Limits: ws.srv.sessionLimits(), ReturnFiles: true,
		})
	})
	if err != nil {
		return nil, err
	}
	return &warmSession{sess: sess, gen: gen, done: make(chan struct{})}, nil
}

// idle counts the sessions waiting in each language's pool (nil when no
// pool has started).
func (ws *warmSessions) idle() map[string]int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.pools) == 0 {
		return nil
	}
	out := map[string]int{}
	for lang, p := range ws.pools {
		out[lang] = p.Stats().Idle
	}
	return out
}

// close ends every idle session; handed-out ones are their owners'.
func (ws *warmSessions) close() {
	ws.mu.Lock()
	ws.closed = true
	pools := ws.pools
	ws.pools = nil
	ws.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
}
