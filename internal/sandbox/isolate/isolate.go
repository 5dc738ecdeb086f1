// Package isolate runs one untrusted program (an interpreter started by a
// runtime plugin) under one of three isolation levels and reports how it ended.
//
// # Levels
//
//   - LevelNone: a plain child process in its own process group. Limits are
//     not enforced; Kill still kills the whole group.
//   - LevelProcess: its own process group, rlimits (CPU seconds, open files,
//     file size, and processes and data size when no cgroup is available), a scrubbed environment, a private working directory, and
//     memory/pids cgroups when the host offers them (Outcome.Enforced says
//     which mechanism held which limit).
//   - LevelNamespace (Linux): everything above, run by bubblewrap inside new
//     user, mount, pid, network, ipc, uts and cgroup namespaces, as uid 65534
//     with every capability dropped, no further user namespaces, the host
//     filesystem read-only with only /usr, the /bin and /lib links, a few /etc
//     files and Spec.ReadOnlyPaths visible, a private size-capped /tmp and
//     /dev/shm, the working directory as the only writable place, and a
//     seccomp filter built with libseccomp from seccomp_blocklist.txt.
//
// Asking for a level that cannot work here is an error that says why and how
// to fix it (Available); there is no silent downgrade.
//
// # Why bubblewrap
//
// bwrap is Debian's packaged, audited setup tool behind Flatpak: it does the
// namespace, mount, uid-map and capability dance in C before exec, which Go
// cannot do safely in a forked child of a multi-threaded runtime. Hand-rolled
// clone/mount code would be more code to trust, not less.
//
// # Why libseccomp, generated ahead of time
//
// bwrap --seccomp takes a compiled classic-BPF program. It is generated from
// seccomp_blocklist.txt by seccompgen with libseccomp (the reference
// implementation used by systemd, runc and Flatpak, which gets the
// architecture check, the x32 ABI and per-arch numbering right) and embedded
// as bytes, so building rlm needs neither cgo nor libseccomp; a test fails
// when the list changes without regenerating. The pure-Go alternative
// (elastic/go-seccomp-bpf) was not available from the module proxy here, and
// hand-written BPF is exactly the kind of code not to trust.
//
// # Why a /bin/sh shim, stopped, instead of prlimit or a re-exec helper
//
// Go's os/exec has no hook between fork and exec, and cgroup v1 (this
// project's CI host) has no CLONE_INTO_CGROUP. The child is therefore started
// as `/bin/sh -c 'kill -STOP $$; exec "$@"'`: while it sits stopped, the
// parent moves it into the run's cgroups and sets its rlimits with
// prlimit(2), then resumes it, and it execs the program (or bwrap). Nothing
// runs unconstrained, errors surface in Go rather than as an ambiguous exit
// status, and no helper mode has to be wired into every binary that imports
// this package. The cost is one sh exec (about 1 ms).
//
// # Running as root
//
// bwrap started by root (without setuid) maps the sandbox's uid to host uid
// 0: no capabilities, but still root for every check that compares uids. On
// this project's CI host such a sandbox rewrote the host's
// /proc/sys/kernel/core_pattern. So when the caller is root, the sandbox is
// started through setpriv(1) as host uid 65534 (after the shim's rlimits and
// cgroups are set: root there lacks CAP_SYS_RESOURCE, so prlimit(2) on a
// process of another uid fails). Everything bwrap binds must then be
// reachable by uid 65534: Spec.ReadOnlyPaths that uid 65534 cannot reach
// are bind-mounted read-only under a private traversable directory first
// (pyenv keeps Python under /root, mode 0700; bwrap's --ro-bind-fd does not
// help, since bwrap resolves the descriptor back to its path), and the input
// files copied into the working directory are given to 65534 (below). That
// stage directory (rlm-isolate-ro-PID-*) is the one mount a run makes on
// the host; it is unmounted when the run ends, and one left by a killed
// process is unmounted by ReapOwner or by the next process's sweep. TMPDIR
// must be traversable by others (/tmp is).
//
// # Working directory contract
//
// The caller puts the program's input files in Spec.Dir before Start and
// reads what the program produced from Spec.Dir after Wait returns. Whether
// the program worked in Spec.Dir itself or in a private copy is invisible to
// the caller, with one rule: only regular files and directories come back.
//
//   - LevelNone, and LevelProcess without DiskBytes: the program works in
//     Spec.Dir itself.
//   - LevelProcess with DiskBytes: Start copies Spec.Dir (directories,
//     regular files, symlinks as links) into a tmpfs of exactly DiskBytes
//     mounted on the host (the total the program can write, not only each
//     file). Mounting it needs root (CAP_SYS_ADMIN); without it DiskBytes is
//     an error, not ignored.
//   - LevelNamespace: the working directory is a tmpfs of DiskBytes
//     (DefaultDiskBytes when 0) that bwrap mounts at /workspace inside the
//     sandbox's own mount namespace. Nothing of it exists on the host, it
//     needs no privilege, and it is gone with the sandbox whatever ends rlm
//     (SIGKILL included). The program starts behind a /bin/sh prelude that
//     says when the sandbox is set up and then waits: Start copies Spec.Dir
//     in through /proc/PID/root, opens the tmpfs's root and keeps that
//     descriptor, and lets the prelude exec the program (one dash exec,
//     about 1 ms). When the sandbox has died, the held descriptor still
//     reaches the detached tmpfs, so Wait copies the results out of it and
//     then closes it, which frees the memory.
//
// Wait mirrors a copy back into Spec.Dir: new and changed regular files are
// written, directories created, and files and directories the program
// removed are removed. Symlinks, fifos and devices the program made are not
// copied back, and the copy goes through os.Root, so a link the program
// planted can never make Wait write or delete outside Spec.Dir, and reading
// Spec.Dir afterwards never follows such a link. Inputs larger than the cap
// fail Start with an error that says so.
//
// tmpfs pages count toward the memory cgroup too, so keep DiskBytes below
// MemoryBytes or a full disk may end as memory_limit (the default keeps it
// at half of MemoryBytes).
//
// # Known limits
//
//   - LevelProcess runs the program as the caller's uid (root, if rlm runs as
//     root) with the host filesystem visible; only LevelNamespace hides it.
//   - AllowNetwork shares the host's network namespace, which includes the
//     host's abstract unix sockets; the peer sees uid 65534 (or the caller's
//     uid), never root.
//   - Without cgroups, memory falls back to RLIMIT_DATA (blind to shared
//     memory) and processes to RLIMIT_NPROC (ignored for root, and shared by
//     all processes of the uid); Outcome.Enforced says so. A setsid daemon can
//     then outlive a LevelProcess run; under LevelNamespace it cannot (the pid
//     namespace dies with bwrap).
//   - The rlm process's death kills the started process through
//     PR_SET_PDEATHSIG, which the kernel ties to the OS thread that forked it;
//     Go keeps that thread unless a goroutine exits while locked to it.
//
// # What Outcome can and cannot tell
//
// bwrap reports a program killed by signal N as exit status 128+N, so under
// LevelNamespace a program that calls exit(128+N) itself is reported as
// killed by signal N. Timeouts are the context's deadline; output limits are
// the caller's (it owns the pipes).
package isolate

