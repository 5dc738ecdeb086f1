package isolate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Under LevelNamespace: the sandbox's pid 1, its prelude and the
// working directory filled in through it.

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
