package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// shim stops itself so the parent can put it into cgroups and set its rlimits
// before it execs the program (or bwrap). See the package doc.
const shim = `kill -STOP $$ && exec "$@"`

var (
	availMu    sync.Mutex
	availCache = map[Level]error{}
)

// Available returns nil when level can be used here, or an error that names
// what is missing and how to get it. The result of the real probe run for
// LevelNamespace is cached for the life of the process, and a pass also on
// disk (probecache_linux.go).
func Available(level Level) error {
	switch level {
	case LevelNone:
		return nil
	case LevelProcess:
		if _, err := os.Stat("/bin/sh"); err != nil {
			return fmt.Errorf("isolation \"process\" needs /bin/sh: %w", err)
		}
		return nil
	case LevelNamespace:
	default:
		return level.Check()
	}
	availMu.Lock()
	defer availMu.Unlock()
	if err, ok := availCache[level]; ok {
		return err
	}
	err := namespaceAvailable()
	availCache[level] = err
	return err
}

func bwrapPath() (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("isolation \"namespace\" needs bubblewrap, and bwrap is not in PATH: install it (Debian/Ubuntu: apt-get install bubblewrap) or use isolation = \"process\"")
	}
	return p, nil
}

func setprivPath() (string, error) {
	p, err := exec.LookPath("setpriv")
	if err != nil {
		return "", errors.New("isolation \"namespace\" as root needs setpriv to run the sandbox as an unprivileged user, and setpriv is not in PATH: install it (Debian/Ubuntu: apt-get install util-linux) or use isolation = \"process\"")
	}
	return p, nil
}

func namespaceAvailable() error {
	if _, err := seccompProgram(); err != nil {
		return err
	}
	setpriv := ""
	if os.Geteuid() == 0 {
		p, err := setprivPath()
		if err != nil {
			return err
		}
		setpriv = p
	}
	bw, err := bwrapPath()
	if err != nil {
		return err
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("user namespaces are disabled (user.max_user_namespaces = 0): enable them with sysctl -w user.max_user_namespaces=15000, or use isolation = \"process\"")
	}
	marker := namespaceProbeFile(bw, setpriv)
	if probePassed(marker) {
		return nil
	}
	out, err := exec.Command(bw, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version failed: %v", bw, err)
	}
	if v := strings.TrimSpace(strings.TrimPrefix(string(out), "bubblewrap")); versionLess(v, "0.8.0") {
		return fmt.Errorf("bubblewrap %s is too old: isolation \"namespace\" needs 0.8.0 or newer (--disable-userns, --size); upgrade bubblewrap or use isolation = \"process\"", v)
	}
	dir, err := os.MkdirTemp("", "rlm-isolate-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var stderr bytes.Buffer
	c := &Cmd{Stderr: &stderr, spec: Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: []string{"/usr/bin/true"}, Dir: dir}}, ctx: context.Background(), probe: true, initFD: -1}
	if err := c.Run(); err != nil {
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %v", err)
	}
	if o := c.Outcome(); o.Ending != ending.Exit || o.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		hint := ""
		if strings.Contains(msg, "uid map") || strings.Contains(msg, "namespace") || strings.Contains(msg, "Operation not permitted") {
			hint = " (user namespaces look disabled: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and AppArmor's restrict_unprivileged_userns; a container may need --privileged or a seccomp profile that allows clone(CLONE_NEWUSER))"
		}
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %s%s; use isolation = \"process\" until this is fixed", msg, hint)
	}
	rememberProbe(marker)
	return nil
}

