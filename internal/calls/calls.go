// Package calls pairs the replies on a connection with the calls waiting
// for them. rlm's connections carry many calls at once, each numbered and
// answered out of order: a session's cells and variable reads (core), a
// cell's model queries (core/plugin), the fork server's spawns
// (plugins/python). Each needs the same table: a fresh id, a channel to
// wait on, the reply routed to it, and every waiter released when the
// connection is gone, so that no caller waits forever on a dead peer.
package calls

import "sync"

// Table is the calls waiting on one connection. Its zero value is ready.
type Table[T any] struct {
	mu      sync.Mutex
	last    uint64
	waiting map[uint64]chan T
	err     error
}

// Start registers a call: the id to send with it and the channel its reply
// arrives on, which is closed without a value if the connection fails
// first. It fails with Fail's error once the connection is gone.
func (t *Table[T]) Start() (uint64, <-chan T, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, nil, t.err
	}
	if t.waiting == nil {
		t.waiting = map[uint64]chan T{}
	}
	t.last++
	ch := make(chan T, 1)
	t.waiting[t.last] = ch
	return t.last, ch, nil
}

// Answer hands v to call id and forgets the call. It reports false when no
// call waits under id (a caller that gave up, or an id never issued), so
// the reply is dropped.
func (t *Table[T]) Answer(id uint64, v T) bool {
	t.mu.Lock()
	ch, ok := t.waiting[id]
	delete(t.waiting, id)
	t.mu.Unlock()
	if ok {
		ch <- v // buffered: never blocks
	}
	return ok
}

// Drop forgets call id: its caller stopped waiting (a failed send, a
// cancelled context), and a late reply is to be dropped.
func (t *Table[T]) Drop(id uint64) {
	t.mu.Lock()
	delete(t.waiting, id)
	t.mu.Unlock()
}

// Fail ends the table: every waiting call's channel is closed and every
// later Start fails. The first error is kept (a connection fails once, and
// its first cause is the one to report); Fail returns it.
func (t *Table[T]) Fail(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
	for id, ch := range t.waiting {
		close(ch)
		delete(t.waiting, id)
	}
	return t.err
}

// Err is the error Fail kept, nil while the connection is up.
func (t *Table[T]) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
