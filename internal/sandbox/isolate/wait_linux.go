package isolate

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// How a run ends: the watchers, Kill, Wait, the Outcome and the release
// of what the run held.

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
