package pyodide

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
	"github.com/rlmkit/rlm/plugins/internal/pycell"
)

// fuelStop is how the watchdog (internal/sandbox/watchdog) stops a guest,
// a program's or a session's cell: it empties the fuel counter, so the
// guest traps as soon as it runs again, then wakes it from a sleep. wazero's
// WithCloseOnContextDone would do it too but makes CPython ~3x slower (an
// exit check at every loop header). The guest decrements the counter with
// a non-atomic read-modify-write, so one store can be lost: again keeps
// zeroing it until the guest has returned.
type fuelStop struct {
	g    api.MutableGlobal
	wake chan struct{} // closed to end a guest's sleep

	stopped atomic.Bool
	atStop  atomic.Int64 // the counter when stopped
}

func (f *fuelStop) stop() {
	f.atStop.Store(int64(f.g.Get()))
	f.stopped.Store(true)
	f.g.Set(0) // before waking a sleeping guest, so it traps at once
	close(f.wake)
}

func (f *fuelStop) again() { f.g.Set(0) }

// consumed is the fuel the guest used of budget: before a stop, plus what
// ran on the emptied counter after it.
func (f *fuelStop) consumed(budget int64) int64 {
	left := int64(f.g.Get())
	var used int64
	if f.stopped.Load() {
		used = budget - f.atStop.Load() + max(0, -left)
	} else {
		used = budget - left
	}
	return max(0, min(used, budget))
}

// stoppedBy classifies a guest that trapped or died instead of exiting,
// with its message as a Python exception line: cause first, the
// watchdog's (a timeout or a cancel) if it stopped the guest, then fuel
// below zero, then a refused allocation, else a crash (detail says what
// happened).
func stoppedBy(w *watchdog.Watch, cause ending.Reason, fuelLeft int64, memRefused bool, fuelLimit int64, memLimit uint64, detail string) (ending.Reason, string) {
	var fuel, mem ending.Reason
	if fuelLeft < 0 {
		fuel = ending.Fuel
	}
	if memRefused {
		mem = ending.MemoryLimit
	}
	why := watchdog.Ending(cause, fuel, mem, ending.Crashed)
	switch why {
	case ending.Fuel:
		return why, pycell.Message(why, fuelLimit)
	case ending.MemoryLimit:
		return why, pycell.Message(why, int64(memLimit))
	case ending.Crashed:
		return why, pycell.Error(why, detail)
	}
	return why, pycell.Error(why, w.Message(why))
}