func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// Cmd is one program run under a Spec. Set Stdin, Stdout and Stderr, then
// Start and Wait (or Run). Always defer Cleanup: it kills whatever is left
// and releases cgroups and mounts, and is safe to call more than once.
type Cmd struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	spec  Spec
	ctx   context.Context
	probe bool // Available's own probe: skip the Available check

	cmd      *exec.Cmd
	info     *os.File // read end of bwrap's --info-fd, until the sandbox's pid 1 is known
	initFD   int      // pidfd of the sandbox's pid 1, or -1
	initPid  int      // host pid of the sandbox's pid 1 (namespace), 0 when unknown
	cg       *runCgroups
	ws       *workspace
	st       *stage
	workdir  string // the host directory the program works in
	enforced []string
	start    time.Time

	mu        sync.Mutex
	started   bool
	waited    bool
	reaped    bool // the main process has been (or is being) reaped: never signal its pid again
	killedBy  ending.Reason
	exitedAt  time.Time
	exited    chan struct{}
	waitDone  chan struct{} // closed when Wait has finished (or Start failed)
	waitErr   error
	outcome   Outcome
	leftovers int
}

// Command checks spec and returns a Cmd that has not started. It fails when
// the level is unavailable (see Available) or the spec is inconsistent.
// Nothing is allocated until Start. When ctx is done before the program
// ends, the whole tree is killed and the Outcome says timeout (deadline) or
// cancelled.
func Command(ctx context.Context, spec Spec) (*Cmd, error) {
	if err := checkSpec(&spec); err != nil {
		return nil, err
	}
	if err := Available(spec.Level); err != nil {
		return nil, err
	}
	return &Cmd{spec: spec, ctx: ctx, initFD: -1}, nil
}

func checkSpec(spec *Spec) error {
	if spec.Level == "" {
		spec.Level = LevelProcess
	}
	if err := spec.Level.Check(); err != nil {
		return err
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return errors.New("isolate: Spec.Argv is empty: say which program to run")
	}
	if spec.Dir == "" {
		return errors.New("isolate: Spec.Dir is empty: give the program a working directory")
	}
	abs, err := filepath.Abs(spec.Dir)
	if err != nil {
		return err
	}
	spec.Dir = abs
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("isolate: working directory %s must be an existing directory", abs)
	}
	for name, v := range map[string]int64{"MemoryBytes": spec.MemoryBytes, "MaxProcesses": spec.MaxProcesses, "CPUSeconds": spec.CPUSeconds, "FileSizeBytes": spec.FileSizeBytes, "DiskBytes": spec.DiskBytes, "OpenFiles": spec.OpenFiles, "TmpBytes": spec.TmpBytes, "DataBytes": spec.DataBytes} {
		if v < 0 {
			return fmt.Errorf("isolate: %s is negative (%d)", name, v)
		}
	}
	if spec.OpenFiles > 0 && spec.OpenFiles < int64(16+len(spec.ExtraFiles)) {
		return fmt.Errorf("isolate: OpenFiles = %d is too small to start a runtime: allow at least %d", spec.OpenFiles, 16+len(spec.ExtraFiles))
	}
	if spec.Level == LevelNamespace {
		if len(spec.ExtraFiles) > maxNamespaceExtraFiles {
			return fmt.Errorf("isolate: %d ExtraFiles under LevelNamespace: at most %d are supported (pass more over one of them)", len(spec.ExtraFiles), maxNamespaceExtraFiles)
		}
		for _, p := range spec.ReadOnlyPaths {
			if err := checkReadOnlyPath(p); err != nil {
				return fmt.Errorf("isolate: %w", err)
			}
		}
	}
	return nil
}

// rewriteDir returns list with every entry that is dir or a path below it
// (in env form, every value) pointing to the same place below to instead.
func rewriteDir(list []string, dir, to string, env bool) []string {
	if dir == to {
		return list
	}
	out := make([]string, len(list))
	for i, s := range list {
		prefix := ""
		if env {
			if k, v, ok := strings.Cut(s, "="); ok {
				prefix, s = k+"=", v
			}
		}
		if s == dir {
			s = to
		} else if rest, ok := strings.CutPrefix(s, dir+"/"); ok {
			s = to + "/" + rest
		}
		out[i] = prefix + s
	}
	return out
}

