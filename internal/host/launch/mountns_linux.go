package launch

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// ownMountNamespace starts the plugin in a mount namespace of its own when
// this process may make one (CAP_SYS_ADMIN, i.e. root outside a container
// that drops it). The mounts a run makes on the host side of its sandbox
// (the read-only stage of an interpreter prefix under /root, a capped tmpfs
// working directory) then exist only there, and the kernel removes them
// with the plugin's last process, SIGKILL of rlm included: nothing is left
// mounted below /tmp for the next run to find, or for a /tmp cleaner to
// walk into. internal/sandbox/isolate makes the namespace a slave of the host's
// before its first mount, so they do not propagate back out.
func ownMountNamespace(cmd *exec.Cmd) {
	if mayUnshareMounts() {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNS
	}
}

// mayUnshareMounts reports CAP_SYS_ADMIN in this process's effective set,
// which clone(CLONE_NEWNS) needs; read once.
var mayUnshareMounts = sync.OnceValue(func() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if hex, ok := bytes.CutPrefix(line, []byte("CapEff:")); ok {
			caps, err := strconv.ParseUint(string(bytes.TrimSpace(hex)), 16, 64)
			return err == nil && caps&(1<<21) != 0 // CAP_SYS_ADMIN
		}
	}
	return false
})
