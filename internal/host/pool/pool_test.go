package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fake struct {
	id     int
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool
}

func (f *fake) Done() <-chan struct{} { return f.done }
func (f *fake) Close() error {
	f.closed.Store(true)
	f.die()
	return nil
}
func (f *fake) die() { f.once.Do(func() { close(f.done) }) }

type opener struct {
	mu     sync.Mutex
	n      int
	all    []*fake
	fail   error
	opened chan *fake
}

func newOpener() *opener { return &opener{opened: make(chan *fake, 100)} }

func (o *opener) open(ctx context.Context) (*fake, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return nil, o.fail
	}
	o.n++
	f := &fake{id: o.n, done: make(chan struct{})}
	o.all = append(o.all, f)
	o.opened <- f
	return f, nil
}

// waitStats polls until cond holds; the pool's work is asynchronous. A
// failure reports the last snapshot.
func waitStats(t *testing.T, p *Pool[*fake], cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.Stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool never reached the expected state; last %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOpensAheadAndReplacesTakenWorkers(t *testing.T) {
	o := newOpener()
	p := New(o.open, 3)
	defer p.Close()
	waitStats(t, p, func(s Stats) bool { return s.Idle == 3 })

	seen := map[int]bool{}
	for i := 0; i < 5; i++ {
		w, err := p.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seen[w.id] {
			t.Fatalf("worker %d handed out twice", w.id)
		}
		seen[w.id] = true
		w.Close()
	}
	s := waitStats(t, p, func(s Stats) bool { return s.Idle == 3 && s.Busy == 0 })
	if s.Served != 5 {
		t.Fatalf("served %d, want 5", s.Served)
	}
}

func TestBusyCountsUntilClosed(t *testing.T) {
	o := newOpener()
	p := New(o.open, 1)
	defer p.Close()
	w, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitStats(t, p, func(s Stats) bool { return s.Busy == 1 })
	w.Close()
	waitStats(t, p, func(s Stats) bool { return s.Busy == 0 })
}

func TestIdleWorkerThatDiesIsReplaced(t *testing.T) {
	o := newOpener()
	p := New(o.open, 2)
	defer p.Close()
	waitStats(t, p, func(s Stats) bool { return s.Idle == 2 })
	first := <-o.opened
	first.die()
	s := waitStats(t, p, func(s Stats) bool { return s.Crashed == 1 && s.Idle == 2 })
	for i := 0; i < s.Idle; i++ {
		w, err := p.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if w == first {
			t.Fatal("a dead worker was handed out")
		}
		w.Close()
	}
}

func TestSetSizeTrimsIdle(t *testing.T) {
	o := newOpener()
	p := New(o.open, 4)
	defer p.Close()
	waitStats(t, p, func(s Stats) bool { return s.Idle == 4 })
	p.SetSize(1)
	s := waitStats(t, p, func(s Stats) bool { return s.Idle == 1 })
	if s.Trimmed != 3 {
		t.Fatalf("trimmed %d, want 3", s.Trimmed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		closed := 0
		o.mu.Lock()
		for _, f := range o.all {
			if f.closed.Load() {
				closed++
			}
		}
		o.mu.Unlock()
		if closed == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d trimmed workers closed, want 3", closed)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGetReportsOpenErrorsInsteadOfHanging(t *testing.T) {
	o := newOpener()
	o.fail = errors.New("python: not found")
	p := New(o.open, 2)
	defer p.Close()
	_, err := p.Get(context.Background())
	if err == nil || err.Error() != "python: not found" {
		t.Fatalf("Get: %v", err)
	}
	s := waitStats(t, p, func(s Stats) bool { return s.Failed >= 2 })
	if s.LastError != "python: not found" {
		t.Fatalf("last error %q", s.LastError)
	}
	// Recovery: once opens work again the pool fills up.
	o.mu.Lock()
	o.fail = nil
	o.mu.Unlock()
	waitStats(t, p, func(s Stats) bool { return s.Idle == 2 && s.LastError == "" })
}

func TestCloseClosesIdleAndRefusesGet(t *testing.T) {
	o := newOpener()
	p := New(o.open, 2)
	waitStats(t, p, func(s Stats) bool { return s.Idle == 2 })
	p.Close()
	o.mu.Lock()
	for _, f := range o.all {
		if !f.closed.Load() {
			t.Errorf("worker %d left open after Close", f.id)
		}
	}
	o.mu.Unlock()
	if _, err := p.Get(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}
