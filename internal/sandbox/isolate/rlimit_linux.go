package isolate

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// The start shim's constraints: cgroups joined and rlimits set while it
// is stopped (see the package doc).

// constrain waits for the shim to stop, puts it in the run's cgroups, sets
// its rlimits, and lets it exec the program.
func (c *Cmd) constrain(pid int) error {
	code, err := waitid(pid, syscall.WSTOPPED|syscall.WEXITED|wNOWAIT)
	if err != nil {
		return fmt.Errorf("isolate: waiting for the start shim: %w", err)
	}
	if code != cldStopped {
		return errors.New("isolate: the start shim (/bin/sh) ended before the program started")
	}
	if c.cg != nil {
		if err := c.cg.join(pid); err != nil {
			return fmt.Errorf("isolate: %w", err)
		}
	}
	enforced, err := setRlimits(pid, &c.spec, c.cg != nil && c.cg.mem != nil, c.cg != nil && c.cg.pids != nil)
	if err != nil {
		return err
	}
	c.enforced = append(c.enforced, enforced...)
	return syscall.Kill(pid, syscall.SIGCONT)
}

const (
	wNOWAIT    = 0x1000000
	pPID       = 1
	cldStopped = 5
)

// waitid waits for a state change of pid without reaping it (with wNOWAIT)
// and returns siginfo's si_code.
func waitid(pid int, options int) (int32, error) {
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), uintptr(options), 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return *(*int32)(unsafe.Pointer(&info[8])), nil
	}
}

type rlimit struct{ cur, max uint64 }

func prlimit(pid int, resource int, cur, max uint64) error {
	lim := rlimit{cur, max}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

const (
	rlimitNPROC = 6
	rlimitCORE  = 4
)

// processesOf counts the processes and threads (RLIMIT_NPROC counts both)
// owned by uid.
func processesOf(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil && int(st.Uid) == uid {
			if tasks, err := os.ReadDir("/proc/" + e.Name() + "/task"); err == nil {
				n += len(tasks)
			} else {
				n++
			}
		}
	}
	return n
}

// Rlimit is one resource limit, as prlimit(2) sets it.
type Rlimit struct {
	Name     string // "cpu", "nproc", ...: what Outcome.Enforced calls it
	Resource int    // RLIMIT_*
	Cur, Max uint64
}

// Rlimits are the resource limits a limited run's first process gets. A
// caller that starts a long-lived interpreter itself (a REPL whose pipes it
// owns) applies the same ones to be what LevelProcess means. Memory and
// processes are included only as fallbacks for a caller that holds no
// memory or pids cgroup.
func Rlimits(spec Spec, memCgroup, pidsCgroup bool) []Rlimit {
	lims := []Rlimit{{"core", rlimitCORE, 0, 0}}
	if spec.CPUSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later for a program that catches it.
		lims = append(lims, Rlimit{"cpu", syscall.RLIMIT_CPU, uint64(spec.CPUSeconds), uint64(spec.CPUSeconds + 1)})
	}
	if spec.OpenFiles > 0 {
		lims = append(lims, Rlimit{"nofile", syscall.RLIMIT_NOFILE, uint64(spec.OpenFiles), uint64(spec.OpenFiles)})
	}
	if spec.FileSizeBytes > 0 {
		lims = append(lims, Rlimit{"fsize", syscall.RLIMIT_FSIZE, uint64(spec.FileSizeBytes), uint64(spec.FileSizeBytes)})
	}
	if spec.MaxProcesses > 0 && !pidsCgroup {
		// The fallback only: the kernel ignores it for root, and it counts every
		// process of the uid, so concurrent sandboxes (all uid 65534) share it.
		n := spec.MaxProcesses
		if uid := os.Geteuid(); uid != 0 {
			// The program runs as the caller's uid, whose other processes
			// (a desktop session, other runs) count too: allow MaxProcesses
			// on top of those, or every run of a busy user would fail.
			n += int64(processesOf(uid))
		}
		lims = append(lims, Rlimit{"nproc", rlimitNPROC, uint64(n), uint64(n)})
	}
	if spec.MemoryBytes > 0 && !memCgroup {
		// The fallback, per process and blind to shared memory; Enforced says
		// so. RLIMIT_DATA rather than RLIMIT_AS: it counts private writable
		// memory but not address space merely reserved, which node's V8
		// reserves by the gigabyte ("Failed to reserve virtual memory for
		// CodeRange" under a 512 MiB RLIMIT_AS).
		lims = append(lims, Rlimit{"data", syscall.RLIMIT_DATA, uint64(spec.MemoryBytes), uint64(spec.MemoryBytes)})
	} else if spec.DataBytes > 0 {
		lims = append(lims, Rlimit{"data", syscall.RLIMIT_DATA, uint64(spec.DataBytes), uint64(spec.DataBytes)})
	}
	return lims
}

func setRlimits(pid int, spec *Spec, memCgroup, pidsCgroup bool) ([]string, error) {
	var enforced []string
	for _, l := range Rlimits(*spec, memCgroup, pidsCgroup) {
		if err := prlimit(pid, l.Resource, l.Cur, l.Max); err != nil {
			return nil, fmt.Errorf("isolate: set RLIMIT_%s: %w", strings.ToUpper(l.Name), err)
		}
		if l.Name != "core" {
			enforced = append(enforced, l.Name+"=rlimit")
		}
	}
	if spec.MemoryBytes > 0 && !memCgroup {
		enforced = append(enforced, "memory=rlimit-data(does not cover shared memory)")
	}
	return enforced, nil
}
