package isolate

import (
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core/ending"
)

// Cgroups are the memory and pids cgroups of one run whose process the
// caller starts by other means than Cmd: a warm worker inside a sandbox
// forks it (plugins/internal/warm). The caller joins that process before it runs any
// of the program's code, and afterwards asks Judge how the run ended, which
// decides exactly as Cmd's Outcome does. Zero limits create no limit of
// that kind (the cgroup still counts, so Stats and Kill work).
type Cgroups struct {
	rc       *runCgroups
	spec     Spec
	enforced []string
	shared   *sharedState // a warm sandbox's own cgroups (SharedCgroups), nil for a run's own
}

// NewCgroups creates a run's cgroups for spec.MemoryBytes and
// spec.MaxProcesses (the other fields are ignored). A host without usable
// cgroups gets empty Cgroups: Rlimits(spec, false, false) then holds the
// limits, as for Cmd.
func NewCgroups(spec Spec) *Cgroups {
	rc, enforced, _ := newRunCgroups(&spec)
	return &Cgroups{rc: rc, spec: spec, enforced: enforced}
}

// Memory and Pids say whether a memory and a pids cgroup exist, for
// Rlimits' fallbacks.
func (g *Cgroups) Memory() bool { return g.rc.mem != nil }

// Pids says whether a pids cgroup exists.
func (g *Cgroups) Pids() bool { return g.rc.pids != nil }

// Enforced lists how the limits are held ("memory=cgroup-v1", ...).
func (g *Cgroups) Enforced() []string { return g.enforced }

// Join moves pid (a host pid) into the cgroups.
// Shared cgroups need no join: their runs are born inside.
func (g *Cgroups) Join(pid int) error {
	if g.shared != nil {
		return nil
	}
	return g.rc.join(pid)
}

// Kill SIGKILLs every process in the cgroups until they are empty and
// returns how many it signalled.
func (g *Cgroups) Kill() int {
	if g.shared != nil {
		return g.killShared()
	}
	n, _ := killCgroupDirs(g.rc.paths(), 5*time.Second)
	return n
}

// Stats reads OOM kills, pids-limit hits and the memory high-water mark.
func (g *Cgroups) Stats() (oomKills, pidsMax, peak int64) {
	if g.shared != nil {
		return g.sharedStats()
	}
	return g.rc.stats()
}

// Shared says whether these are a sandbox's own cgroups (SharedCgroups).
func (g *Cgroups) Shared() bool { return g.shared != nil }

// Judge says how a run in these cgroups ended, from its main process's
// wait status and CPU time, what killed it (ending.Timeout or
// ending.Cancelled when the caller did, "" otherwise), how many other
// processes were still alive when it exited, and whether its working
// directory was full. peakFallback is used when no memory cgroup knows the
// peak (the process's maximum RSS).
func (g *Cgroups) Judge(ws syscall.WaitStatus, cpu time.Duration, killedBy ending.Reason, leftovers int, diskFull bool, peakFallback int64) Outcome {
	o := Outcome{ExitCode: ws.ExitStatus(), Enforced: g.enforced}
	var sig syscall.Signal
	if ws.Signaled() {
		sig = ws.Signal()
		o.ExitCode = -1
		o.Signal, o.SignalNumber = signalName(sig), int(sig)
	}
	oom, pidsMax, peak := g.Stats()
	if peak == 0 {
		peak = peakFallback
	}
	o.PeakMemoryBytes = peak
	o.MemoryLimitHit = oom > 0
	o.ProcessLimitHit = pidsMax > 0
	o.DiskLimitHit = diskFull
	o.Ending = judge(o, ws.Signaled(), sig, killedBy, leftovers, cpu, g.spec.CPUSeconds)
	return o
}

// Remove kills what is left and removes the cgroups. Call it after the
// run's tmpfs files are gone, so their pages are uncharged first.
// Shared cgroups are the sandbox's, removed with it: Remove leaves them.
func (g *Cgroups) Remove() error {
	if g.shared != nil {
		return nil
	}
	return g.rc.remove()
}

// judge is the one rule for how a run ended, shared by Cmd and Cgroups. A
// limit counts only when the run did not end cleanly (a program may catch
// a failed fork and exit 0).
func judge(o Outcome, signaled bool, sig syscall.Signal, killedBy ending.Reason, leftovers int, cpu time.Duration, cpuSeconds int64) ending.Reason {
	cleanExit := !signaled && o.ExitCode == 0 && leftovers == 0
	switch {
	case o.MemoryLimitHit && !cleanExit:
		return ending.MemoryLimit
	case killedBy != "":
		return killedBy
	case signaled && (sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpuSeconds > 0 && cpu >= time.Duration(cpuSeconds)*time.Second)):
		return ending.CPULimit
	case o.ProcessLimitHit && !cleanExit:
		return ending.ProcessLimit
	case o.DiskLimitHit && !cleanExit:
		return ending.DiskLimit
	case signaled:
		return ending.Signal
	}
	return ending.Exit
}

// RewritePaths returns list with every entry that is dir or a path below it
// pointing to the same place below to instead (with env, the values of
// NAME=VALUE entries), as Cmd does for Spec.Argv and Spec.Env.
func RewritePaths(list []string, dir, to string, env bool) []string {
	return rewriteDir(list, dir, to, env)
}
