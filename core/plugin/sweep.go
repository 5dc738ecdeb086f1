package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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
		if n, _ := fmt.Sscanf(rest, "%d-", &pid); n != 1 || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// alive reports whether process pid exists and is not a zombie (a process
// of another user counts: signalling it is refused, not unknown).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	if runtime.GOOS == "windows" {
		return true
	}
	err = p.Signal(syscall.Signal(0))
	if err != nil {
		return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM)
	}
	// A zombie answers signal 0 but is dead; where PID 1 never reaps (some
	// containers), a killed daemon stays one for good.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return false
		}
	}
	return true
}
