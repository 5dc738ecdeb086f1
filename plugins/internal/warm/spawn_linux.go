package warm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Run describes one request for Spawner.
type Run struct {
	Limits core.Limits
	// ReturnFiles says whether produced files are wanted: only then do they
	// cross back from the sandbox.
	ReturnFiles bool
	// Fallback starts the program when no warm sandbox can be had (the
	// pool cannot start one here): a cold sandbox of the same level. Nil
	// makes Spawn fail with program.ErrNotStarted instead.
	Fallback program.Spawner
	// Staged is the run's workspace when it exists only in the sandbox
	// (program.StagedWorkspace): its code file is the run's one input,
	// sent with the header and written by the run's child (no host thread
	// takes the sandbox's identity for it), and the files the run produced
	// go back to it (CollectStaged); the directory Spawn is given is the
	// sandbox's.
	Staged *program.Workspace
}

// Spawner returns a program.Spawner that runs one program in one of the
// pool's sandboxes, waiting for a free one (until ctx is done).
func (p *Pool) Spawner(ctx context.Context, r Run) program.Spawner {
	return &spawner{pool: p, ctx: ctx, run: r}
}

type spawner struct {
	pool *Pool
	ctx  context.Context
	run  Run
}

var requestSeq atomic.Int64

// started counts programs started in warm sandboxes, for tests that prove
// no run is ever started twice.
var started atomic.Int64

// envKept counts runs whose environment was the worker's own, for the test
// that proves the child then keeps it rather than rebuilding it.
var envKept atomic.Int64

// presetRuns counts runs whose child took its header from the worker's
// preset (header.presettable), for the test that checks they do.
var presetRuns atomic.Int64

// workerMessageMax is the largest control message the worker reads (its
// argv[2], MESSAGE_MAX): small enough that its receive buffer comes from
// Python's small-object allocator (a larger one is a malloc and realloc
// whose block ends cost the worker copy-on-write faults every request).
const workerMessageMax = 448

// maxPreset bounds a preset header: with the request's id (at most 20
// digits) and a NUL it fits workerMessageMax. A longer header (a very long
// interpreter path) is sent whole with each run.
const maxPreset = workerMessageMax - 21

// hostPidsHeld are the processes of a cold run's tree besides the program
// (bwrap outside the sandbox and its reaper inside), which count toward a
// cold run's pids limit; a warm run's cgroup holds only the program's tree.
const hostPidsHeld = 2

type inputFile struct {
	Path  string
	Size  int64
	Mtime int64
	Mode  uint32
}

// header is what the child reads first from the request socket. It is
// sent as NUL-separated fields (encode), not JSON: json.loads in a freshly
// forked child touches enough of the json module's objects to cost ~0.2 ms
// of copy-on-write faults a run, a split ~0.02 ms.
type header struct {
	Argv []string
	// Env is the program's environment; KeepEnv says it is the worker's
	// own (the usual case: the sandbox's default environment), which the
	// child then leaves as it is.
	Env     map[string]string
	KeepEnv bool
	Dir     string
	// Staged names the code file the child writes into Dir from the frame
	// after the header (a staged run's, Run.Staged); "" for none.
	Staged  string
	Rlimits [][3]uint64
	// Wait says the child must wait for "G" (the host moves it into
	// cgroups of the run's own first); a child born in the sandbox's own
	// cgroups goes on at once.
	Wait bool
}

// presettable says whether the worker may keep h (encoded as hb) as its
// preset. The worker never holds what a request brought (its memory is
// every later child's), so only a header made of the sandbox's own
// settings qualifies: the worker's environment, and argv the interpreter
// and the code file without arguments. Its rlimits come from the limits,
// its directory and file name from the plugin.
func (h *header) presettable(hb []byte) bool {
	return h.KeepEnv && len(h.Argv) <= 2 && len(hb) <= maxPreset
}

