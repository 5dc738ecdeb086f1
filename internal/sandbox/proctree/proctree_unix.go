//go:build unix

package proctree

import (
	"os/exec"
	"syscall"
)

// Configure makes cmd start in a new process group of its own.
func Configure(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	SetParentDeathSignal(cmd.SysProcAttr)
}

// KillGroup sends SIGKILL to the process group led by pid, and to pid itself
// in case it changed group.
func KillGroup(pid int) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// SignalGroup sends sig to the process group led by pid.
func SignalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
