package proctree

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// descendants returns the processes that belong to root: its descendants by
// parentage, the members of its process group, and, when mark (an
// environment entry NAME=VALUE) is not empty, every process whose initial
// environment holds it, with their descendants. Children inherit the
// environment, so the mark finds those that left the group with setsid and
// were re-parented away from root.
func descendants(root int, mark string) map[int]bool {
	children := map[int][]int{}
	found := map[int]bool{}
	needle := []byte(mark + "\x00")
	for _, pid := range pids() {
		st, ok := stat(pid)
		if !ok {
			continue
		}
		children[st.ppid] = append(children[st.ppid], pid)
		if pid == root {
			continue
		}
		if st.pgid == root {
			found[pid] = true
			continue
		}
		if mark != "" {
			if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil && bytes.Contains(env, needle) {
				found[pid] = true
			}
		}
	}
	// everything below root or below a process found so far
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

// KillTree stops and kills the process group led by root, root itself and
// every process descendants attributes to it (see there for mark), and
// returns the pids it killed besides root. It does not wait for root (its
// exec.Cmd does); Reap waits for the rest.
func KillTree(root int, mark string) map[int]bool {
	// freeze the group first so nothing forks while we look
	_ = syscall.Kill(-root, syscall.SIGSTOP)
	all := map[int]bool{}
	for range 2 { // a second pass catches what forked during the first
		for p := range descendants(root, mark) {
			if !all[p] {
				all[p] = true
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
		}
	}
	KillGroup(root)
	for p := range all {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return all
}

// Reap waits, at most limit, for the killed processes to disappear,
// reaping those that are, or become, children of this process (they are
// re-parented here when this process is a subreaper). A process that is a
// zombie of some other, unrelated parent is left to that parent. It empties
// pids of the processes that are gone.
func Reap(pids map[int]bool, limit time.Duration) {
	if len(pids) == 0 {
		return
	}
	self := os.Getpid()
	deadline := time.Now().Add(limit)
	backoff := 50 * time.Microsecond
	for {
		for p := range pids {
			st, ok := stat(p)
			if !ok {
				delete(pids, p)
				continue
			}
			if st.ppid == self {
				var ws syscall.WaitStatus
				if r, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil); (r == p && err == nil) || err == syscall.ECHILD {
					delete(pids, p)
				}
				continue
			}
			if st.state == 'Z' && !pids[st.ppid] {
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