// Pid is the host pid of the started process (bwrap under LevelNamespace).
func (c *Cmd) Pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Workdir is the program's working directory as the program sees it.
func (c *Cmd) Workdir() string {
	if c.spec.Level == LevelNamespace {
		return SandboxWorkdir
	}
	if c.workdir != "" {
		return c.workdir
	}
	return c.spec.Dir
}

// HostWorkdir is where the program's working directory lives on the host
// while it runs: Spec.Dir, or the private copy (see the package doc). Valid
// after Start; the copy is gone after Wait.
func (c *Cmd) HostWorkdir() string {
	if c.workdir != "" {
		return c.workdir
	}
	return c.spec.Dir
}

// CreateAs runs create, which makes files or directories in HostWorkdir
// while the program runs (a REPL session's uploads between cells), so that
// what it makes belongs to the program's user and its working directory
// takes it: under LevelNamespace for a root caller with the calling
// thread's file-system uid and gid set to the sandbox's (the sandbox's
// tmpfs refuses inodes of a uid its user namespace does not map, EOVERFLOW
// for host root), otherwise as the caller.
func (c *Cmd) CreateAs(create func() error) error {
	owner := -1
	if c.spec.Level == LevelNamespace && os.Geteuid() == 0 {
		owner = sandboxHostUID
	}
	return asOwner(owner, create)
}

