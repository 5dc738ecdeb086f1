package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Shared cgroups: a warm sandbox's own cgroups reused by each run inside it.
//
// A run that gets cgroups of its own pays, per run and per hierarchy, a
// mkdir, the limits' writes, a migration of its first process (which takes
// the kernel's cgroup_threadgroup_rwsem for writing and so stalls every
// fork on the machine while it waits for an RCU grace period), and an
// rmdir whose teardown runs in kernel workers. A warm sandbox forks each
// run's process from its pid 1, so the process can simply be born in the
// sandbox's cgroups instead: the host rewrites the limits when they
// change, snapshots the counters and resets the high-water mark before the
// run, and reads the differences after it.
//
// What the cgroups hold besides the run's processes is the sandbox's
// bwrap and its pid 1, exactly the two processes a cold run's cgroups hold
// besides the program (bwrap and its reaper), so a run's memory and
// process limits mean what they mean for a cold run: the interpreter that
// forks the program counts toward the memory limit as a cold interpreter
// does, and the pids limit is the request's unchanged.

// errSharedLimits says a run's limits cannot be held by the shared cgroups
// (a memory limit at or below what the sandbox already uses, a process
// limit that leaves no room for the run's first process); the caller gives
// the run cgroups of its own.
var errSharedLimits = errors.New("the run's limits do not fit the sandbox's own cgroups")

// sharedHeadroom is how much memory a run must be allowed beyond what the
// sandbox holds when the run starts: below it, lowering the limit would
// make the kernel reclaim or (cgroup v2) OOM-kill the sandbox's own pid 1.
const sharedHeadroom = 8 << 20

// sharedState is what Cgroups keep for the shared kind.
type sharedState struct {
	keep        []int // host pids never to kill: bwrap, the sandbox's pid 1
	memLimit    int64 // the memory limit written last (0: none), -1 unknown
	pidsLimit   int64 // the pids limit written last (0: none), -1 unknown
	swapOff     bool  // v2 memory.swap.max is 0 already
	baseOOM     int64 // counters at Begin
	basePidsMax int64 //
	// The counters as the last run's end read them (ended says they
	// are): the next Begin's base. Between two runs the sandbox holds only
	// bwrap and its idle pid 1, which count no OOM kill and no refused
	// fork, so reading them again at Begin (three preads) told nothing new.
	endOOM, endPidsMax int64
	ended              bool
	peakFile           *os.File // v2 memory.peak, reset through this descriptor
	peakReset          bool     // the high-water mark was reset at Begin

	// The counters' files, opened once and read with pread: a run reads
	// them at Begin and at Judge, and opening cgroupfs files through os
	// (open, two fcntls, an epoll registration and its removal, close)
	// cost a warm run more than its cgroups' work itself.
	fdsMu sync.Mutex
	fds   map[string]int // path -> descriptor; nil once closed
}

// read is path's contents through a descriptor kept open (nil when it
// cannot be read). Safe against a concurrent Close.
func (sh *sharedState) read(path string) []byte {
	var buf [512]byte // the counters' files are a few lines
	n := 0
	err := sh.withFD(path, syscall.O_RDONLY, func(fd int) (err error) {
		n, err = syscall.Pread(fd, buf[:], 0)
		return err
	})
	if err != nil || n <= 0 {
		return nil
	}
	return bytes.Clone(buf[:n])
}

