package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// errBusy means every slot is taken and the queue is full, or the wait for
// a slot ran out.
var errBusy = errors.New("busy")

// limiter bounds the runs in flight to a number of slots, with a bounded
// queue of waiters that each wait at most a fixed time. A slot is a channel
// token: acquiring is one non-blocking send on the fast path, and a waiter
// that gives up (its client went away) simply stops waiting.
type limiter struct {
	// admitted counts requests between reading their body and answering;
	// at most cap(slots)+maxQueue, so bodies held in memory are bounded
	// too, not only runs.
	admitted atomic.Int64
	slots    chan struct{}
	maxQueue int64
	wait     time.Duration
	waiting  atomic.Int64
	inFlight atomic.Int64
	// onChange is called after the queue depth or in-flight count moves.
	onChange func(inFlight, waiting int64)
}

func newLimiter(slots, queue int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, slots), maxQueue: int64(queue), wait: wait}
}

// enter admits one request to read its body and wait for a slot; false
// means the server is full. leave must follow a true.
func (l *limiter) enter() bool {
	if l.admitted.Add(1) > int64(cap(l.slots))+l.maxQueue {
		l.admitted.Add(-1)
		return false
	}
	return true
}

func (l *limiter) leave() { l.admitted.Add(-1) }

func (l *limiter) changed() {
	if l.onChange != nil {
		l.onChange(l.inFlight.Load(), l.waiting.Load())
	}
}

// acquire takes a slot, waiting in the queue when there is room. It returns
// errBusy when there is none, or ctx's error when the caller gave up.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
	return l.acquireFor(ctx, l.wait, true)
}

// acquireFor takes a slot, waiting up to wait: errBusy when the wait ran
// out (or, when bounded, the queue is full), ctx's error when the caller
// gave up. Unbounded waiting is for a front end whose clients read a full
// queue as a verdict (SandboxFusion's, see ExecuteWaiting): they wait,
// counted as waiting all the same.
func (l *limiter) acquireFor(ctx context.Context, wait time.Duration, bounded bool) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
		return l.took(), nil
	default:
	}
	if l.waiting.Add(1) > l.maxQueue && bounded {
		l.waiting.Add(-1)
		return nil, errBusy
	}
	l.changed()
	defer func() {
		l.waiting.Add(-1)
		l.changed()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.took(), nil
	case <-t.C:
		return nil, errBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *limiter) took() func() {
	l.inFlight.Add(1)
	l.changed()
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			<-l.slots
			l.inFlight.Add(-1)
			l.changed()
		}
	}
}