// encode writes h as the worker's child parses it (worker.py's
// read_header): wait ("1" or "0"), dir, the staged file's name (or ""),
// the number of rlimits and three numbers each, the number of arguments
// and the arguments, then "-" for
// the worker's own environment or the number of variables and KEY=VALUE
// each, every field followed by a NUL. No field can hold a NUL: argv and
// the environment come from exec-able strings, checked again here.
func (h *header) encode() ([]byte, error) {
	var b []byte
	field := func(s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("%q holds a NUL byte", s)
		}
		b = append(append(b, s...), 0)
		return nil
	}
	num := func(n uint64) { b = append(strconv.AppendUint(b, n, 10), 0) }
	if h.Wait {
		b = append(b, '1', 0)
	} else {
		b = append(b, '0', 0)
	}
	if err := field(h.Dir); err != nil {
		return nil, err
	}
	if strings.Contains(h.Staged, "/") {
		return nil, fmt.Errorf("staged file %q is not a name", h.Staged)
	}
	if err := field(h.Staged); err != nil {
		return nil, err
	}
	num(uint64(len(h.Rlimits)))
	for _, r := range h.Rlimits {
		num(r[0])
		num(r[1])
		num(r[2])
	}
	num(uint64(len(h.Argv)))
	for _, a := range h.Argv {
		if err := field(a); err != nil {
			return nil, err
		}
	}
	if h.KeepEnv {
		b = append(b, '-', 0)
		return b, nil
	}
	keys := slices.Sorted(maps.Keys(h.Env))
	num(uint64(len(keys)))
	for _, k := range keys { // no name holds '=': envMap split at the first
		if err := field(k + "=" + h.Env[k]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Spawn implements program.Spawner. dir holds the request's files; argv and
// env name it, and are rewritten to the sandbox's working directory.
func (s *spawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	sb, err := s.pool.get(s.ctx)
	if err != nil {
		if errors.Is(err, errBroken) {
			if s.run.Fallback == nil {
				return nil, fmt.Errorf("%w: %w", program.ErrNotStarted, err)
			}
			return s.run.Fallback.Spawn(argv, dir, env, stdin, stdout, stderr)
		}
		return nil, err
	}
	p, err := s.start(sb, argv, dir, env, stdin, stdout, stderr)
	if err != nil {
		// The sandbox's state is unknown now: never reuse it.
		sb.kill(err)
		return nil, err
	}
	return p, nil
}

func (s *spawner) start(sb *sandbox, argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (*process, error) {
	l := s.run.Limits
	var inputs []inputFile
	var staged []byte // a staged run's code file, which its child writes
	h := header{Dir: isolate.SandboxWorkdir}
	if ws := s.run.Staged; ws != nil {
		h.Staged, staged = ws.Code()
	} else {
		var err error
		if inputs, err = manifest(dir); err != nil {
			return nil, err
		}
		// The input files go straight into the sandbox's (empty)
		// workspace; no process of the sandbox runs until the worker
		// forks the child.
		if err := sb.putInputs(dir, inputs); err != nil {
			return nil, fmt.Errorf("warm sandbox: writing the input files: %w", err)
		}
	}
	// The request's limits as a cold run of it gets them.
	spec := isolate.Spec{Spec: l.SandboxSpec(isolation.Namespace, nil)}
	cg := runCgroups(sb, spec)
	ok := false
	defer func() {
		if !ok {
			_ = cg.Remove()
		}
	}()
	h.Argv = isolate.RewritePaths(argv, dir, isolate.SandboxWorkdir, false)
	h.Env = envMap(isolate.RewritePaths(env, dir, isolate.SandboxWorkdir, true))
	for _, r := range isolate.Rlimits(spec, cg.Memory(), cg.Pids()) {
		h.Rlimits = append(h.Rlimits, [3]uint64{uint64(r.Resource), r.Cur, r.Max})
	}
	// bwrap sets PWD for a cold run (and for the worker): a warm run gets
	// it too, so that its environment is a cold run's.
	h.Env["PWD"] = isolate.SandboxWorkdir
	h.Wait = !cg.Shared()
	h.KeepEnv = sb.env != nil && maps.Equal(h.Env, sb.env)
	if h.KeepEnv {
		envKept.Add(1)
	}
	hb, err := h.encode()
	if err != nil {
		return nil, fmt.Errorf("warm sandbox: %w", err)
	}

	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// Both ends block, and neither joins the poller: the host reads the
	// child's "H" with one blocking recvmsg, when it is needed (childPid),
	// and so the child's write of it wakes nothing. The receive timeout
	// bounds that read should a child never say it (crashGrace, as Wait
	// bounds the worker's report).
	err = syscall.SetsockoptInt(pair[0], syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	if err == nil {
		tv := syscall.NsecToTimeval(crashGrace.Nanoseconds())
		err = syscall.SetsockoptTimeval(pair[0], syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		syscall.Close(pair[0])
		syscall.Close(pair[1])
		return nil, err
	}
	conn, theirs := os.NewFile(uintptr(pair[0]), "request"), os.NewFile(uintptr(pair[1]), "request-worker")
	id := requestSeq.Add(1)
	msg := strconv.AppendInt(nil, id, 10)
	// A header the worker holds as its preset goes as an empty frame: the
	// child takes the preset, parsed once by the worker, instead of
	// parsing the header itself (~23 copy-on-write faults a run). A new
	// one rides with the request and replaces the preset.
	preset := h.presettable(hb)
	if preset && !bytes.Equal(hb, sb.preset) {
		msg = append(append(msg, 0), hb...)
	}
	err = sb.send(msg, stdin, stdout, stderr, theirs)
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("warm sandbox: %w", err)
	}
	frame := hb
	if preset {
		sb.preset, frame = hb, nil
		presetRuns.Add(1)
	}
	// The header is far below the socket's buffer: it never blocks. A
	// staged code file may be larger: the child reads it before anything
	// else.
	frames := appendFrame(nil, frame)
	if h.Staged != "" {
		frames = appendFrame(frames, staged)
	}
	if _, err = conn.Write(frames); err != nil {
		conn.Close()
		return nil, fmt.Errorf("warm sandbox: %w", err)
	}

	p := &process{s: s, sb: sb, cg: cg, id: id, conn: conn, dir: dir, inputs: inputs}
	if !h.Wait {
		// Born in the sandbox's cgroups, the child goes on at once: its
		// "H" is read when needed (childPid), by which time it waits in
		// the socket.
		ok = true
		started.Add(1)
		return p, nil
	}
	// Read here, not from a goroutine beside a wait for the sandbox's
	// death: only the worker (until it forks) and then the child hold the
	// other end of conn, and the child says "H" before it runs anything,
	// so a sandbox that dies, or a child that fails, closes conn and ends
	// this read.
	pid := p.childPid()
	if pid <= 0 {
		conn.Close()
		if !sb.alive() {
			return nil, fmt.Errorf("warm sandbox died: %v", sb.err)
		}
		return nil, errors.New("warm sandbox: the run did not start")
	}
	if err := cg.Join(pid); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		conn.Close()
		return nil, err
	}
	if _, err := conn.Write([]byte{'G'}); err != nil {
		conn.Close()
		return nil, err
	}
	ok = true
	started.Add(1)
	p.pid = pid
	return p, nil
}

// runCgroups gives a run the cgroups that hold its limits: the sandbox's
// own when they can (the child is born in them, so a run costs no cgroup
// created, joined or removed; see isolate.SharedCgroups), or cgroups of its
// own, which the child joins before it runs any code.
func runCgroups(sb *sandbox, spec isolate.Spec) *isolate.Cgroups {
	// The cgroups' judge has never been told the CPU budget here (a cold
	// run's is): kept so, for now, to change nothing of how runs end.
	spec.CPUSeconds = 0
	if sb.cg != nil && sb.cg.Begin(spec) == nil {
		// They hold bwrap and the worker besides the run, as a cold run's
		// hold bwrap and its reaper: the request's limits as they are.
		return sb.cg
	}
	if spec.MaxProcesses > hostPidsHeld {
		spec.MaxProcesses -= hostPidsHeld
	}
	return isolate.NewCgroups(spec)
}

// manifest lists the regular files below dir with what the worker needs to
// recreate them exactly (the modification time too, so that an untouched
// input does not come back as modified).
func manifest(dir string) ([]inputFile, error) {
	var out []inputFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, inputFile{Path: filepath.ToSlash(rel), Size: info.Size(), Mtime: info.ModTime().UnixNano(), Mode: uint32(info.Mode().Perm())})
		return nil
	})
	return out, err
}

