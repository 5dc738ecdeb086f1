package warm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// startTimeout bounds a sandbox's start (bwrap, the interpreter, the
// worker's first message); a machine under heavy load can take seconds.
const startTimeout = 60 * time.Second

// sandbox is one namespace sandbox with its worker, serving one request at a
// time.
type sandbox struct {
	cmd  *isolate.Cmd
	dir  string
	conn *net.UnixConn
	// cg are the sandbox's own cgroups, which its runs are born in (nil
	// when the host has none: runs then get cgroups of their own).
	cg *isolate.Cgroups

	msgs chan message // status and clean messages, in order

	// The sandbox's scratch directories (/workspace, /tmp, /dev/shm), which
	// the host lists, collects, wipes and fills through descriptors the
	// worker sent (os.Root keeps every path below them), and its
	// /proc/sysvipc files, which say whether a run left SysV IPC objects.
	workspace *os.Root
	scratch   []*os.Root
	// scratchDirs are the same directories' descriptors, which wipe lists
	// and diskFull reads without opening anything: each open of a root's
	// "." was an openat, four fcntls, a failed epoll registration and a
	// close.
	scratchDirs  []*os.File
	scratchTmpfs []bool // which of them allow emptyTmpfs and holdsOnly (sizedTmpfs)
	ipc          []*os.File
	uid, gid     int // the workspace's owner, the sandbox's user as the host sees it
	// env is the worker's environment, as its ready message reports it:
	// a run whose own is the same keeps it.
	env map[string]string
	// preset is the header the worker holds parsed (header.presettable),
	// nil before the first; only the run holding the sandbox touches it.
	preset []byte
	// idleSince is when the pool last put it back (Pool.trim reads it).
	idleSince time.Time
	dead      chan struct{}
	once      sync.Once
	err       error
}

// message is what the worker sends on its control socket.
type message struct {
	Ready bool `json:"ready"`
	// Env is the worker's environment, in its ready message.
	Env       map[string]string `json:"env"`
	ID        int64             `json:"id"`
	Status    *int              `json:"status"`
	Leftovers int               `json:"leftovers"`
	CPUNs     int64             `json:"cpu_ns"`
	MaxRSS    int64             `json:"maxrss"`
	Clean     *bool             `json:"clean"`
	Error     string            `json:"error"`
}

// parseStatus parses the worker's report of a run's end, "S ID STATUS
// LEFTOVERS CPU_NS MAXRSS" (the one message of every run, and the only
// one not JSON: decoding it as JSON was 6 % of the plugin's CPU on a
// trivial run). False for any other message.
func parseStatus(b []byte, m *message) bool {
	f := bytes.Fields(b)
	if len(f) != 6 || string(f[0]) != "S" {
		return false
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil {
			return false
		}
		n[i] = v
	}
	status := int(n[1])
	*m = message{ID: n[0], Status: &status, Leftovers: int(n[2]), CPUNs: n[3], MaxRSS: n[4]}
	return true
}

// dirPrefix names a sandbox's (empty) host directory, rlm-warm-PID-*: the
// owner's pid lets the next process remove one whose owner died before its
// cleanup (a SIGKILLed plugin, or one that exited while a sandbox it had
// just killed was still being released).
const dirPrefix = "rlm-warm-"

var sweepOnce sync.Once

// sweepStaleDirs removes the sandbox directories of dead owners, once per
// process. They are plain directories (a sandbox works in its own tmpfs;
// what isolate copies back when it ends is regular files and directories),
// never removed while anything is mounted below.
func sweepStaleDirs() {
	sweepOnce.Do(func() {
		ents, _ := os.ReadDir(os.TempDir())
		for _, e := range ents {
			var pid int
			if n, _ := fmt.Sscanf(e.Name(), dirPrefix+"%d-", &pid); n == 1 && e.IsDir() && pid != os.Getpid() && !proctree.Alive(pid) {
				if d := filepath.Join(os.TempDir(), e.Name()); !isolate.HasMountsBelow(d) {
					_ = os.RemoveAll(d)
				}
			}
		}
	})
}

