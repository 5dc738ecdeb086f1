package warm

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// TestPoolSizeDoesNotBoundRuns runs four programs at once on a pool kept
// one sandbox warm: the pool's size is how many are kept ready, while how
// many run at once is the host's (rlm serve's --max-concurrent). Before,
// the other three waited for the first to end, their wait counted as run
// time. After they end the pool keeps them while they are used, then
// shrinks back to its size once they have been idle for IdleKeep.
func TestPoolSizeDoesNotBoundRuns(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	p.IdleKeep = 2 * time.Second
	const n = 4
	// sleep takes the mark as its (long) duration: it must be a number.
	mark := fmt.Sprintf("4242%d", os.Getpid())
	hold := fmt.Sprintf("import os, time\nif os.fork() == 0:\n    os.execv('/usr/bin/sleep', ['sleep', '%s'])\ntime.sleep(600)\n", mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runArgs(t, ctx, p, hold)
		}()
	}
	// Generous: a start is tens of milliseconds, a loaded machine's a few seconds.
	deadline := time.Now().Add(2 * time.Minute)
	for hostProcs(mark) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d programs run at once on a pool of size 1", hostProcs(mark), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	// After the runs, the sandboxes started for them go back to the pool
	// idle (the trim waits IdleKeep before it drops one), so the next runs
	// find them ready; before, each was killed after its run.
	for {
		p.mu.Lock()
		idle := len(p.idle)
		p.mu.Unlock()
		if idle >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes idle after the runs: the pool dropped those started for them", idle)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		p.mu.Lock()
		alive, idle := len(p.all), len(p.idle)
		p.mu.Unlock()
		if alive == 1 && idle == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool keeps %d sandboxes (%d idle) after the runs, want its size, 1", alive, idle)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := hostProcs(mark); left != 0 {
		t.Errorf("%d programs left running", left)
	}
}
