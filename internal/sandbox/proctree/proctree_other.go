//go:build unix && !linux

package proctree

import (
	"syscall"
	"time"
)

// SetParentDeathSignal is a no-op where the kernel has no such signal.
func SetParentDeathSignal(*syscall.SysProcAttr) {}

// BecomeSubreaper is unsupported outside Linux.
func BecomeSubreaper() error { return nil }

// Children is unsupported outside Linux.
func Children() map[int]byte { return nil }

// KillOrphans is unsupported outside Linux.
func KillOrphans(func(int) bool) int { return 0 }

// KeepDescriptorsHome marks every descriptor above stderr close-on-exec
// (see the Linux version for why).
func KeepDescriptorsHome() {
	for fd := 3; fd < 1024; fd++ {
		syscall.CloseOnExec(fd)
	}
}

// Alive reports whether process pid exists (a zombie counts: there is no
// portable way to tell).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return pid > 0 && (err == nil || err == syscall.EPERM)
}

// KillTree kills root's process group only: finding what left it needs
// Linux's /proc.
func KillTree(root int, _ string) map[int]bool {
	KillGroup(root)
	return nil
}

// Reap has nothing to wait for outside Linux (KillTree returns no pids).
func Reap(map[int]bool, time.Duration) {}
