package proctree

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Configure is a no-op on Windows; job objects would be the equivalent.
func Configure(*exec.Cmd) {}

// SetParentDeathSignal is a no-op on Windows.
func SetParentDeathSignal(*syscall.SysProcAttr) {}

// KillGroup kills the process only.
func KillGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// BecomeSubreaper is unsupported on Windows.
func BecomeSubreaper() error { return nil }

// Children is unsupported on Windows.
func Children() map[int]byte { return nil }

// KillOrphans is unsupported on Windows.
func KillOrphans(func(int) bool) int { return 0 }

// KeepDescriptorsHome is a no-op on Windows, where handles are not
// inherited unless asked for.
func KeepDescriptorsHome() {}

// Alive is always true on Windows, where the sweeps that ask are not used.
func Alive(int) bool { return true }

// KillTree kills the process only.
func KillTree(root int, _ string) map[int]bool {
	KillGroup(root)
	return nil
}

// Reap has nothing to wait for on Windows (KillTree returns no pids).
func Reap(map[int]bool, time.Duration) {}
