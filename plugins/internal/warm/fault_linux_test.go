package warm

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// TestKilledSandboxIsReplaced: the worker (then bwrap) of the pool's only
// sandbox is killed from the host while a request runs in it and another
// waits for a sandbox. The running one ends crashed (not re-run), the
// waiting one is served by the replacement.
func TestKilledSandboxIsReplaced(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	for i, victim := range []string{"worker", "bwrap"} {
		mark := strconv.Itoa(os.Getpid()) + "7" + strconv.Itoa(i)
		running := make(chan *core.Result, 1)
		go func() {
			running <- runArgs(t, context.Background(), p, "import os\nos.execv('/usr/bin/sleep', ['sleep', '31337"+mark+"'])")
		}()
		for hostProcs("31337"+mark) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		queued := make(chan *core.Result, 1)
		go func() { queued <- runArgs(t, context.Background(), p, "print('queued ran')") }()
		bw, wk := p.Sandboxes()
		pid := wk[0]
		if victim == "bwrap" {
			pid = bw[0]
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r := <-running
		if r.EndedBy != ending.Crashed {
			t.Fatalf("%s killed: the running request ended by %s (%q), want crashed", victim, r.EndedBy, r.Error)
		}
		q := <-queued
		if q.Stdout != "queued ran\n" || q.EndedBy != ending.Exit {
			t.Fatalf("%s killed: the queued request: %q %s %q", victim, q.Stdout, q.EndedBy, q.Error)
		}
		for hostProcs("31337"+mark) != 0 {
			time.Sleep(10 * time.Millisecond) // the crashed run's processes die with its sandbox
		}
	}
}