// Run is Start then Wait.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Start allocates the run's cgroups and working directory and starts the
// program. On error everything allocated is released.
func (c *Cmd) Start() (err error) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("isolate: Start called twice")
	}
	c.started = true
	c.waitDone = make(chan struct{})
	c.mu.Unlock()
	var prelude *preludePipes // LevelNamespace: see fillWorkspace
	defer func() {
		if prelude != nil {
			prelude.close()
		}
		if err != nil {
			if c.info != nil {
				c.info.Close()
				c.info = nil
			}
			c.release()
			c.mu.Lock()
			c.waited, c.reaped = true, true // nothing left to wait for or kill
			c.waitErr = err
			c.mu.Unlock()
			close(c.waitDone)
		}
	}()
	spec := &c.spec
	c.workdir = spec.Dir
	limited := spec.Level != LevelNone
	// A root caller's sandbox runs as host uid 65534, never as host root.
	asNobody := spec.Level == LevelNamespace && os.Geteuid() == 0
	if limited {
		rc, enforced, missing := newRunCgroups(spec)
		c.cg, c.enforced = rc, enforced
		if len(rc.dirs) == 0 && (spec.MemoryBytes > 0 || spec.MaxProcesses > 0) {
			c.enforced = append(c.enforced, "cgroups=unavailable("+strings.Join(missing, "; ")+")")
		}
		// Under LevelNamespace the working directory is a tmpfs inside the
		// sandbox, filled once the sandbox exists (fillWorkspace).
		if spec.DiskBytes > 0 && spec.Level == LevelProcess {
			ws, err := newWorkspace(spec.Dir, spec.DiskBytes)
			if err != nil {
				return err
			}
			c.ws, c.workdir = ws, ws.mnt
			c.enforced = append(c.enforced, "disk=tmpfs")
		}
		if spec.Level == LevelNamespace {
			c.enforced = append(c.enforced, "disk=tmpfs")
		}
		// A run of any limited level cleans up after processes of this
		// kind that were killed before their own cleanup.
		sweepStaleWorkspaces()
	}
	if asNobody {
		st, err := newStage(spec.ReadOnlyPaths)
		if err != nil {
			return err
		}
		c.st = st
	} else {
		c.st = &stage{}
	}
	env := spec.Env
	if env == nil {
		if limited {
			env = DefaultEnv(c.Workdir())
		} else {
			env = os.Environ()
		}
	} else {
		env = rewriteDir(env, spec.Dir, c.Workdir(), true)
	}
	spec.Argv = rewriteDir(spec.Argv, spec.Dir, c.Workdir(), false)
	cmd := &exec.Cmd{
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
		Env:         env,
		ExtraFiles:  append([]*os.File(nil), spec.ExtraFiles...),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		// A process that escaped the kill (possible only without cgroups)
		// must not keep Wait blocked on our output pipes forever.
		WaitDelay: 2 * time.Second,
	}
	var argv []string
	switch spec.Level {
	case LevelNone, LevelProcess:
		argv = spec.Argv
		cmd.Dir = c.workdir
	case LevelNamespace:
		bw, err := bwrapPath()
		if err != nil {
			return err
		}
		prog, err := seccompProgram()
		if err != nil {
			return err
		}
		plan, err := planBwrap(bw, spec, c.st, 3+len(spec.ExtraFiles), prog)
		if err != nil {
			return err
		}
		readyR, readyW, err := os.Pipe()
		if err != nil {
			return err
		}
		goR, goW, err := os.Pipe()
		if err != nil {
			readyR.Close()
			readyW.Close()
			return err
		}
		prelude = &preludePipes{ready: readyR, readyW: readyW, goR: goR, goW: goW}
		cmd.ExtraFiles = append(cmd.ExtraFiles, readyW, goR)
		for _, data := range plan.files {
			r, err := dataPipe(data)
			if err != nil {
				return err
			}
			defer r.Close() // the child has its copy once started
			cmd.ExtraFiles = append(cmd.ExtraFiles, r)
		}
		ir, iw, err := os.Pipe()
		if err != nil {
			return err
		}
		defer iw.Close()
		c.info = ir
		cmd.ExtraFiles = append(cmd.ExtraFiles, iw)
		argv = plan.args
		cmd.Dir = "/"
		if asNobody {
			// Drop to the sandbox uid only after the shim's rlimits are set:
			// root here may lack CAP_SYS_RESOURCE (this CI host's root does),
			// and then prlimit(2) works only on a process of the same uid.
			sp, err := setprivPath()
			if err != nil {
				return err
			}
			id := strconv.Itoa(sandboxHostUID)
			argv = append([]string{sp, "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, argv...)
		}
	}
	if limited {
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"sh", "-c", shim, "sh"}, argv...)
	} else {
		path, err := lookPathIn(argv[0], env)
		if err != nil {
			return err
		}
		cmd.Path, cmd.Args = path, argv
	}
	if err := closeInheritedOnExec(); err != nil {
		return err
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	c.start = time.Now()
	// Tracked, so that a subreaper's sweep for escaped descendants
	// (proctree.KillOrphans, run after every program by the plugins) never
	// mistakes a concurrent run for an orphan and reaps it under our Wait.
	if err := proctree.Start(cmd); err != nil {
		return fmt.Errorf("isolate: start %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	if limited {
		if err := c.constrain(pid); err != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = cmd.Wait()
			proctree.Untrack(pid)
			return err
		}
	}
	if c.info != nil {
		iw := cmd.ExtraFiles[len(cmd.ExtraFiles)-1]
		iw.Close() // only bwrap holds the write end now: EOF if it dies first
		c.watchSandboxInit()
	}
	go c.watchExit(pid)
	go c.watchContext()
	if prelude != nil {
		prelude.closeChildEnds()
		if err := c.fillWorkspace(prelude, asNobody); err != nil {
			c.mu.Lock()
			c.killTreeLocked()
			c.reaped = true
			c.mu.Unlock()
			c.waitSandboxInit(5 * time.Second)
			_ = cmd.Wait()
			proctree.Untrack(pid)
			return err
		}
	}
	return nil
}

// preludePipes are the host's ends of the namespace prelude's two pipes
// (see planBwrap), and the child's ends until it has started.
type preludePipes struct {
	ready, readyW, goR, goW *os.File
}

