//go:build unix && !linux

package proctree

import "syscall"

// SetParentDeathSignal is a no-op where the kernel has no such signal.
func SetParentDeathSignal(*syscall.SysProcAttr) {}

// BecomeSubreaper is unsupported outside Linux.
func BecomeSubreaper() error { return nil }

// Children is unsupported outside Linux.
func Children() map[int]byte { return nil }

// KillOrphans is unsupported outside Linux.
func KillOrphans(func(int) bool) int { return 0 }