import (
	"errors"
	"os"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
)

// Level is how strongly a program is isolated (defined in core/isolation,
// which names the levels without linking this package).
type Level = isolation.Level

// The isolation levels, weakest first.
const (
	LevelNone      = isolation.None
	LevelProcess   = isolation.Process
	LevelNamespace = isolation.Namespace
)

// SandboxWorkdir is where the working directory appears inside a namespace
// sandbox. It is a fixed path so programs and tracebacks look the same on
// every host.
const SandboxWorkdir = "/workspace"

// HomeAlias is a symlink to SandboxWorkdir inside a namespace sandbox: the
// home directory E2B's users (and the agents written for its sandboxes)
// assume their files are in, so `/home/user/data.csv` and `cd ~` find the
// workspace (core/sandbox gives it as $HOME to commands).
const HomeAlias = "/home/user"

// DefaultTmpBytes caps the private /tmp and /dev/shm when Spec.TmpBytes is 0.
const DefaultTmpBytes = 64 << 20

// DefaultDiskBytes caps the working directory under LevelNamespace when
// Spec.DiskBytes is 0: a program that writes without end fills a 1 GiB
// tmpfs and ends as disk_limit instead of filling the host's disk. The cap
// is at most half of MemoryBytes when that is set, because tmpfs pages are
// charged to the run's memory cgroup: a full disk must end as disk_limit,
// not as memory_limit.
const DefaultDiskBytes = 1 << 30