// putInputs copies the request's files from the host directory dir into
// the sandbox's workspace, with their modes and modification times (so
// that an untouched input does not come back as modified). They are
// created as the sandbox's user: the workspace is a tmpfs of the
// sandbox's user namespace, where the host's root has no uid to own a
// file by (mkdir and open fail with EOVERFLOW).
func (sb *sandbox) putInputs(dir string, inputs []inputFile) error {
	if len(inputs) == 0 {
		return nil
	}
	// Opened as the host, before the thread takes the sandbox's identity.
	srcs := make([]*os.File, len(inputs))
	defer func() {
		for _, f := range srcs {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, f := range inputs {
		var err error
		if srcs[i], err = os.Open(filepath.Join(dir, filepath.FromSlash(f.Path))); err != nil {
			return err
		}
	}
	write := func() error {
		for i, f := range inputs {
			if err := sb.putInput(f, srcs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if os.Geteuid() == 0 && sb.uid != 0 {
		return asOwner(sb.uid, sb.gid, write)
	}
	return write()
}

// putInput creates one input file in the workspace from src.
func (sb *sandbox) putInput(f inputFile, src io.Reader) error {
	rel := filepath.FromSlash(f.Path)
	if d := filepath.Dir(rel); d != "." {
		if err := sb.workspace.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	dst, err := sb.workspace.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(f.Mode))
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(src, f.Size))
	if err == nil {
		err = dst.Chmod(os.FileMode(f.Mode))
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	t := time.Unix(0, f.Mtime)
	return sb.workspace.Chtimes(rel, t, t)
}

// diskFull says whether the run filled its workspace (a tmpfs of the
// run's disk cap, isolate's).
func (sb *sandbox) diskFull() bool {
	var st syscall.Statfs_t
	if controlFD(sb.scratchDirs[0], func(fd int) error { return syscall.Fstatfs(fd, &st) }) != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < 64<<10 || st.Ffree == 0
}

// controlFD calls f with d's descriptor, which d cannot close meanwhile.
func controlFD(d *os.File, f func(fd int) error) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// holdsOnly says whether the sandbox's workspace holds nothing but ws's
// code file (which is never a produced file), from two stats: the usual
// end of a run that wrote nothing, which then needs no listing.
func (sb *sandbox) holdsOnly(ws *program.Workspace) bool {
	if !sb.scratchTmpfs[0] {
		return false
	}
	name, _ := ws.Code()
	var dir, code unix.Stat_t
	err := controlFD(sb.scratchDirs[0], func(fd int) error {
		if err := unix.Fstat(fd, &dir); err != nil {
			return err
		}
		return unix.Fstatat(fd, name, &code, unix.AT_SYMLINK_NOFOLLOW)
	})
	// One entry besides "." and "..": 60 bytes (see emptyTmpfs).
	return err == nil && dir.Size == 60 && code.Mode&unix.S_IFMT == unix.S_IFREG
}

// emptyTmpfs says whether the tmpfs directory d has no entries, from one
// fstat: tmpfs counts a directory's size as 20 bytes per entry, "." and
// ".." included (BOGO_DIRENT_SIZE), so an empty one is 40 bytes. Any other
// answer leaves it to a listing.
func emptyTmpfs(d *os.File) bool {
	var st syscall.Stat_t
	err := controlFD(d, func(fd int) error { return syscall.Fstat(fd, &st) })
	return err == nil && st.Size == 40
}

// sizedTmpfs says whether the fast paths of emptyTmpfs and holdsOnly
// hold for d: it is on a tmpfs and, empty as a new sandbox's scratch
// directories are, its size is the 40 bytes they assume.
func sizedTmpfs(d *os.File) bool {
	var fs syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	return controlFD(d, func(fd int) error { return syscall.Fstatfs(fd, &fs) }) == nil && fs.Type == tmpfsMagic && emptyTmpfs(d)
}

// dirNames lists the directory d from its start (skipping "." and "..").
func dirNames(d *os.File) ([]string, error) {
	var names []string
	err := controlFD(d, func(fd int) error {
		if _, err := syscall.Seek(fd, 0, io.SeekStart); err != nil {
			return err
		}
		buf := make([]byte, 8192)
		for {
			n, err := syscall.ReadDirent(fd, buf)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n <= 0 {
				return nil
			}
			_, _, names = syscall.ParseDirent(buf[:n], -1, names)
		}
	})
	return names, err
}

// appendFrame appends b to buf as the child reads a frame: its length
// (four bytes, big-endian), then its bytes. The frames go in one write.
func appendFrame(buf, b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(buf, uint32(len(b))), b...)
}

// readHello reads the child's "H" and returns its host pid, translated by
// the kernel from the credentials it attached; 0 on failure.
func readHello(c *os.File) int {
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var n, oobn int
	rerr := rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, err = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_CMSG_CLOEXEC)
			if err != syscall.EINTR {
				return err != syscall.EAGAIN
			}
		}
	})
	if rerr != nil || err != nil || n != 1 || buf[0] != 'H' {
		return 0
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil {
			return int(cred.Pid)
		}
	}
	return 0
}

