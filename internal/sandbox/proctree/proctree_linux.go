package proctree

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetParentDeathSignal asks the kernel to SIGKILL the child when its parent
// dies. Go may retire the OS thread that forked the child; the signal is
// tied to that thread, so callers that care pin the fork with
// runtime.LockOSThread or accept that a retired thread is rare in practice
// (Go only retires threads locked by LockOSThread that exit).
func SetParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// BecomeSubreaper makes orphaned descendants re-parent to this process.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Children lists the pids whose parent is this process, with their state
// letter from /proc/PID/stat (R, S, Z, ...). It reads the kernel's per-thread
// children lists (cheap: a few files) and falls back to scanning /proc.
func Children() map[int]byte {
	out := map[int]byte{}
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		ok := false
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			ok = true
			for _, f := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					if st, found := stat(pid); found {
						out[pid] = st.state
					}
				}
			}
		}
		if ok {
			return out
		}
	}
	self := os.Getpid()
	for _, pid := range pids() {
		if st, ok := stat(pid); ok && st.ppid == self {
			out[pid] = st.state
		}
	}
	return out
}

// pids lists every process in /proc.
func pids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Alive reports whether process pid exists and is not a zombie. A process of
// another user counts as alive (signalling it is refused, not unknown). A
// zombie answers signal 0 but is dead, and where PID 1 reaps late or never
// (some containers) a killed process stays one for a while: the sweeps that
// clean up after dead owners must not mistake it for a live one.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	st, ok := stat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// procStat is what rlm reads of /proc/PID/stat.
type procStat struct {
	ppid, pgid int
	state      byte // R, S, Z, ...
}

// stat reads /proc/PID/stat; the command name may hold spaces and
// parentheses, so parse after the last ')'.
func stat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	return procStat{ppid: ppid, pgid: pgid, state: f[0][0]}, err1 == nil && err2 == nil
}

// KillOrphans kills and reaps every child of this process that is neither
// tracked nor claimed by keep (which may be nil). Children that nobody tracks
// are what a subreaper inherits: descendants that escaped their process
// group. A program still running may lose a daemon it double-forked; that
// is the price of never leaking one.
func KillOrphans(keep func(pid int) bool) int {
	spawnMu.Lock()
	defer spawnMu.Unlock()
	n := 0
	for pid := range Children() {
		if IsTracked(pid) || (keep != nil && keep(pid)) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		n++
	}
	return n
}

// KeepDescriptorsHome marks every descriptor above stderr close-on-exec.
// Go starts children with only the descriptors it is told to pass, but a
// descriptor rlm itself inherited without close-on-exec (a shell's `9<
// secret`, a CI runner's pipe) would otherwise reach every plugin and,
// at isolation none, the model's code.
func KeepDescriptorsHome() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Kernels before 5.11: walk the descriptor table.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
