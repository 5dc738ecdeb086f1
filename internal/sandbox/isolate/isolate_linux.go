package isolate

import (
	"context"
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

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// A run: its Spec checked (Command), started (Start) and watched; the
// other files hold how levels are probed (levels_linux.go), how the start
// shim is constrained (rlimit_linux.go), the namespace prelude
// (sandboxinit_linux.go) and how a run ends (wait_linux.go).

// shim stops itself so the parent can put it into cgroups and set its rlimits
// before it execs the program (or bwrap). See the package doc.
const shim = `kill -STOP $$ && exec "$@"`

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
