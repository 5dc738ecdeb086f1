package python_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// TestWarmRunsLeaveTheHostDiskAlone: a namespace run with no files of its
// own, once the plugin's warm sandboxes are up, makes no working directory
// on the host (it is staged in the sandbox); a cold one, before them,
// does (the control that the watch sees such directories at all). The
// run's produced files still come back.
func TestWarmRunsLeaveTheHostDiskAlone(t *testing.T) {
	if err := isolate.Available(isolate.LevelNamespace); err != nil {
		t.Skipf("namespace isolation unavailable: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the host makes the plugin's TMPDIR below it
	rt := startRuntime(t)
	// run runs one program that sleeps long enough to be seen, and says
	// whether a host working directory existed meanwhile.
	run := func() bool {
		var seen atomic.Bool
		done := make(chan struct{})
		go func() {
			for {
				if m, _ := filepath.Glob(filepath.Join(tmp, "rlm-plugin-*", "rlm-run-*")); len(m) > 0 {
					seen.Store(true)
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		res, err := rt.Run(context.Background(), core.Program{
			Code:        "import time\nopen('out.txt', 'w').write('made')\ntime.sleep(0.3)\nprint('ok')",
			Limits:      core.Limits{Isolation: "namespace", Wall: 60 * time.Second},
			ReturnFiles: true,
		})
		close(done)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "ok\n" || len(res.Files) != 1 || res.Files[0].Path != "out.txt" || string(res.Files[0].Data) != "made" {
			t.Fatalf("%q %q %+v", res.Stdout, res.Stderr, res.Files)
		}
		return seen.Load()
	}
	if !run() {
		t.Fatal("control: the first (cold) run's host working directory was not seen")
	}
	// The pool fills after the first runs; from then on no run may make one.
	clean := 0
	for i := 0; i < 40 && clean < 3; i++ {
		if run() {
			clean = 0
		} else {
			clean++
		}
	}
	if clean < 3 {
		t.Fatal("warm runs still make a working directory on the host")
	}
}