// write writes value to path through a descriptor kept open.
func (sh *sharedState) write(path, value string) error {
	err := sh.withFD(path, syscall.O_WRONLY, func(fd int) error {
		_, err := syscall.Pwrite(fd, []byte(value), 0)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s to %s: %w", value, path, err)
	}
	return nil
}

// withFD calls f with the descriptor of path opened with mode (O_RDONLY
// or O_WRONLY), opening it the first time.
func (sh *sharedState) withFD(path string, mode int, f func(fd int) error) error {
	sh.fdsMu.Lock()
	defer sh.fdsMu.Unlock()
	if sh.fds == nil {
		return os.ErrClosed
	}
	key := path
	if mode != syscall.O_RDONLY {
		key += "\x00w"
	}
	fd, ok := sh.fds[key]
	if !ok {
		var err error
		if fd, err = syscall.Open(path, mode|syscall.O_CLOEXEC, 0); err != nil {
			return err
		}
		sh.fds[key] = fd
	}
	return f(fd)
}

// SharedCgroups returns Cgroups over the Cmd's own cgroups, for runs whose
// processes its sandbox forks (see Begin). The Cmd must have started; nil
// when it has no cgroups (the host has none usable) or its pid 1 is not
// known. Join does nothing on them (the processes are born inside), Kill
// spares the sandbox's own two processes, and Remove leaves them to the
// Cmd's Cleanup.
func (c *Cmd) SharedCgroups() *Cgroups {
	if c.cg == nil || len(c.cg.dirs) == 0 {
		return nil
	}
	init := c.ProgramPid()
	if init <= 0 {
		return nil // its pid 1 is not known yet, so Kill could not spare it
	}
	return &Cgroups{rc: c.cg, shared: &sharedState{keep: []int{c.Pid(), init}, memLimit: -1, pidsLimit: -1, fds: map[string]int{}}}
}

// Begin prepares shared cgroups for the next run under spec's memory and
// process limits (MemoryBytes, MaxProcesses as a cold run of the request
// gets them): it writes the limits that changed, snapshots the OOM and
// pids-limit counters and resets the memory high-water mark. It returns
// errSharedLimits (wrapped) when the limits cannot be held this way; the
// caller then uses NewCgroups.
func (g *Cgroups) Begin(spec Spec) error {
	sh := g.shared
	if sh == nil {
		return errors.New("isolate: Begin on cgroups of a run's own")
	}
	// bwrap, the pid 1 and the run's first process.
	if spec.MaxProcesses > 0 && spec.MaxProcesses < 3 {
		return errSharedLimits
	}
	if mem := g.rc.mem; mem != nil && spec.MemoryBytes != sh.memLimit {
		if spec.MemoryBytes > 0 && (sh.memLimit <= 0 || spec.MemoryBytes < sh.memLimit) {
			if spec.MemoryBytes < memUsage(mem)+sharedHeadroom {
				return errSharedLimits
			}
		}
		sh.memLimit = -1
		if err := setMemoryLimit(mem, spec.MemoryBytes, &sh.swapOff); err != nil {
			return fmt.Errorf("%w: %v", errSharedLimits, err)
		}
		sh.memLimit = spec.MemoryBytes
	}
	if pids := g.rc.pids; pids != nil && spec.MaxProcesses != sh.pidsLimit {
		v := "max"
		if spec.MaxProcesses > 0 {
			v = strconv.FormatInt(spec.MaxProcesses, 10)
		}
		sh.pidsLimit = -1
		if err := pids.write("pids.max", v); err != nil {
			return fmt.Errorf("%w: %v", errSharedLimits, err)
		}
		sh.pidsLimit = spec.MaxProcesses
	}
	g.spec = spec
	g.enforced = nil
	if g.rc.mem != nil && spec.MemoryBytes > 0 {
		g.enforced = append(g.enforced, "memory=cgroup-v"+strconv.Itoa(g.rc.mem.version))
	}
	if g.rc.pids != nil && spec.MaxProcesses > 0 {
		g.enforced = append(g.enforced, "pids=cgroup-v"+strconv.Itoa(g.rc.pids.version))
	}
	if sh.ended {
		sh.baseOOM, sh.basePidsMax = sh.endOOM, sh.endPidsMax
	} else {
		sh.baseOOM, sh.basePidsMax, _ = g.rc.statsWith(sh.read)
	}
	sh.ended = false
	sh.peakReset = g.resetPeak()
	return nil
}

// memUsage is what the memory cgroup holds now.
func memUsage(cg *cgroupDir) int64 {
	if cg.version == 1 {
		return fileInt(filepath.Join(cg.path, "memory.usage_in_bytes"))
	}
	return fileInt(filepath.Join(cg.path, "memory.current"))
}

// setMemoryLimit writes a memory limit (0: none) with swap kept out of it.
// On v1 memory+swap must never be below memory, so the order depends on
// the direction.
func setMemoryLimit(cg *cgroupDir, limit int64, swapOff *bool) error {
	if cg.version == 2 {
		v := "max"
		if limit > 0 {
			v = strconv.FormatInt(limit, 10)
		}
		if err := cg.write("memory.max", v); err != nil {
			return err
		}
		if !*swapOff && cg.exists("memory.swap.max") {
			if err := cg.write("memory.swap.max", "0"); err != nil {
				return err
			}
		}
		*swapOff = true
		return nil
	}
	v := "-1"
	if limit > 0 {
		v = strconv.FormatInt(limit, 10)
	}
	memsw := cg.exists("memory.memsw.limit_in_bytes")
	cur := fileInt(filepath.Join(cg.path, "memory.limit_in_bytes"))
	raise := limit <= 0 || limit > cur
	if memsw && raise {
		if err := cg.write("memory.memsw.limit_in_bytes", v); err != nil {
			return err
		}
	}
	if err := cg.write("memory.limit_in_bytes", v); err != nil {
		return err
	}
	if memsw && !raise {
		if err := cg.write("memory.memsw.limit_in_bytes", v); err != nil {
			return err
		}
	}
	if !*swapOff {
		_ = cg.write("memory.swappiness", "0")
		*swapOff = true
	}
	return nil
}

// resetPeak resets the memory high-water mark to the current usage: on v1
// by writing memory.max_usage_in_bytes, on v2 (Linux 6.12 and later) by
// writing memory.peak through a descriptor the reads then use. It says
// whether that worked; when it did not, Judge reports the fallback peak.
func (g *Cgroups) resetPeak() bool {
	mem := g.rc.mem
	if mem == nil {
		return false
	}
	sh := g.shared
	if mem.version == 1 {
		return sh.write(filepath.Join(mem.path, "memory.max_usage_in_bytes"), "0") == nil
	}
	if sh.peakFile == nil {
		f, err := os.OpenFile(filepath.Join(mem.path, "memory.peak"), os.O_RDWR, 0)
		if err != nil {
			return false
		}
		sh.peakFile = f
	}
	_, err := sh.peakFile.WriteAt([]byte("reset\n"), 0)
	return err == nil
}

// sharedStats is stats for shared cgroups: the counters' growth since
// Begin, and the peak since its reset (0 when it could not be reset).
func (g *Cgroups) sharedStats() (oomKills, pidsMax, peak int64) {
	sh := g.shared
	oom, pm, p := g.rc.statsWith(sh.read)
	oomKills, pidsMax = oom-sh.baseOOM, pm-sh.basePidsMax
	sh.endOOM, sh.endPidsMax, sh.ended = oom, pm, true
	switch {
	case !sh.peakReset:
	case g.rc.mem.version == 1:
		peak = p
	default:
		b := make([]byte, 32)
		if n, err := sh.peakFile.ReadAt(b, 0); n > 0 && (err == nil || n < len(b)) {
			peak, _ = strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimRight(b[:n], "\x00"))), 10, 64)
		}
	}
	return
}

// Close releases what shared cgroups hold open (the counters' files,
// v2's memory.peak); the sandbox calls it when it ends. Other Cgroups have
// nothing to release.
func (g *Cgroups) Close() {
	sh := g.shared
	if sh == nil {
		return
	}
	sh.fdsMu.Lock()
	for _, fd := range sh.fds {
		syscall.Close(fd)
	}
	sh.fds = nil
	sh.fdsMu.Unlock()
	if sh.peakFile != nil {
		sh.peakFile.Close()
		sh.peakFile = nil
	}
}

// killShared SIGKILLs every process in the shared cgroups but the
// sandbox's own (bwrap and its pid 1), once: a run's processes live in the
// sandbox's pid namespace, whose pid 1 sweeps them all when the run ends.
func (g *Cgroups) killShared() int {
	killed := 0
	for _, d := range g.rc.dirs {
	next:
		for _, pid := range readPids(d.path) {
			for _, k := range g.shared.keep {
				if pid == k {
					continue next
				}
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	return killed
}
