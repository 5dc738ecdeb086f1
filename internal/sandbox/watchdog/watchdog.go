// Package watchdog is the one run loop's guard: it ends a run (a program, a
// REPL cell, a WebAssembly guest) at the first of its wall-clock deadline,
// the caller's cancellation and a stop asked for by the run's owner (an
// interrupt, an output flood), stops the body once in the way that body
// needs, escalates after a grace period when asked to, and names the ending
// with core/ending's table.
//
// Every runtime that runs model-written code had its own copy of this
// dance (core/plugin/program, the native REPL, the WebAssembly runtime's
// programs and cells); each now keeps only what is truly its own: how to
// stop its body and what its body saw.
//
// # Two ways to stop
//
// A body that is one blocking call (a process's Wait, a guest's _start)
// is stopped from whichever goroutine finds the cause: Options.Stop kills
// the process group or empties a guest's fuel. A body that is a select
// loop (a REPL cell reading its driver's messages) stops itself: the loop
// receives the cause from Stopping and interrupts its driver there, so
// nothing reaches the driver once the loop has taken the cell's reply.
// Options.Stop is called in both, first, for what is safe from anywhere
// (cancelling a cell's callbacks).
//
// # Notes
//
//   - The first cause wins; later ones are ignored, so a run killed for its
//     output flood does not become a timeout a moment later.
//   - Done disarms the deadline and the caller's context, and ends and
//     waits for Repeat's loop and for a stop in flight. A Stop after Done
//     still records its cause if none was (an output flood found while
//     draining a dead program's pipes) and still runs Options.Stop.
package watchdog

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core/ending"
)

// RepeatEvery is how often Repeat calls its function.
const RepeatEvery = 2 * time.Millisecond

// Options configure a Watch. The zero value watches the caller's context
// only.
type Options struct {
	// Timeout is the wall-clock limit; 0 means none.
	Timeout time.Duration
	// CtxDeadlineIsTimeout makes the caller's context passing its own
	// deadline end the run as Timeout rather than Cancelled (the
	// WebAssembly runtime counts it so).
	CtxDeadlineIsTimeout bool
	// Stop is called once, with the first cause, from the goroutine that
	// found it. Nil: the caller stops the body itself (see Stopping).
	Stop func(why ending.Reason)
	// Again, when set, is called every RepeatEvery after Stop returned,
	// until Done: a stop that can be lost (a guest's fuel counter is
	// decremented non-atomically) is kept up until the body returned.
	Again func()
	// Grace, when positive, closes Expired that long after the first
	// cause: a body that did not stop by then is to be killed.
	Grace time.Duration
}

// Watch guards one run. Start one per run; call Done when the body ended.
type Watch struct {
	o       Options
	causes  chan ending.Reason
	expired chan struct{}
	quit    chan struct{}

	mu    sync.Mutex
	why   ending.Reason
	limit int64
	done  bool
	timer *time.Timer
	grace *time.Timer
	wg    sync.WaitGroup // stops and repeats in flight before Done

	unhook func() bool
}

// Start arms a watch over ctx and o.Timeout.
func Start(ctx context.Context, o Options) *Watch {
	w := &Watch{
		o:       o,
		causes:  make(chan ending.Reason, 1),
		expired: make(chan struct{}),
		quit:    make(chan struct{}),
	}
	if o.Timeout > 0 {
		w.mu.Lock()
		w.timer = time.AfterFunc(o.Timeout, func() { w.StopAt(ending.Timeout, int64(o.Timeout)) })
		w.mu.Unlock()
	}
	w.unhook = context.AfterFunc(ctx, func() {
		if o.CtxDeadlineIsTimeout && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			w.StopAt(ending.Timeout, int64(o.Timeout))
			return
		}
		w.Stop(ending.Cancelled)
	})
	return w
}

// Stop ends the run for why, unless an earlier cause did: an interrupt
// (Cancelled), a limit the owner watches itself.
func (w *Watch) Stop(why ending.Reason) { w.StopAt(why, 0) }

// StopAt is Stop with the limit that was crossed, for Message (an output
// flood's byte count; see ending.Reason.Message for the units).
func (w *Watch) StopAt(why ending.Reason, limit int64) {
	w.mu.Lock()
	if w.why != "" {
		w.mu.Unlock()
		return
	}
	w.why, w.limit = why, limit
	w.causes <- why
	if w.o.Grace > 0 && !w.done {
		w.grace = time.AfterFunc(w.o.Grace, func() { close(w.expired) })
	}
	inFlight := !w.done
	if inFlight {
		w.wg.Add(1)
	}
	w.mu.Unlock()
	if inFlight {
		defer w.wg.Done()
	}
	if w.o.Stop != nil {
		w.o.Stop(why)
	}
	if w.o.Again != nil {
		w.Repeat(w.o.Again)
	}
}

// Stopping delivers the first cause, once. A select loop that stops its
// body itself receives it here.
func (w *Watch) Stopping() <-chan ending.Reason { return w.causes }

// Expired is closed Options.Grace after the first cause.
func (w *Watch) Expired() <-chan struct{} { return w.expired }

// Repeat calls f every RepeatEvery until Done. It does nothing after Done.
func (w *Watch) Repeat(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(RepeatEvery)
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// Why is the first cause, "" while there is none.
func (w *Watch) Why() ending.Reason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// Done tells the watch the body ended: it disarms the deadline, the
// context and the grace period, ends Repeat's loops and waits for them and
// for a stop in flight. It returns the cause, "" when none. Calling it
// again does no harm.
func (w *Watch) Done() ending.Reason {
	w.mu.Lock()
	if w.done {
		defer w.mu.Unlock()
		return w.why
	}
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.grace != nil {
		w.grace.Stop()
	}
	close(w.quit)
	w.mu.Unlock()
	w.unhook()
	w.wg.Wait()
	return w.Why()
}

// Ending classifies a run: cause, what the watchdog stopped it for ("" when
// nothing did), outranks everything the body saw, since the stop is what
// ended it; then the first of seen that is set (a limit the sandbox
// enforced, a fuel counter below zero, a crash); then Exit.
//
// A body stopped from the watchdog's goroutine (Options.Stop) passes Why
// after Done. A select loop that stops its body itself passes the cause it
// took from Stopping and acted on, "" if it took none: a cause that came
// after the loop read the body's own ending did not end the run.
func Ending(cause ending.Reason, seen ...ending.Reason) ending.Reason {
	if cause != "" {
		return cause
	}
	for _, r := range seen {
		if r != "" {
			return r
		}
	}
	return ending.Exit
}

// Message is the sentence for why from core/ending's table, with the limit
// the watch knows for it: its Timeout, or the one its cause was given to
// StopAt.
func (w *Watch) Message(why ending.Reason) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case why == ending.Timeout:
		return why.Message(int64(w.o.Timeout))
	case why == w.why:
		return why.Message(w.limit)
	}
	return why.Message(0)
}