// startSandbox builds a sandbox for cfg and waits for its worker.
func startSandbox(cfg Config) (*sandbox, error) {
	sweepStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "warm"), os.NewFile(uintptr(fds[1]), "worker")
	defer theirs.Close()
	source, err := ForkServerSource(pyMain + pyWorker)
	if err != nil {
		mine.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	defer source.Close()
	env := cfg.Env
	if env == nil {
		env = append(isolate.DefaultEnv(isolate.SandboxWorkdir), "PYTHONDONTWRITEBYTECODE=1")
	}
	cmd, err := isolate.Command(context.Background(), isolate.Spec{
		Spec: isolation.Spec{
			Level:         isolation.Namespace,
			Argv:          ForkServerArgv(cfg.Python, string(cfg.Mode), strconv.Itoa(workerMessageMax), isolate.WarmWorkerArg),
			Env:           env,
			Dir:           dir,
			ReadOnlyPaths: cfg.ReadOnlyPaths,
			// The sandbox's own cgroups: bwrap and the worker, and each run
			// born in them, whose limits Begin writes (runCgroups); 16 until
			// the first run.
			MaxProcesses: 16,
			DiskBytes:    cfg.DiskBytes,
			AllowNetwork: cfg.AllowNetwork,
		},
		TmpBytes:   cfg.TmpBytes,
		ExtraFiles: []*os.File{theirs, source}, // fds 3 and ForkServerSourceFD
		AsInit:     true,
	})
	if err != nil {
		mine.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		mine.Close()
		_ = cmd.Cleanup()
		os.RemoveAll(dir)
		return nil, err
	}
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		_ = cmd.Cleanup()
		os.RemoveAll(dir)
		return nil, err
	}
	sb := &sandbox{cmd: cmd, dir: dir, conn: fc.(*net.UnixConn), msgs: make(chan message, 4), dead: make(chan struct{})}
	ready := make(chan error, 1)
	go sb.read(ready)
	select {
	case err = <-ready:
	case <-time.After(startTimeout):
		err = errors.New("no answer")
	}
	if err != nil {
		sb.kill(err)
		return nil, fmt.Errorf("warm sandbox did not start: %w", err)
	}
	sb.cg = cmd.SharedCgroups()
	return sb, nil
}

func (sb *sandbox) read(ready chan<- error) {
	buf := make([]byte, 1<<16)
	oob := make([]byte, syscall.CmsgSpace(8*4))
	first := true
	for {
		n, oobn, _, _, err := sb.conn.ReadMsgUnix(buf, oob)
		if err == nil && n == 0 {
			err = errors.New("the worker exited")
		}
		var m message
		if err == nil && !parseStatus(buf[:n], &m) {
			err = json.Unmarshal(buf[:n], &m)
		}
		if err == nil && first {
			err = sb.takeDescriptors(oob[:oobn])
		}
		if err != nil {
			if first {
				ready <- err
			}
			sb.kill(err)
			return
		}
		if first {
			first = false
			if !m.Ready {
				ready <- errors.New("unexpected first message")
				sb.kill(errors.New("protocol error"))
				return
			}
			sb.env = m.Env
			ready <- nil
			continue
		}
		select {
		case sb.msgs <- m:
		case <-sb.dead:
			return
		}
	}
}

// takeDescriptors keeps the descriptors of the worker's ready message:
// /workspace, /tmp, /dev/shm, then /proc/sysvipc/{shm,sem,msg}.
func (sb *sandbox) takeDescriptors(oob []byte) error {
	var fds []int
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		syscall.CloseOnExec(fd)
		files[i] = os.NewFile(uintptr(fd), "sandbox")
	}
	if len(files) != 6 {
		for _, f := range files {
			f.Close()
		}
		return fmt.Errorf("the worker sent %d descriptors, want 6", len(files))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(files[0].Fd()), &st); err != nil {
		return err
	}
	sb.uid, sb.gid = int(st.Uid), int(st.Gid)
	sb.scratchDirs, sb.ipc = files[:3], files[3:]
	for _, f := range files[:3] {
		r, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		if err != nil {
			return err // kill closes what is kept so far
		}
		sb.scratch = append(sb.scratch, r)
		sb.scratchTmpfs = append(sb.scratchTmpfs, sizedTmpfs(f))
	}
	sb.workspace = sb.scratch[0]
	return nil
}

// send writes one control message with descriptors attached.
func (sb *sandbox) send(b []byte, files ...*os.File) error {
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	_, _, err := sb.conn.WriteMsgUnix(b, oob, nil)
	return err
}

func (sb *sandbox) alive() bool {
	select {
	case <-sb.dead:
		return false
	default:
		return true
	}
}

// kill ends the sandbox (idempotent) and releases what isolate allocated.
func (sb *sandbox) kill(why error) {
	sb.once.Do(func() {
		sb.err = why
		close(sb.dead)
		sb.conn.Close()
		go func() {
			if sb.cg != nil {
				sb.cg.Close()
			}
			for _, r := range sb.scratch {
				r.Close()
			}
			for _, f := range append(sb.scratchDirs, sb.ipc...) {
				f.Close()
			}
			_ = sb.cmd.Cleanup()
			os.RemoveAll(sb.dir)
		}()
	})
}

// Pid is the host pid of the sandbox's bwrap, and WorkerPid that of its
// worker; tests kill them to prove faults are handled.
func (sb *sandbox) Pid() int       { return sb.cmd.Pid() }
func (sb *sandbox) WorkerPid() int { return sb.cmd.ProgramPid() }

// envMap is a KEY=VALUE list as a map, the last of a repeated key winning
// (as the process that gets the list sees it).
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
