// Package pool keeps warm workers (REPL sessions with the interpreter
// started and its helpers loaded) ready ahead of demand. The daemon uses it
// for its sessions and for fast program runs; `rlm serve` can use it the
// same way, since it knows nothing of either.
//
// A worker is handed out once and never comes back: the caller owns it and
// closes it when done, so no client ever sees another's state. The pool
// opens a replacement in the background as soon as one is taken.
//
// # Notes
//
//   - Size is the number of idle workers the pool aims to hold. Opens run in
//     the background, at most Size at a time; Get never waits for them: with
//     no idle worker it opens one itself, so a slow or failing opener makes
//     Get slow or fail, never hang.
//   - A worker that dies while idle (its Done channel closes) is dropped and
//     replaced, and counted in Stats.Crashed.
//   - SetSize lowers or raises the target; idle workers above it are closed
//     at once (trimmed).
//   - After an open fails the background filler waits before trying again
//     (100 ms doubling to 5 s), so a broken runtime does not spin.
package pool

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Worker is one warm worker. Done is closed when the worker has ended, by
// Close or by dying; Close ends it and every process it started.
type Worker interface {
	Done() <-chan struct{}
	Close() error
}

// Opener starts one worker, ready for use. ctx bounds the start only.
type Opener[W Worker] func(ctx context.Context) (W, error)

// Stats is a snapshot of a pool.
type Stats struct {
	Size    int `json:"size"`    // target number of idle workers
	Idle    int `json:"warm"`    // ready now
	Opening int `json:"opening"` // being started in the background
	Busy    int `json:"busy"`    // handed out and still running
	Served  int `json:"served"`  // handed out in total
	Crashed int `json:"crashed"` // died while idle, and were replaced
	Trimmed int `json:"trimmed"` // closed because idle workers exceeded Size
	Failed  int `json:"failed"`  // opens that failed
	// LastError is the last open failure, "" after a later success.
	LastError string `json:"last_error,omitempty"`
}

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("pool: closed")

// Pool holds warm workers of one kind.
type Pool[W Worker] struct {
	open Opener[W]

	mu      sync.Mutex
	size    int
	idle    []W
	opening int
	busy    int
	stats   Stats
	closed  bool
	backoff time.Duration
	retry   *time.Timer

	ctx    context.Context // cancelled by Close; bounds background opens
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New starts a pool that keeps size workers ready, opened by open.
func New[W Worker](open Opener[W], size int) *Pool[W] {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[W]{open: open, size: max(size, 0), ctx: ctx, cancel: cancel}
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
	return p
}

// Get hands out a worker that nobody else has used or will use. The caller
// must Close it. With no idle worker, Get opens one itself.
func (p *Pool[W]) Get(ctx context.Context) (W, error) {
	var zero W
	p.mu.Lock()
	for len(p.idle) > 0 {
		w := p.idle[0]
		p.idle = p.idle[1:]
		select {
		case <-w.Done():
			// Died between its watcher noticing and now: the watcher
			// counts it; just skip it.
			continue
		default:
		}
		p.handOutLocked(w)
		p.fillLocked()
		p.mu.Unlock()
		return w, nil
	}
	if p.closed {
		p.mu.Unlock()
		return zero, ErrClosed
	}
	p.fillLocked()
	p.mu.Unlock()

	w, err := p.open(ctx)
	if err != nil {
		p.mu.Lock()
		p.stats.Failed++
		p.stats.LastError = err.Error()
		p.mu.Unlock()
		return zero, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		w.Close()
		return zero, ErrClosed
	}
	p.handOutLocked(w)
	return w, nil
}

func (p *Pool[W]) handOutLocked(w W) {
	p.busy++
	p.stats.Served++
	// Not in p.wg: a handed-out worker is its owner's, and Close does not
	// wait for owners.
	go func() {
		<-w.Done()
		p.mu.Lock()
		p.busy--
		p.mu.Unlock()
	}()
}

// fillLocked starts background opens until idle + opening reaches size.
func (p *Pool[W]) fillLocked() {
	if p.closed || p.retry != nil {
		return
	}
	for len(p.idle)+p.opening < p.size {
		p.opening++
		p.wg.Add(1)
		go p.fillOne()
	}
}

func (p *Pool[W]) fillOne() {
	defer p.wg.Done()
	w, err := p.open(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opening--
	if err != nil {
		if p.closed {
			return
		}
		p.stats.Failed++
		p.stats.LastError = err.Error()
		p.backoff = min(max(2*p.backoff, 100*time.Millisecond), 5*time.Second)
		if p.retry == nil {
			p.retry = time.AfterFunc(p.backoff, func() {
				p.mu.Lock()
				p.retry = nil
				p.fillLocked()
				p.mu.Unlock()
			})
		}
		return
	}
	p.backoff = 0
	p.stats.LastError = ""
	if p.closed || len(p.idle) >= p.size {
		if !p.closed {
			p.stats.Trimmed++
		}
		go w.Close()
		return
	}
	p.idle = append(p.idle, w)
	p.wg.Add(1)
	go p.watch(w)
}

// watch replaces w if it dies while idle.
func (p *Pool[W]) watch(w W) {
	defer p.wg.Done()
	select {
	case <-w.Done():
	case <-p.ctx.Done():
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if any(x) == any(w) {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.stats.Crashed++
			p.fillLocked()
			return
		}
	}
	// Not idle: it was handed out and the owner is responsible.
}

// SetSize changes the number of idle workers the pool aims for; idle ones
// above it are closed now.
func (p *Pool[W]) SetSize(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size = max(n, 0)
	for len(p.idle) > p.size {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.stats.Trimmed++
		go w.Close()
	}
	p.fillLocked()
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool[W]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Size, s.Idle, s.Opening, s.Busy = p.size, len(p.idle), p.opening, p.busy
	return s
}

// Close closes every idle worker, cancels background opens and waits for
// them. Workers already handed out stay their owners' to close.
func (p *Pool[W]) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	p.cancel()
	for _, w := range idle {
		w.Close()
	}
	p.wg.Wait()
}
