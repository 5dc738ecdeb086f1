package native

import (
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// Serve is a native runtime plugin's main: it makes the plugin a child
// subreaper, so grandchildren that escape a program's process group are
// re-parented to it and killed after the run instead of outliving it (PID 1
// does not reap on every host), then serves rt over go-plugin.
func Serve(rt plugin.Runtime) {
	_ = proctree.BecomeSubreaper()
	plugin.Serve(rt)
}
