//go:build !windows

package daemoncmd

import "syscall"

// detached puts the daemon in a session of its own, away from the
// terminal's signals; unlike plugins it must outlive the command that
// started it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
