package native

import (
	"os"
	"runtime"

	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// Serve is a native runtime plugin's main: it makes the plugin a child
// subreaper, so grandchildren that escape a program's process group are
// re-parented to it and killed after the run instead of outliving it (PID 1
// does not reap on every host), then serves rt over go-plugin.
//
// A native plugin runs on one P (GOMAXPROCS=1) unless the operator's
// GOMAXPROCS says otherwise. Its own work is orchestration: programs run in
// processes of their own, and what the plugin does between them is system
// calls and hand-offs. With a P per CPU, every goroutine a run readies (its
// output drains, its sandbox's report, gRPC's writer) woke another thread
// to look for work: a warm trivial run cost the plugin ~30 context switches
// and ~10 % more CPU than on one P, ~20 (perf stat over 1,500 runs at 32
// clients, BENCHMARKS.md).
func Serve(rt plugin.Runtime) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	_ = proctree.BecomeSubreaper()
	plugin.Serve(rt)
}