// Spec describes one run: the sandbox a runtime asks for
// (isolation.Spec, which core.Limits.SandboxSpec derives from a request's
// limits; zero limits mean "no limit of that kind", and see the package
// doc for the DiskBytes contract) and what only the host sets. Under
// LevelNone, a nil Env inherits the caller's environment as os/exec does;
// at the other levels it means DefaultEnv(the program's workdir).
type Spec struct {
	isolation.Spec

	OpenFiles int64 // RLIMIT_NOFILE
	// DataBytes is RLIMIT_DATA even when a memory cgroup holds MemoryBytes:
	// a long-lived interpreter (a REPL session) then sees a runaway
	// allocation fail (MemoryError, state kept) before the cgroup's OOM
	// killer ends the whole session. 0 = only the MemoryBytes fallback.
	DataBytes int64
	TmpBytes  int64 // size of the private /tmp and of /dev/shm (namespace); 0 = DefaultTmpBytes

	// AsInit makes the program the sandbox's pid 1 (LevelNamespace only;
	// bwrap --as-pid-1) instead of a child of bwrap's reaper. The kernel
	// then drops every signal sent from inside the sandbox that the program
	// has no handler for, SIGKILL and SIGSTOP included, so a warm worker that
	// forks each request's program (plugins/internal/warm) cannot be killed or stopped
	// by that program; and the program reaps every orphan of the sandbox.
	AsInit bool

	// ExtraFiles become fd 3, 4, ... in the program, e.g. the runtime's own
	// protocol pipes. No other descriptor of the caller is inherited: Start
	// marks every descriptor of the calling process above stderr
	// close-on-exec (Go opens its own that way already; this catches ones
	// inherited from rlm's parent or opened by C code).
	ExtraFiles []*os.File
}

// DefaultEnv is the environment a program gets when Spec.Env is nil.
func DefaultEnv(workdir string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + workdir,
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
	}
}

// Outcome is what is known about a finished run.
type Outcome struct {
	// Ending is exit, signal (one we did not send), timeout, cancelled (the
	// context was cancelled or Kill was called), memory_limit,
	// process_limit, disk_limit or cpu_limit. Output limits are the
	// caller's to enforce and report (it owns the pipes).
	Ending   ending.Reason
	ExitCode int    // the exit status, or -1 when killed by a signal
	Signal   string // "SIGKILL" etc. when killed by a signal
	// SignalNumber is Signal's number (0 when none), so callers need no
	// platform table to turn the name back into a wait status.
	SignalNumber int
	// PeakMemoryBytes is the memory cgroup's high-water mark, or the largest
	// RSS of the waited-for processes when there is no cgroup; 0 when unknown.
	PeakMemoryBytes int64
	// Limit hits seen during the run, even when they did not end it (a
	// program may catch a failed fork and exit 0).
	MemoryLimitHit, ProcessLimitHit, DiskLimitHit bool
	Duration                                      time.Duration
	// Enforced lists how each requested limit was held, e.g.
	// "memory=cgroup-v1", "pids=cgroup-v1", "nproc=rlimit", "disk=tmpfs".
	Enforced []string
}

// ErrNotSupported is wrapped by errors for a level this OS cannot provide.
var ErrNotSupported = errors.New("isolation level not supported")

// diskBytes is the size of the working directory's tmpfs under
// LevelNamespace (see DefaultDiskBytes).
func (s *Spec) diskBytes() int64 {
	if s.DiskBytes > 0 {
		return s.DiskBytes
	}
	if s.MemoryBytes > 0 && s.MemoryBytes/2 < DefaultDiskBytes {
		return max(s.MemoryBytes/2, 1<<20)
	}
	return DefaultDiskBytes
}

func (s *Spec) tmpBytes() int64 {
	if s.TmpBytes > 0 {
		return s.TmpBytes
	}
	return DefaultTmpBytes
}

// AvailableLevels lists the levels this host can enforce, weakest first.
func AvailableLevels() []Level {
	var out []Level
	for _, l := range isolation.Levels {
		if Available(l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// Strongest is the strongest level this host can enforce: what a server
// running code from the network should use unless told otherwise.
func Strongest() Level {
	levels := AvailableLevels()
	if len(levels) == 0 {
		return LevelNone
	}
	return levels[len(levels)-1]
}
