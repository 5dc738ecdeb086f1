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

// Pool keeps Size sandboxes of one Config, built ahead of demand and
// replaced when one dies. Taking a sandbox is a channel receive: there is no
// lock on the hot path.
//
// Size is how many are kept warm, not a bound on runs in flight: that is
// the host's to set (rlm serve's --max-concurrent, the daemon's slots). A
// run that finds none idle while every one is busy gets one started for
// it; otherwise a server given more slots than CPUs would run only Size
// programs at once and count the others' wait as their run time. Such a
// sandbox stays in the pool while runs keep using it, and is dropped once
// it has been idle for IdleKeep: dropping it after its run, as the pool
// once did, made a server at 32 slots on 2 CPUs start and kill a sandbox
// for nearly every run (64 req/s against 326 with them kept).
type Pool struct {
	cfg  Config
	size int
	idle chan *sandbox
	// IdleKeep is how long a sandbox beyond Size may stay idle before
	// the pool drops it (DefaultIdleKeep; tests shorten it).
	IdleKeep time.Duration

	mu        sync.Mutex
	total     int  // sandboxes alive or starting
	starting  int  // of which not yet started
	returning int  // of which being reset after a run
	waiting   int  // runs in get waiting for one
	runs      int  // runs that asked for this pool
	healthy   bool // the last start succeeded
	retryAt   time.Time
	changed   chan struct{} // closed (and replaced) when a start fails
	closed    bool
	trimming  bool // trim is running
	all       map[*sandbox]bool
}

// DefaultIdleKeep is Pool.IdleKeep unless set: long enough that a server
// under steady load keeps what it uses, short enough that a burst's
// sandboxes do not stay long after it.
const DefaultIdleKeep = 30 * time.Second

// maxIdle bounds the sandboxes a pool holds idle (its channel's capacity);
// one more is dropped at once.
const maxIdle = 1024

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
	return &Pool{cfg: cfg, size: max(size, 1), idle: make(chan *sandbox, max(size, maxIdle)), IdleKeep: DefaultIdleKeep, changed: make(chan struct{}), all: map[*sandbox]bool{}}
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
		p.startLocked()
	}
}

func (p *Pool) startLocked() {
	p.total++
	p.starting++
	go p.startOne()
}

func (p *Pool) startOne() {
	sb, err := startSandbox(p.cfg)
	p.mu.Lock()
	p.starting--
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
	p.put(sb)
}

// watch replaces sb when it dies, whether idle or busy.
func (p *Pool) watch(sb *sandbox) {
	<-sb.dead
	p.mu.Lock()
	if p.all[sb] { // not dropped by trim, which counted it out already
		delete(p.all, sb)
		p.total--
	}
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

// get takes an idle sandbox. When none is idle it waits for one to be
// reset or started, and sees that a sandbox is starting for each run that
// waits (beyond Size when every one is busy).
func (p *Pool) get(ctx context.Context) (*sandbox, error) {
	for {
		select {
		case sb := <-p.idle:
			if sb.alive() {
				return sb, nil
			}
			continue
		default:
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("warm pool closed")
		}
		if !p.healthy && p.total == 0 {
			p.mu.Unlock()
			return nil, errBroken
		}
		p.waiting++
		p.startForWaitersLocked()
		changed := p.changed
		p.mu.Unlock()
		var sb *sandbox
		select {
		case sb = <-p.idle:
		case <-changed:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if sb != nil && sb.alive() {
			return sb, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// startForWaitersLocked starts a sandbox when more runs wait than
// sandboxes are starting or being reset.
func (p *Pool) startForWaitersLocked() {
	if p.healthy && !p.closed && p.starting+p.returning < p.waiting {
		p.startLocked()
	}
}

// willReturn counts a sandbox whose run ended and whose reset is under
// way: a run waiting in get is served by it rather than by a new start.
func (p *Pool) willReturn() {
	p.mu.Lock()
	p.returning++
	p.mu.Unlock()
}

// returned ends what willReturn counted: a clean sandbox goes back to the
// pool; for one that was discarded, a waiting run gets a new start.
func (p *Pool) returned(sb *sandbox, clean bool) {
	p.mu.Lock()
	p.returning--
	if !clean {
		p.startForWaitersLocked()
	}
	p.mu.Unlock()
	if clean {
		p.put(sb)
	}
}

// put returns a clean (or new) sandbox to the pool; when the pool holds
// more than its size, trim drops those left idle too long.
func (p *Pool) put(sb *sandbox) {
	p.mu.Lock()
	closed := p.closed
	if !closed && p.total > p.size && !p.trimming {
		p.trimming = true
		go p.trim()
	}
	p.mu.Unlock()
	if !closed {
		sb.idleSince = time.Now()
		select {
		case p.idle <- sb:
			return
		default: // maxIdle idle already
		}
	}
	sb.kill(errors.New("pool closed or full"))
}

// trim runs while the pool holds more sandboxes than its size, dropping
// those idle for IdleKeep, longest idle first (the idle channel is in the
// order they were put back).
func (p *Pool) trim() {
	for {
		time.Sleep(max(p.IdleKeep/2, 10*time.Millisecond))
		for {
			p.mu.Lock()
			if p.closed || p.total <= p.size {
				p.trimming = false
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			var sb *sandbox
			select {
			case sb = <-p.idle:
			default:
			}
			if sb == nil {
				break // all busy
			}
			if sb.alive() && time.Since(sb.idleSince) < p.IdleKeep {
				// The longest idle is recent, so are the others: back it
				// goes, its idle time kept (put would restart it).
				select {
				case p.idle <- sb:
				default:
					sb.kill(errors.New("pool full"))
				}
				break
			}
			p.mu.Lock()
			if p.all[sb] {
				delete(p.all, sb)
				p.total--
			}
			p.mu.Unlock()
			sb.kill(errors.New("idle beyond the pool's size"))
		}
	}
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
