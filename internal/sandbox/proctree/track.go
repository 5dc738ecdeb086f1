package proctree

import (
	"os/exec"
	"sync"
)

// spawnMu lets KillOrphans see a consistent world: no child can be forked
// between its scan of /proc and the tracking of that child.
var spawnMu sync.RWMutex

// Start starts cmd and tracks its process atomically with respect to
// KillOrphans. The caller must Untrack the pid after Wait.
func Start(cmd *exec.Cmd) error {
	spawnMu.RLock()
	defer spawnMu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	Track(cmd.Process.Pid)
	return nil
}

var (
	trackedMu sync.Mutex
	tracked   = map[int]int{}
)

// Track marks pid as a live child that KillOrphans must leave alone (a
// running program or a session's interpreter). Every Track needs an Untrack.
func Track(pid int) {
	trackedMu.Lock()
	tracked[pid]++
	trackedMu.Unlock()
}

// Untrack releases a Track.
func Untrack(pid int) {
	trackedMu.Lock()
	if tracked[pid]--; tracked[pid] <= 0 {
		delete(tracked, pid)
	}
	trackedMu.Unlock()
}

// IsTracked reports whether pid is a live child someone still owns.
func IsTracked(pid int) bool {
	trackedMu.Lock()
	defer trackedMu.Unlock()
	return tracked[pid] > 0
}
