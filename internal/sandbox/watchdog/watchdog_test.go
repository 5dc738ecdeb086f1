package watchdog

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/ending"
)

func TestTimeoutStopsOnce(t *testing.T) {
	var stops atomic.Int32
	w := Start(context.Background(), Options{Timeout: 20 * time.Millisecond, Stop: func(why ending.Reason) {
		if why != ending.Timeout {
			t.Errorf("stopped for %s", why)
		}
		stops.Add(1)
	}})
	if why := <-w.Stopping(); why != ending.Timeout {
		t.Fatalf("cause %s", why)
	}
	w.Stop(ending.OutputLimit) // later causes are ignored
	if got := w.Done(); got != ending.Timeout || stops.Load() != 1 {
		t.Fatalf("Done = %s after %d stops", got, stops.Load())
	}
	if m := w.Message(ending.Timeout); m != "timed out after 20ms" {
		t.Errorf("message %q", m)
	}
	if e := Ending(w.Why(), ending.MemoryLimit); e != ending.Timeout {
		t.Errorf("Ending = %s: the stop outranks what the body saw", e)
	}
}

func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		deadlineIsTimeout bool
		want              ending.Reason
	}{{false, ending.Cancelled}, {true, ending.Timeout}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		w := Start(ctx, Options{CtxDeadlineIsTimeout: tc.deadlineIsTimeout})
		if why := <-w.Stopping(); why != tc.want {
			t.Errorf("CtxDeadlineIsTimeout %v: cause %s, want %s", tc.deadlineIsTimeout, why, tc.want)
		}
		w.Done()
		cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := Start(ctx, Options{Timeout: time.Hour, CtxDeadlineIsTimeout: true})
	cancel()
	if why := <-w.Stopping(); why != ending.Cancelled {
		t.Errorf("cancel: cause %s", why)
	}
	w.Done()
}

func TestFloodAndMessage(t *testing.T) {
	w := Start(context.Background(), Options{})
	w.StopAt(ending.OutputLimit, 1000)
	w.Done()
	if m := w.Message(ending.OutputLimit); m != "killed after writing more than 1000 bytes of output" {
		t.Errorf("message %q", m)
	}
}

func TestGraceAndRepeat(t *testing.T) {
	var again atomic.Int32
	w := Start(context.Background(), Options{Timeout: time.Millisecond, Grace: 30 * time.Millisecond, Again: func() { again.Add(1) }})
	select {
	case <-w.Expired():
	case <-time.After(5 * time.Second):
		t.Fatal("the grace period never ended")
	}
	w.Done()
	n := again.Load()
	if n == 0 {
		t.Error("Again never ran")
	}
	time.Sleep(10 * RepeatEvery)
	if again.Load() != n {
		t.Error("Again ran on after Done")
	}
}

func TestDoneDisarms(t *testing.T) {
	w := Start(context.Background(), Options{Timeout: 10 * time.Millisecond, Grace: time.Millisecond})
	if why := w.Done(); why != "" {
		t.Fatalf("cause %s", why)
	}
	time.Sleep(30 * time.Millisecond)
	if why := w.Why(); why != "" {
		t.Fatalf("a disarmed watch stopped for %s", why)
	}
	if e := Ending("", "", ending.Signal); e != ending.Signal {
		t.Errorf("Ending = %s", e)
	}
	if e := Ending(""); e != ending.Exit {
		t.Errorf("Ending = %s", e)
	}
}
