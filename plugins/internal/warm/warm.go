// Package warm runs programs in warm sandboxes: a namespace sandbox built by
// internal/sandbox/isolate ahead of demand, with a warm Python worker inside it as the
// sandbox's pid 1, which forks a fresh child for each request. A run then
// costs a fork and a cgroup, not an interpreter start and a sandbox built
// from nothing. It is a program.Spawner, used by core/plugin/native for programs
// run under isolation namespace by rlm serve and the daemon (a plugin that
// serves a single run, rlm exec, never builds one: it would cost more than
// it saves).
//
// # Mechanism, and why
//
// One sandbox per slot, reset between requests. Each sandbox serves one
// request at a time; concurrent requests run in different sandboxes, so
// they never share a mount, pid, ipc, uts, network or user namespace. The
// options measured on this project's 2-core VM (see BENCHMARKS.md, "Warm
// isolated execution", for the run and the command):
//
//   - a fresh sandbox per request (bwrap, today's path): bwrap ~4 ms plus an
//     interpreter start, python3 -c pass ~35-70 ms: the spawn-per-request
//     reference, 18 req/s at 32 clients.
//   - fork, then unshare(NEWNS|NEWPID|NEWIPC|NEWUTS) per request from a warm
//     Python: ~17 ms a request for the namespaces alone, and the seccomp
//     filter forbids unshare inside the sandbox anyway.
//   - one sandbox per slot, reset between requests (chosen): a request costs
//     one fork of the small worker (the floor's own cost), the limits
//     written to the sandbox's cgroups when they change, and a wipe of
//     three tmpfs directories.
//
// Per request, nothing of an earlier one survives: the child is a fresh
// fork of a worker that never reads request contents (Python globals,
// environment, modules); the worker, as the sandbox's pid 1, SIGKILLs and
// reaps every other process of the sandbox when the child has exited
// (double-forked and setsid daemons included) and reports; the host then
// wipes /workspace, /tmp and /dev/shm, has the worker remove SysV IPC
// objects if any are left, and checks that no process, file or IPC object
// is left before the sandbox serves again (a sandbox that fails the check
// is discarded and replaced). Abstract unix sockets live in the sandbox's
// network namespace and die with the processes that held them.
//
// The worker does as little as it can per request, because every page it
// writes after a fork is a copy-on-write fault, and those, not the fork,
// are what a request costs (BENCHMARKS.md, "where a warm request's time
// goes"): it blocks in recvmsg, forks, blocks in wait4 and sends a line.
// The host does the rest through descriptors the worker sends once, at
// start: /workspace, /tmp and /dev/shm as os.Roots (every path stays below
// them; no process of the sandbox runs while the host uses them) and the
// sandbox's /proc/sysvipc files. The host writes a request's input files
// into /workspace as the sandbox's user (on threads that hold that file
// system identity for good and run nothing else, asOwner) and lists,
// collects and wipes what the run left; nothing crosses a host path of the
// sandbox.
//
// Limits are those of a cold run, per request. Where the host has
// cgroups, the child is born in the sandbox's own (isolate.SharedCgroups),
// which then hold bwrap, the worker and the run, as a cold run's hold
// bwrap, its reaper and the program: the request's memory and pids limits
// are written to them as they are, the counters are taken and the memory
// peak reset per run, so a run sees only its own limit hits and peak, and
// the interpreter counts toward the memory limit as a cold one does (the
// run's processes raise their OOM score, so the OOM killer takes theirs,
// never the worker). A
// memory limit too small to share them (below what the sandbox holds plus
// 8 MiB) gets the run cgroups of its own, which the child joins before any
// of its code runs, with the pids limit lowered by the two processes a
// cold run's tree holds besides the program. The child sets the request's
// rlimits on itself (isolate.Rlimits), and the ending is judged by the
// same rule as isolate.Cmd's (isolate.Cgroups.Judge), so memory_limit,
// process_limit, cpu_limit, disk_limit, timeout and output_limit read the
// same. The working directory is the sandbox's own tmpfs (isolate's, of the
// size a cold run of the request would get, isolate.WorkspaceBytes, so the
// disk cap is the same).
//
// The worker is pid 1 (bwrap --as-pid-1, isolate.Spec.AsInit): the kernel
// drops signals sent to a namespace's init from inside it unless it has a
// handler, so `kill -9 $PPID` or `kill -9 -1` in a program cannot take the
// worker down, and it reaps every orphan. It is non-dumpable, so
// /proc/1/mem is closed to programs. ptrace is refused by the seccomp
// filter.
//
// # Faults
//
// A sandbox that dies (its bwrap or worker killed from outside) fails the
// request running in it with ended_by crashed, never a re-run; requests
// waiting for a sandbox are not affected, and a replacement is started at
// once. A sandbox that cannot be started makes runs fall back to a cold
// sandbox (the same isolation, slower).
//
// # Known limits
//
//   - POSIX message queues (mq_open) persist in the sandbox's ipc namespace
//     and cannot be listed without mounting an mqueue filesystem; a queue
//     one request creates under a name a later request in the same sandbox
//     guesses is visible to it. SysV IPC is wiped.
//   - Every child shares the worker's string hash seed and its few
//     imported modules (PYTHONHASHSEED semantics differ from a fresh
//     interpreter in that one respect), as with plugins/python's fork
//     server.
package warm