func (p *preludePipes) closeChildEnds() {
	for _, f := range []**os.File{&p.readyW, &p.goR} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (p *preludePipes) close() {
	p.closeChildEnds()
	for _, f := range []**os.File{&p.ready, &p.goW} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// tmpfsMagic is statfs(2)'s f_type of a tmpfs.
const tmpfsMagic = 0x01021994

// fillWorkspace waits until the sandbox is set up (the prelude's byte),
// copies Spec.Dir into its /workspace tmpfs through /proc/PID/root, keeps a
// descriptor of that tmpfs for Wait to copy the results out of, and lets
// the prelude exec the program. When bwrap failed before the prelude ran,
// it returns nil with nothing filled: the run then ends with bwrap's own
// exit status and message, as any start failure of the sandbox does.
func (c *Cmd) fillWorkspace(p *preludePipes, asNobody bool) error {
	defer p.close()
	var b [1]byte
	if n, _ := p.ready.Read(b[:]); n == 0 {
		return nil
	}
	c.mu.Lock()
	init := c.initPid
	c.mu.Unlock()
	if init <= 0 {
		return errors.New("isolate: the sandbox started but its pid is unknown, so its working directory cannot be filled")
	}
	dir, err := os.OpenFile("/proc/"+strconv.Itoa(init)+"/root"+SandboxWorkdir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("isolate: open the sandbox's working directory: %w", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(dir.Fd()), &st); err != nil || st.Type != tmpfsMagic {
		dir.Close()
		return fmt.Errorf("isolate: the sandbox's %s is not its tmpfs (statfs: %v)", SandboxWorkdir, err)
	}
	owner := -1
	if asNobody {
		owner = sandboxHostUID
	}
	ws, err := attachWorkspace(c.spec.Dir, dir, c.spec.diskBytes(), owner)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ws, c.workdir = ws, ws.mnt
	c.mu.Unlock()
	if _, err := p.goW.Write([]byte("go\n")); err != nil {
		return fmt.Errorf("isolate: start the program: %w", err)
	}
	return nil
}

// watchSandboxInit reads the host pid of the sandbox's pid 1 from bwrap's
// --info-fd and holds a pidfd for it. When the caller kills bwrap, that
// process dies only afterwards (PR_SET_PDEATHSIG), and the pid namespace with
// it; Wait waits on the pidfd so that no sandboxed process outlives Wait even
// without cgroups. Any failure here leaves c.initFD at -1 and the cgroup kill
// as the only sweep.
func (c *Cmd) watchSandboxInit() {
	c.initFD = -1
	defer func() {
		c.info.Close()
		c.info = nil
	}()
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(c.info).Decode(&info); err != nil || info.ChildPid <= 0 {
		return
	}
	// The pid cannot have been reused yet: bwrap, its parent, has not reaped it.
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(info.ChildPid), 0, 0)
	if errno == 0 {
		c.initFD = int(fd)
		c.initPid = info.ChildPid
	}
}

// ProgramPid is the host pid of the program itself, for signals meant for
// it alone (a REPL's SIGINT). Under LevelNone and LevelProcess that is Pid
// (the shim execs the program). Under LevelNamespace the program is the
// only child of the sandbox's pid 1 (bwrap's reaper forks it), so Pid would
// name bwrap, which forwards nothing; 0 when it cannot be found (not
// started yet, or already gone).
func (c *Cmd) ProgramPid() int {
	if c.spec.Level != LevelNamespace {
		return c.Pid()
	}
	c.mu.Lock()
	init, reaped := c.initPid, c.reaped
	c.mu.Unlock()
	if init <= 0 || reaped {
		return 0
	}
	if c.spec.AsInit {
		return init
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(init) + "/task/" + strconv.Itoa(init) + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

const (
	sysPidfdOpen       = 434 // same number on every architecture
	sysPidfdSendSignal = 424
)

// waitSandboxInit waits (up to d) until the sandbox's pid 1, and so its pid
// namespace, is gone, and releases the pidfd.
func (c *Cmd) waitSandboxInit(d time.Duration) {
	if c.initFD < 0 {
		return
	}
	fds := []struct {
		fd             int32
		events, revent int16
	}{{int32(c.initFD), 0x1 /* POLLIN */, 0}}
	ts := syscall.NsecToTimespec(int64(d))
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno != syscall.EINTR {
			break
		}
	}
	syscall.Close(c.initFD)
	c.initFD = -1
}

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

// dataPipe returns the read end of a pipe that holds data and is closed for
// writing, for bwrap's --ro-bind-data and --seccomp.
func dataPipe(data string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if len(data) > 60<<10 {
		r.Close()
		w.Close()
		return nil, errors.New("isolate: generated file too large for a pipe")
	}
	_, err = io.WriteString(w, data)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own files that way, but descriptors inherited from our parent
// or made by C code are not, and os/exec would pass them on (bwrap passes
// everything it gets). ExtraFiles are unaffected: the child gets dup2 copies.
func closeInheritedOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("isolate: list open descriptors: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

func lookPathIn(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[5:]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(file)
}

func (c *Cmd) watchExit(pid int) {
	_, _ = waitid(pid, syscall.WEXITED|wNOWAIT)
	c.mu.Lock()
	c.exitedAt = time.Now()
	c.mu.Unlock()
	close(c.exited)
}

func (c *Cmd) watchContext() {
	if c.ctx == nil || c.ctx.Done() == nil {
		return
	}
	select {
	case <-c.ctx.Done():
		reason := ending.Cancelled
		if errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
			reason = ending.Timeout
		}
		c.kill(reason)
	case <-c.exited:
	}
}

// Kill kills the whole tree now: the process group and, when there are
// cgroups, every process in them (so setsid'd and double-forked daemons too;
// under LevelNamespace the pid namespace dies with bwrap as well). Wait still
// has to be called; the Outcome says cancelled.
func (c *Cmd) Kill() error {
	if c.cmd == nil || c.cmd.Process == nil {
		return errors.New("isolate: Kill before Start")
	}
	c.kill(ending.Cancelled)
	return nil
}

func (c *Cmd) kill(reason ending.Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped || c.cmd == nil || c.cmd.Process == nil {
		return // not started, or the pid and its group id may belong to someone else by now
	}
	select {
	case <-c.exited:
	default:
		if c.killedBy == "" {
			c.killedBy = reason
		}
	}
	c.killTreeLocked()
}

// killTreeLocked kills the process group and every process in the run's
// cgroups. Called with c.mu held and before the main process is reaped (a
// zombie still holds its pid and process group id, so neither can have been
// reused).
func (c *Cmd) killTreeLocked() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	if c.initFD >= 0 {
		// Do not wait for PR_SET_PDEATHSIG to reach it after bwrap dies.
		syscall.Syscall6(sysPidfdSendSignal, uintptr(c.initFD), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	}
	if c.cg != nil {
		_, _ = killCgroupDirs(c.cg.paths(), 5*time.Second)
	}
}

// Wait waits for the program to end, kills whatever it left behind (a
// background `sleep 300 &`, a daemon), copies the working directory back
// when DiskBytes is set, and releases cgroups and mounts. A non-zero exit or
// a signal is not an error: read Outcome. The error is for failures of the
// machinery (copying results back, removing a cgroup).
func (c *Cmd) Wait() error {
	c.mu.Lock()
	if !c.started || c.cmd == nil {
		c.mu.Unlock()
		return errors.New("isolate: Wait before Start")
	}
	if c.waited {
		c.mu.Unlock()
		<-c.waitDone
		return c.waitErr
	}
	c.waited = true
	c.mu.Unlock()
	defer close(c.waitDone)

	<-c.exited
	pid := c.cmd.Process.Pid
	c.mu.Lock()
	if c.cg != nil {
		for _, d := range c.cg.paths() {
			for _, p := range readPids(d) {
				if p != pid {
					c.leftovers++
				}
			}
		}
	}
	c.killTreeLocked()
	c.reaped = true
	c.mu.Unlock()
	c.waitSandboxInit(5 * time.Second)
	werr := c.cmd.Wait()
	proctree.Untrack(pid)
	if c.cmd.ProcessState == nil {
		// Someone else reaped it; nothing is known about how it ended.
		c.outcome = Outcome{Ending: ending.Signal, ExitCode: -1, Enforced: c.enforced}
		errs := []error{fmt.Errorf("isolate: lost the exit status of pid %d: %w", pid, werr)}
		if c.ws != nil {
			errs = append(errs, c.ws.syncBack())
		}
		errs = append(errs, c.release())
		c.waitErr = errors.Join(errs...)
		return c.waitErr
	}
	var errs []error
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) {
		errs = append(errs, werr)
	}
	c.outcome = c.computeOutcome()
	if c.ws != nil {
		if err := c.ws.syncBack(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.release(); err != nil {
		errs = append(errs, err)
	}
	c.waitErr = errors.Join(errs...)
	return c.waitErr
}

func (c *Cmd) computeOutcome() Outcome {
	st := c.cmd.ProcessState
	o := Outcome{ExitCode: st.ExitCode(), Enforced: c.enforced}
	c.mu.Lock()
	o.Duration = c.exitedAt.Sub(c.start)
	killedBy := c.killedBy
	c.mu.Unlock()
	ws, _ := st.Sys().(syscall.WaitStatus)
	var sig syscall.Signal
	signaled := ws.Signaled()
	if signaled {
		sig = ws.Signal()
		o.ExitCode = -1
	} else if c.spec.Level == LevelNamespace && o.ExitCode > 128 && o.ExitCode <= 128+64 {
		// bwrap reports a signal death the shell way, as 128+n; a program
		// that exits 129..192 by itself is reported as killed by that signal.
		signaled, sig, o.ExitCode = true, syscall.Signal(o.ExitCode-128), -1
	}
	if signaled {
		o.Signal, o.SignalNumber = signalName(sig), int(sig)
	}
	var oom, pidsMax, peak int64
	if c.cg != nil {
		oom, pidsMax, peak = c.cg.stats()
	}
	if peak == 0 {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			peak = ru.Maxrss * 1024
		}
	}
	o.PeakMemoryBytes = peak
	o.MemoryLimitHit = oom > 0
	o.ProcessLimitHit = pidsMax > 0
	o.DiskLimitHit = c.ws != nil && c.ws.full()
	cpu := st.UserTime() + st.SystemTime()
	o.Ending = judge(o, signaled, sig, killedBy, c.leftovers, cpu, c.spec.CPUSeconds)
	return o
}

// Outcome reports how the run ended; valid after Wait.
func (c *Cmd) Outcome() Outcome { return c.outcome }

// Cleanup kills anything still running, waits for it, and releases the
// run's cgroups, tmpfs and temp dirs. Safe to call at any point and more
// than once; use it with defer right after Command.
func (c *Cmd) Cleanup() error {
	c.mu.Lock()
	started, waited := c.started, c.waited
	c.mu.Unlock()
	if started {
		if !waited {
			c.kill(ending.Cancelled)
		}
		return c.Wait() // or wait for the Wait already running
	}
	return c.release()
}

func (c *Cmd) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.cg != nil {
		// Kill first, but remove the cgroups last: unmounting the workspace
		// frees its tmpfs pages while they are still charged to the run's
		// memory cgroup, so no offline cgroup lingers holding them.
		if _, err := killCgroupDirs(c.cg.paths(), 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ws != nil {
		if err := c.ws.remove(); err != nil {
			errs = append(errs, err)
		}
		c.ws = nil
	}
	if c.st != nil {
		if err := c.st.remove(); err != nil {
			errs = append(errs, err)
		}
		c.st = nil
	}
	if c.cg != nil {
		if err := c.cg.remove(); err != nil {
			errs = append(errs, err)
		}
		c.cg = nil
	}
	return errors.Join(errs...)
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGSTKFLT: "SIGSTKFLT",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP",
	syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF", syscall.SIGWINCH: "SIGWINCH",
	syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR", syscall.SIGSYS: "SIGSYS",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}
