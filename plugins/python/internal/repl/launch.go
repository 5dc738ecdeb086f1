package repl

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// Launcher starts an interpreter: argv with exactly env, in dir, with extra
// as descriptors 3, 4, ... and stdout and stderr connected to the capture
// pipes (stdin is /dev/null). Config.Launch selects one; nil is the plain
// child of ChildLauncher. The python plugin passes one that starts the
// interpreter inside internal/sandbox/isolate's sandbox, so a session lives in the same
// kind of sandbox as a program, restarts included.
type Launcher func(argv, env []string, dir string, extra []*os.File, stdout, stderr *os.File) (Proc, error)

// Proc is a started interpreter, as a Process drives it.
type Proc interface {
	// Pid is the interpreter's host pid, the target of SIGINT; 0 when it
	// is not known (yet, or any more).
	Pid() int
	// Kill kills the interpreter and everything it started. It may be
	// called more than once and concurrently with Wait.
	Kill()
	// Wait blocks until the interpreter has exited and everything it
	// started is gone, and says how it ended. Called exactly once.
	Wait() Exit
}

// Exit is how an interpreter ended.
type Exit struct {
	Desc   string // "exit status 1", "killed by SIGKILL", "killed by the memory limit"
	Signal string // "SIGKILL", when a signal ended it
	Code   int32  // the exit status, or 128+signal
	// EndedBy is a limit that ended it (MEMORY_LIMIT, PROCESS_LIMIT, ...),
	// or ENDED_BY_UNSPECIFIED when nothing but the interpreter itself did.
	EndedBy ending.Reason
}

// tagEnv names the environment variable that marks every process started by
// one driver. Children inherit it, including those that left the driver's
// process group with setsid, so proctree.KillTree finds them when the
// session ends.
const tagEnv = "RLM_REPL_SESSION"

// ChildLauncher starts the interpreter as a plain child in its own process
// group, dying with the host thread that started it (Pdeathsig). Kill
// SIGKILLs the group and every process carrying the session's tag or
// descending from the interpreter, including those that left the group with
// setsid, and reaps what it killed.
func ChildLauncher(tag string, rlimits []Rlimit) Launcher {
	return func(argv, env []string, dir string, extra []*os.File, stdout, stderr *os.File) (Proc, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.ExtraFiles = extra
		proctree.Configure(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("repl: start %s: %w", argv[0], err)
		}
		for _, rl := range rlimits {
			lim := unix.Rlimit{Cur: rl.Cur, Max: rl.Max}
			if lim.Max == 0 {
				lim.Max = lim.Cur
			}
			if err := unix.Prlimit(cmd.Process.Pid, rl.Resource, &lim, nil); err != nil {
				proctree.KillGroup(cmd.Process.Pid)
				_ = cmd.Wait()
				return nil, fmt.Errorf("repl: setting resource limit %d: %w", rl.Resource, err)
			}
		}
		return &childProc{cmd: cmd, tag: tag, exited: make(chan struct{})}, nil
	}
}

type childProc struct {
	cmd    *exec.Cmd
	tag    string
	exited chan struct{}
}

func (c *childProc) Pid() int { return c.cmd.Process.Pid }

func (c *childProc) Kill() {
	killed := proctree.KillTree(c.cmd.Process.Pid, tagEnv+"="+c.tag)
	<-c.exited // the interpreter itself is reaped by Wait
	proctree.Reap(killed, 2*time.Second)
}

func (c *childProc) Wait() Exit {
	_ = c.cmd.Wait()
	close(c.exited)
	st := c.cmd.ProcessState
	if st == nil {
		return Exit{Desc: "unknown exit", Code: -1}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		name := unix.SignalName(sig)
		if name == "" {
			name = sig.String()
		}
		return Exit{Desc: "killed by " + name, Signal: name, Code: 128 + int32(sig)}
	}
	return Exit{Desc: fmt.Sprintf("exit status %d", st.ExitCode()), Code: int32(st.ExitCode())}
}
