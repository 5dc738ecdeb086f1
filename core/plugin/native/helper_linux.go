package native

import (
	"os/exec"
	"syscall"
)

// configureHelper gives the supervisor a process group of its own (the
// host's kill of the plugin's group must not SIGKILL it mid-cleanup) and
// SIGTERM, which it handles by killing and cleaning up the sandbox, when
// the plugin dies.
func configureHelper(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