// process is one program running in a warm sandbox.
type process struct {
	s  *spawner
	sb *sandbox
	cg *isolate.Cgroups
	// pid is the child's host pid when Spawn read it (a run in cgroups of
	// its own, which the host moves it into), else 0: Pid says so, and
	// Kill and Wait learn it through childPid.
	pid    int
	id     int64
	conn   *os.File // the run's request socket
	dir    string
	inputs []inputFile

	hello    sync.Once
	helloPid int // the child's pid from its "H" (childPid); 0 when none came

	mu     sync.Mutex
	killed bool
	ended  bool // the worker reported the run's end: its processes are gone
}

// Pid is the child's host pid when Spawn knows it, else 0 (the run's Kill
// finds it): program.Exec's own group kills then do nothing, and the
// worker's sweep and Kill end the run's processes.
func (p *process) Pid() int { return p.pid }

// childPid is the child's host pid, from the "H" it sends before it runs
// anything, read once; 0 when it never said it: the run did not start.
func (p *process) childPid() int {
	p.hello.Do(func() { p.helloPid = readHello(p.conn) })
	return p.helloPid
}

// OrphansContained implements program.Contained: the program runs in the
// sandbox's pid namespace, whose init reaps what it leaves.
func (p *process) OrphansContained() bool { return true }

