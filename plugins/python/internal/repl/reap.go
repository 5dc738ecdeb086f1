package repl

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): processes that a driver's children orphan (for
// example with setsid or a double fork) are re-parented to this process
// instead of PID 1, so Close can find, kill and reap them even on machines
// whose PID 1 never reaps. The plugin's main calls it once at start.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// tagEnv names the environment variable that marks every process started by
// one driver. Children inherit it, including those that left the driver's
// process group with setsid, so they can be found when the session ends.
const tagEnv = "RLM_REPL_SESSION"

type procInfo struct {
	pid, ppid, pgid int
	state           byte
}

// readStat parses /proc/PID/stat.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// the command name is in parentheses and may contain anything
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, true
}

func listPids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if p, err := strconv.Atoi(n); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// findDescendants returns the processes that belong to the driver root: its
// descendants by parentage, the members of its process group, and any
// process whose initial environment carries tag (children that escaped with
// setsid and were re-parented).
func findDescendants(root int, tag string) map[int]bool {
	infos := map[int]procInfo{}
	children := map[int][]int{}
	found := map[int]bool{}
	needle := []byte(tagEnv + "=" + tag + "\x00")
	for _, pid := range listPids() {
		pi, ok := readStat(pid)
		if !ok {
			continue
		}
		infos[pid] = pi
		children[pi.ppid] = append(children[pi.ppid], pid)
		if pid == root {
			continue
		}
		if pi.pgid == root {
			found[pid] = true
			continue
		}
		if tag != "" {
			if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil && bytes.Contains(env, needle) {
				found[pid] = true
			}
		}
	}
	// everything below root or below a tagged process
	queue := []int{root}
	for p := range found {
		queue = append(queue, p)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !found[c] && c != root {
				found[c] = true
				queue = append(queue, c)
			}
		}
	}
	return found
}

// killTree stops and kills the driver's process group and every process
// findDescendants attributes to it. It does not wait for the driver itself
// (its exec.Cmd does); see reapKilled for the rest.
func killTree(root int, tag string) map[int]bool {
	// freeze the group first so nothing forks while we look
	_ = syscall.Kill(-root, syscall.SIGSTOP)
	all := map[int]bool{}
	for range 2 { // a second pass catches what forked during the first
		for p := range findDescendants(root, tag) {
			if !all[p] {
				all[p] = true
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
		}
	}
	_ = syscall.Kill(-root, syscall.SIGKILL)
	_ = syscall.Kill(root, syscall.SIGKILL)
	for p := range all {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return all
}

// reapKilled waits (bounded) for the killed processes to disappear, reaping
// those that are, or become, children of this process (they are re-parented
// here when this process is a subreaper). A process that is a zombie of
// some other, unrelated parent is left to that parent.
func reapKilled(pids map[int]bool, limit time.Duration) {
	if len(pids) == 0 {
		return
	}
	self := os.Getpid()
	deadline := time.Now().Add(limit)
	backoff := 50 * time.Microsecond
	for {
		for p := range pids {
			pi, ok := readStat(p)
			if !ok {
				delete(pids, p)
				continue
			}
			if pi.ppid == self {
				var ws syscall.WaitStatus
				if r, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil); (r == p && err == nil) || err == syscall.ECHILD {
					delete(pids, p)
				}
				continue
			}
			if pi.state == 'Z' && !pids[pi.ppid] {
				delete(pids, p) // someone else's to reap
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		// Polling: the kernel gives no single event for "this process was
		// re-parented to us"; the wait is bounded and normally a few
		// iterations long.
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Millisecond)
	}
}