import (
	_ "embed"
	"strconv"
	"strings"

	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

//go:embed pymain.py
var pyMain string

//go:embed worker.py
var pyWorker string

// PythonMain is the script semantics shared by rlm's Python fork servers
// (run_main: a file run as __main__ in a forked child), for a fork server
// to prepend to its own loop.
func PythonMain() string { return pyMain }

// Mode is how a request's child runs the program.
type Mode string

const (
	// ModePython runs argv[1] as __main__ in the forked child itself, with
	// sys.argv = argv[1:] (argv[0] is the interpreter, the worker's own).
	ModePython Mode = "python"
	// ModeExec execs argv (bash, node, a compiled binary) in the child.
	ModeExec Mode = "exec"
)

// Config is what a sandbox is built with. Runs with equal Configs share
// sandboxes; everything else about a run (memory, processes, CPU, file
// size, wall time, output) is per request.
type Config struct {
	Mode Mode
	// Python runs the worker inside the sandbox: the runtime's own
	// interpreter for ModePython, any python3 for ModeExec.
	Python string
	// ReadOnlyPaths are what the sandbox shows of the host besides /usr
	// (the interpreter's prefix, ...), as isolate.Spec.ReadOnlyPaths.
	ReadOnlyPaths []string
	// DiskBytes caps the working directory (a tmpfs; 0 is isolate's
	// default), TmpBytes /tmp and /dev/shm, as in isolate.Spec.
	DiskBytes, TmpBytes int64
	AllowNetwork        bool
	// Env is the environment most runs in the sandbox have, with the
	// sandbox's paths (RunEnv): the worker starts with it, and a run
	// whose environment is the same keeps it instead of rebuilding it in
	// its child (~0.15 ms of copy-on-write faults a run). Nil starts the
	// worker with isolate.DefaultEnv; runs are right either way.
	Env []string
}

// RunEnv is program.BaseEnv in the sandbox's working directory plus
// extra (a runtime's own variables): what a run of that runtime has
// unless its request adds variables, for Config.Env.
func RunEnv(extra ...string) []string {
	return append(program.BaseEnv(isolate.SandboxWorkdir), extra...)
}

func (c Config) key() string {
	return strings.Join([]string{string(c.Mode), c.Python, strings.Join(c.ReadOnlyPaths, "\x00"),
		strconv.FormatInt(c.DiskBytes, 10), strconv.FormatInt(c.TmpBytes, 10), strconv.FormatBool(c.AllowNetwork),
		strings.Join(c.Env, "\x00")}, "\x01")
}