// Kill implements program.Killer: every process of the run's cgroups, and
// the child's group (all that holds without cgroups; the worker's sweep
// gets the rest when the child has exited).
//
// Once the run has ended it does nothing: its pids may have been reused,
// and the sandbox's own cgroups may hold the next run already. It holds
// the lock throughout, so that Wait, and so the sandbox's return to the
// pool, waits until it has killed.
func (p *process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.killed = true
	if pid := p.childPid(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	p.cg.Kill()
}

// crashGrace is how long Wait waits for the worker's report once the
// run's processes are dead, before it declares the sandbox broken.
const crashGrace = 30 * time.Second

func (p *process) Wait() (isolation.Exit, error) {
	var m message
	select {
	case m = <-p.sb.msgs:
	case <-p.sb.dead:
		return p.crashed(fmt.Errorf("the warm sandbox died during the run: %v", p.sb.err))
	}
	if m.Status == nil || m.ID != p.id {
		p.sb.kill(errors.New("protocol error"))
		return p.crashed(fmt.Errorf("the warm sandbox answered out of turn: %+v", m))
	}
	if p.childPid() <= 0 {
		// The child ended before it said "H": before it ran anything.
		p.sb.kill(errors.New("a run did not start"))
		return p.crashed(errors.New("warm sandbox: the run did not start"))
	}
	if !p.cg.Shared() {
		// The worker swept its namespace; this is the run's cgroups' own
		// sweep. The sandbox's own cgroups hold nothing but the namespace.
		p.cg.Kill()
	}
	p.mu.Lock()
	p.ended = true
	var killedBy ending.Reason
	if p.killed {
		killedBy = ending.Cancelled
	}
	p.mu.Unlock()
	o := p.cg.Judge(syscall.WaitStatus(*m.Status), time.Duration(m.CPUNs), killedBy, m.Leftovers, p.sb.diskFull(), m.MaxRSS)
	ex := isolation.Exit{Code: o.ExitCode, PeakMemoryBytes: o.PeakMemoryBytes, Isolation: isolation.Namespace, EndedBy: o.Ending}
	if o.Signal != "" {
		ex.Signal, ex.Code = syscall.Signal(o.SignalNumber), 0
	}
	var ferr error
	if ws := p.s.run.Staged; ws != nil {
		if p.s.run.ReturnFiles && !p.sb.holdsOnly(ws) {
			ws.CollectStaged(p.sb.workspace)
		}
	} else {
		ferr = p.files()
	}
	p.s.pool.willReturn()
	if !p.resetQuickly() {
		go p.release()
	}
	if ferr != nil {
		return ex, fmt.Errorf("collecting produced files: %w", ferr)
	}
	return ex, nil
}

// files lists the sandbox's workspace and brings back the files created
// or changed, as many and as large as program.Workspace.Finish will keep;
// the others become sparse placeholders of their size, so that Finish
// omits exactly the same files as for a cold run. The run's processes are
// all gone (the worker swept them), so nothing changes the workspace
// while the host reads it.
func (p *process) files() error {
	if !p.s.run.ReturnFiles {
		return nil
	}
	before := map[string][2]int64{}
	for _, f := range p.inputs {
		before[f.Path] = [2]int64{f.Size, f.Mtime}
	}
	type cand struct {
		rel         string
		size, mtime int64
	}
	var cands []cand
	const maxListed = 100000
	err := fs.WalkDir(p.sb.workspace.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // unreadable or not a regular file: not a produced file
		}
		if len(cands) >= maxListed {
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		c := cand{rel: rel, size: info.Size(), mtime: info.ModTime().UnixNano()}
		if old, ok := before[c.rel]; ok && old == [2]int64{c.size, c.mtime} {
			return nil
		}
		cands = append(cands, c)
		return nil
	})
	if err != nil || len(cands) == 0 {
		return err
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].rel < cands[j].rel })
	l := p.s.run.Limits
	maxFiles := int(l.MaxFiles)
	if maxFiles <= 0 {
		maxFiles = program.DefaultMaxFiles
	}
	maxFile := l.MaxFileBytes
	if maxFile <= 0 {
		maxFile = program.DefaultMaxFile
	}
	maxBytes := maxFile * int64(maxFiles)
	root, err := os.OpenRoot(p.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	put := func(c cand, src io.Reader, size int64) error {
		if d := filepath.Dir(c.rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		f, err := root.OpenFile(c.rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		var n int64
		if src != nil {
			n, err = io.Copy(f, io.LimitReader(src, size))
		}
		if err == nil && size > n {
			err = f.Truncate(size)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		t := time.Unix(0, c.mtime)
		return root.Chtimes(c.rel, t, t)
	}
	var errs []error
	var total int64
	kept := 0
	for _, c := range cands {
		if kept >= maxFiles || c.size > maxFile || total+c.size > maxBytes {
			if err := put(c, nil, c.size); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		total += c.size
		kept++
		src, err := p.sb.workspace.OpenFile(c.rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err == nil {
			err = put(c, src, c.size)
			src.Close()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release wipes the sandbox's scratch directories, has the worker remove
// SysV IPC objects if the run left any, and returns the sandbox to the
// pool; one that cannot be reset is discarded.
func (p *process) release() {
	defer p.conn.Close()
	fail := func(err error) {
		p.sb.kill(fmt.Errorf("the sandbox could not be reset: %w", err))
		p.s.pool.returned(p.sb, false)
	}
	if !p.sb.alive() {
		_ = p.cg.Remove()
		p.s.pool.returned(p.sb, false)
		return
	}
	err := p.sb.wipe(p.stagedName())
	// Remove uncharges nothing now: the wipe freed the tmpfs pages first.
	_ = p.cg.Remove()
	if err != nil {
		fail(err)
		return
	}
	left, err := p.sb.ipcLeft()
	if err != nil {
		fail(err)
		return
	}
	if left {
		if err := p.sb.send(strconv.AppendInt([]byte("ipc "), p.id, 10)); err != nil {
			fail(err)
			return
		}
		var m message
		select {
		case m = <-p.sb.msgs:
		case <-p.sb.dead:
			p.s.pool.returned(p.sb, false)
			return
		case <-time.After(crashGrace):
			fail(errors.New("no answer"))
			return
		}
		if m.ID != p.id || m.Clean == nil || !*m.Clean {
			fail(fmt.Errorf("%+v", m))
			return
		}
	}
	p.s.pool.returned(p.sb, true)
}

// resetQuickly returns the sandbox to the pool before Wait returns, when
// the run left nothing but a staged code file (emptied) and no SysV IPC
// object: a few system calls, cheaper than a goroutine started (and a
// thread woken) for release. Anything else is release's, after the run's
// result has gone, as a large tree to remove may take a while.
func (p *process) resetQuickly() bool {
	if !p.sb.alive() || !p.sb.emptied(p.stagedName()) {
		return false
	}
	if left, err := p.sb.ipcLeft(); err != nil || left {
		return false
	}
	_ = p.cg.Remove()
	p.conn.Close()
	p.s.pool.returned(p.sb, true)
	return true
}

// stagedName is a staged run's code file's name, "" for another run.
func (p *process) stagedName() string {
	if ws := p.s.run.Staged; ws != nil {
		name, _ := ws.Code()
		return name
	}
	return ""
}

// emptied unlinks staged (when not "") from the workspace and says
// whether the scratch directories are then all empty, from one fstat each
// (emptyTmpfs): a staged run's workspace most often holds its code file
// alone. false says only that a listing must tell.
func (sb *sandbox) emptied(staged string) bool {
	if staged != "" && sb.scratchTmpfs[0] {
		// Gone already, or a directory now: a listing sees to it.
		_ = controlFD(sb.scratchDirs[0], func(fd int) error { return unix.Unlinkat(fd, staged, 0) })
	}
	for i, d := range sb.scratchDirs {
		if !sb.scratchTmpfs[i] || !emptyTmpfs(d) {
			return false
		}
	}
	return true
}

// wipe empties /workspace, /tmp and /dev/shm and checks they are empty.
// staged is emptied's.
func (sb *sandbox) wipe(staged string) error {
	if sb.emptied(staged) {
		return nil
	}
	for i, r := range sb.scratch {
		if sb.scratchTmpfs[i] && emptyTmpfs(sb.scratchDirs[i]) {
			continue
		}
		names, err := dirNames(sb.scratchDirs[i])
		if err != nil {
			return err
		}
		if len(names) == 0 {
			continue
		}
		for _, n := range names {
			// A file (or a link) goes with one unlinkat; a directory, or
			// anything that refuses, through the root.
			if controlFD(sb.scratchDirs[i], func(fd int) error { return unix.Unlinkat(fd, n, 0) }) == nil {
				continue
			}
			if r.RemoveAll(n) != nil {
				// A directory the program made unreadable or unwritable
				// stops RemoveAll when the host is not root.
				unlock(r, n)
				if err := r.RemoveAll(n); err != nil {
					return err
				}
			}
		}
		if sb.scratchTmpfs[i] && emptyTmpfs(sb.scratchDirs[i]) {
			continue
		}
		if names, err = dirNames(sb.scratchDirs[i]); len(names) > 0 || err != nil {
			return fmt.Errorf("%s still holds %v (%v)", r.Name(), names, err)
		}
	}
	return nil
}

// unlock makes the directory name below r and every directory below it
// readable, writable and searchable by its owner.
func unlock(r *os.Root, name string) {
	if fi, err := r.Lstat(name); err != nil || !fi.IsDir() {
		return
	}
	_ = r.Chmod(name, 0o700)
	d, err := r.Open(name)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		unlock(r, filepath.Join(name, n))
	}
}

// ipcLeft says whether the sandbox's ipc namespace holds SysV IPC
// objects: each /proc/sysvipc file has a header line, then a line per
// object.
func (sb *sandbox) ipcLeft() (bool, error) {
	buf := make([]byte, 4096) // the header line and the first object's
	for _, f := range sb.ipc {
		n := 0
		err := controlFD(f, func(fd int) (err error) {
			n, err = syscall.Pread(fd, buf, 0)
			return err
		})
		if err != nil {
			return false, err
		}
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 && i+1 < n {
			return true, nil
		}
	}
	return false, nil
}

// crashed reports a run whose sandbox died under it: ended_by crashed,
// never a re-run.
func (p *process) crashed(err error) (isolation.Exit, error) {
	p.Kill()
	_ = p.cg.Remove()
	p.conn.Close()
	return isolation.Exit{Code: -1, EndedBy: ending.Crashed, Isolation: isolation.Namespace}, err
}
