package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// sockDirPrefix starts the name of the directory a host makes for each
// plugin it launches: rlm-plugin-HOSTPID-RANDOM. The host's pid in the name
// lets a later rlm remove the directories of a host that was killed with
// SIGKILL (a daemon, say), which never got to remove them itself.
const sockDirPrefix = "rlm-plugin-"

var sweepOnce sync.Once

// sweepStaleDirs removes the plugin directories in the temporary directory
// whose host process no longer exists. A directory whose host is alive, or
// whose name carries no pid, is left alone; removal is best effort.
func sweepStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), sockDirPrefix+"*-*"))
	for _, dir := range matches {
		var pid int
		rest := strings.TrimPrefix(filepath.Base(dir), sockDirPrefix)
		if n, _ := fmt.Sscanf(rest, "%d-", &pid); n != 1 || pid <= 0 || pid == os.Getpid() || proctree.Alive(pid) {
			continue
		}
		// The dead host's plugins were its plugins' TMPDIR: a sandbox's
		// read-only stage (a bind mount of a runtime's files) may still be
		// there. Unmount what dead owners left first, and never RemoveAll
		// over a mount.
		isolate.SweepDead(dir)
		if isolate.HasMountsBelow(dir) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}
