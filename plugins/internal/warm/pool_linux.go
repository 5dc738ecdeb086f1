package warm

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Pool keeps up to Size sandboxes of one Config, built ahead of demand and
// replaced when one dies. Taking a sandbox is a channel receive: there is no
// lock on the hot path.
type Pool struct {
	cfg  Config
	size int
	idle chan *sandbox

	mu      sync.Mutex
	total   int  // sandboxes alive or starting
	runs    int  // runs that asked for this pool
	healthy bool // the last start succeeded
	retryAt time.Time
	changed chan struct{} // closed (and replaced) when a start fails
	closed  bool
	all     map[*sandbox]bool
}

var pools sync.Map // Config.key() → *Pool

// For returns the process-wide pool for cfg, creating it (empty, nothing
// started) on first use. Its size is RLM_WARM_SANDBOXES when set, else the
// number of CPUs: the number of run slots rlm serve and the daemon use by
// default.
func For(cfg Config) *Pool {
	if p, ok := pools.Load(cfg.key()); ok {
		return p.(*Pool)
	}
	p, _ := pools.LoadOrStore(cfg.key(), NewPool(cfg, DefaultSize()))
	return p.(*Pool)
}

// DefaultSize is the pool size For uses.
func DefaultSize() int {
	if n, err := strconv.Atoi(os.Getenv("RLM_WARM_SANDBOXES")); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// Disabled says whether RLM_WARM=0 turns warm sandboxes off (every run
// builds its own sandbox, as before).
func Disabled() bool { return os.Getenv("RLM_WARM") == "0" }

// NewPool returns an empty pool of size sandboxes for cfg; Fill or the
// second run starts them.
func NewPool(cfg Config, size int) *Pool {
	return &Pool{cfg: cfg, size: max(size, 1), idle: make(chan *sandbox, max(size, 1)), changed: make(chan struct{}), all: map[*sandbox]bool{}}
}

// Fill starts sandboxes in the background until the pool has its size.
func (p *Pool) Fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fillLocked()
}

func (p *Pool) fillLocked() {
	if p.closed || time.Now().Before(p.retryAt) {
		return
	}
	for p.total < p.size {
		p.total++
		go p.startOne()
	}
}

func (p *Pool) startOne() {
	sb, err := startSandbox(p.cfg)
	p.mu.Lock()
	if err != nil || p.closed {
		p.total--
		if err != nil {
			p.healthy = false
			// Do not spin on a host where sandboxes cannot start: runs go
			// cold meanwhile.
			p.retryAt = time.Now().Add(5 * time.Second)
			close(p.changed)
			p.changed = make(chan struct{})
			time.AfterFunc(5*time.Second, p.Fill)
		}
		p.mu.Unlock()
		if sb != nil {
			sb.kill(errors.New("pool closed"))
		}
		return
	}
	p.healthy = true
	p.all[sb] = true
	p.mu.Unlock()
	go p.watch(sb)
	p.idle <- sb
}

// watch replaces sb when it dies, whether idle or busy.
func (p *Pool) watch(sb *sandbox) {
	<-sb.dead
	p.mu.Lock()
	delete(p.all, sb)
	p.total--
	p.fillLocked()
	p.mu.Unlock()
}

// Ready says whether runs should use the pool: it has started a sandbox
// successfully, and sandboxes can still be started. Each call counts a
// run; the pool starts filling at the second (a plugin that serves one
// run, rlm exec, never builds one).
func (p *Pool) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	if p.runs >= 2 {
		p.fillLocked()
	}
	return p.healthy && !p.closed
}

var errBroken = errors.New("warm sandboxes cannot be started here")

// get takes an idle sandbox, waiting for one to be reset or started.
func (p *Pool) get(ctx context.Context) (*sandbox, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("warm pool closed")
		}
		if !p.healthy && p.total == 0 {
			p.mu.Unlock()
			return nil, errBroken
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case sb := <-p.idle:
			if sb.alive() {
				return sb, nil
			}
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put returns a clean sandbox to the pool.
func (p *Pool) put(sb *sandbox) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		sb.kill(errors.New("pool closed"))
		return
	}
	p.idle <- sb
}

// Close kills every sandbox of the pool and waits until they are gone.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	var all []*sandbox
	for sb := range p.all {
		all = append(all, sb)
	}
	p.mu.Unlock()
	for _, sb := range all {
		sb.kill(errors.New("pool closed"))
		_ = sb.cmd.Cleanup()
		_ = os.RemoveAll(sb.dir) // kill's own release runs in the background
	}
	p.mu.Lock()
	for p.total > 0 {
		p.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		p.mu.Lock()
	}
	p.mu.Unlock()
}

// Sandboxes returns the host pids of each live sandbox's bwrap and worker,
// for fault tests.
func (p *Pool) Sandboxes() (bwrap, worker []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sb := range p.all {
		bwrap = append(bwrap, sb.Pid())
		worker = append(worker, sb.WorkerPid())
	}
	return
}
