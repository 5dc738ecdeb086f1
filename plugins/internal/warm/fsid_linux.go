package warm

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
)

// asOwner runs f on an OS thread whose file system identity
// (setfsuid/setfsgid) is uid/gid, so that the files f creates in a
// sandbox's tmpfs belong to the sandbox's user: the host's root has no uid
// there to own a file by (mkdir and open fail with EOVERFLOW).
//
// The identity is per thread, and a thread that changed it must never run
// anything else, nor ever be given back to the Go scheduler: so each
// identity has threads of its own, locked for good (never unlocked, never
// restored), which run nothing but such jobs. Threads the runtime creates
// meanwhile come from its template thread, never from these.
func asOwner(uid, gid int, f func() error) error {
	jobs, err := ownerThreads(uid, gid)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	jobs <- func() { done <- f() }
	return <-done
}

type fsIdentity struct{ uid, gid int }

var (
	ownersMu sync.Mutex
	owners   = map[fsIdentity]chan func(){}
)

// ownerThreads returns the job queue of uid/gid's threads, starting them
// (as many as there are CPUs) on first use.
func ownerThreads(uid, gid int) (chan func(), error) {
	id := fsIdentity{uid, gid}
	ownersMu.Lock()
	defer ownersMu.Unlock()
	if jobs, ok := owners[id]; ok {
		return jobs, nil
	}
	jobs := make(chan func())
	n := runtime.NumCPU()
	started := make(chan error, n)
	for range n {
		go ownerThread(id, jobs, started)
	}
	for range n {
		if err := <-started; err != nil {
			close(jobs) // the threads that did start end (and die locked)
			return nil, err
		}
	}
	owners[id] = jobs
	return jobs, nil
}

// ownerThread locks its goroutine to its thread and never unlocks it: when
// the goroutine returns, the runtime ends the thread, identity and all.
func ownerThread(id fsIdentity, jobs <-chan func(), started chan<- error) {
	runtime.LockOSThread()
	setfs(syscall.SYS_SETFSGID, id.gid)
	setfs(syscall.SYS_SETFSUID, id.uid)
	// Both calls answer the previous id, and an invalid one changes
	// nothing: -1 reads the current one back.
	if g, u := setfs(syscall.SYS_SETFSGID, -1), setfs(syscall.SYS_SETFSUID, -1); g != id.gid || u != id.uid {
		started <- fmt.Errorf("setting the file system identity to %d:%d: the thread has %d:%d", id.uid, id.gid, u, g)
		return
	}
	started <- nil
	for job := range jobs {
		job()
	}
}

// setfs calls setfsuid or setfsgid, which never fail; they answer the
// previous id.
func setfs(call uintptr, id int) int {
	r, _, _ := syscall.RawSyscall(call, uintptr(id), 0, 0)
	return int(r)
}
