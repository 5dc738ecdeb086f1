package python

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/python/internal/repl"
)

// OpenSession starts one REPL (plugin.Sessions: core/plugin's adapter
// serves the stream once the interpreter is up).
func (s *Server) OpenSession(ctx context.Context, open core.SessionOptions) (*plugin.Session, error) {
	t, err := s.Tool()
	if err != nil {
		return nil, fmt.Errorf("python runtime unavailable: %w", err)
	}
	// Requirements are installed once, before the interpreter starts, as
	// for a program (the same cache); the set is on its import path and,
	// under namespace, mounted read-only in its sandbox.
	inst, err := s.Install(ctx, t, open.Requirements, open.Install, open.Limits)
	if err != nil {
		return nil, err
	}
	if inst != nil && inst.Failed != nil {
		f := inst.Failed
		return nil, plugin.Invalid(fmt.Errorf("the session's requirements did not install: %s\n%s", f.Error, strings.TrimSpace(f.Stdout+f.Stderr)))
	}
	readOnly := native.ReadOnlyPaths(t)
	if inst != nil {
		readOnly = native.ReadOnlyPaths(t, inst.Dir)
	}
	dir, err := os.MkdirTemp("", "rlm-session-")
	if err != nil {
		return nil, fmt.Errorf("creating the session directory: %w", err)
	}
	wd := &workdir{dir: dir}
	level, launch, rlimits, err := sessionIsolation(open.Limits, readOnly, wd.started)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	env, err := program.Environ(append(program.BaseEnv(dir), "PYTHONDONTWRITEBYTECODE=1"), open.Env)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if inst != nil {
		env = append(env, useInstalled(inst.Dir, nil)...)
	}
	proc, err := repl.Start(ctx, repl.Config{
		Python:         t.Exe,
		Env:            env,
		Dir:            dir,
		MaxOutputBytes: open.Limits.MaxOutputBytes,
		Context:        open.Context,
		Launch:         launch,
		Rlimits:        rlimits,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting python: %w", err)
	}
	return &plugin.Session{
		REPL:           proc,
		RuntimeVersion: t.Version,
		Options:        plugin.SessionOptions{Isolation: string(level), Dir: wd.get, CreateAs: wd.createAs},
		Close: func() {
			proc.Close()
			os.RemoveAll(dir)
		},
	}, nil
}

// workdir is where a session's interpreter works on the host: the session
// directory, or under namespace the sandbox's own /workspace tmpfs (reached
// through a descriptor isolate holds), a private copy that changes with
// every restart and reaches the session directory only when the
// interpreter exits (see internal/sandbox/isolate). Cell files go where the
// interpreter sees them now, created as its user.
type workdir struct {
	dir string
	mu  sync.Mutex
	cmd *isolate.Cmd // the sandbox of the current interpreter, if any
}

func (w *workdir) started(c *isolate.Cmd) {
	w.mu.Lock()
	w.cmd = c
	w.mu.Unlock()
}

// createAs creates as the current sandbox's user (see isolate.Cmd.CreateAs).
func (w *workdir) createAs(create func() error) error {
	w.mu.Lock()
	c := w.cmd
	w.mu.Unlock()
	if c == nil {
		return create()
	}
	return c.CreateAs(create)
}

func (w *workdir) get() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return w.cmd.HostWorkdir()
	}
	return w.dir
}

// sessionIsolation says how a REPL session's interpreter is started for the
// requested level. The interpreter lives as long as the session and talks
// over pipes the driver owns (descriptors 3 to 6), which every level passes
// through unchanged.
//
//   - none: a plain child in its own process group.
//   - process: the same, with the rlimits internal/sandbox/isolate gives a program
//     (memory through RLIMIT_DATA, so a runaway allocation is a MemoryError
//     in the cell, not a dead session; processes; file size), the scrubbed
//     environment and a private directory.
//   - namespace: started by internal/sandbox/isolate exactly like a program (user, mount,
//     pid, network, ipc and uts namespaces, uid 65534, no capabilities,
//     seccomp, the host read-only with only the interpreter visible, private
//     /tmp, /dev/shm and working directory, memory and process caps in
//     cgroups). RLIMIT_DATA at the memory limit comes first there too, so a
//     plain runaway allocation keeps the session; shared memory that gets
//     past it meets the cgroup, whose OOM kill ends the cell as
//     memory_limit with the state lost. Each restart is a fresh sandbox.
//
// CPU time is not limited: it would add up over every cell of the session
// (each cell's wall clock is).
func sessionIsolation(l core.Limits, readOnly []string, started func(*isolate.Cmd)) (isolation.Level, repl.Launcher, []repl.Rlimit, error) {
	// The adapter has checked the level's name (plugin.CheckRequest).
	level := l.Level()
	if err := isolate.Available(level); err != nil {
		return "", nil, nil, err
	}
	spec := isolate.Spec{Spec: l.SandboxSpec(level, readOnly), DataBytes: l.MemoryBytes}
	spec.CPUSeconds = 0 // see above: a session's CPU time is not limited
	switch level {
	case isolation.None:
		return level, nil, nil, nil
	case isolation.Namespace:
		return level, isolatedLauncher(spec, started), nil, nil
	}
	var out []repl.Rlimit
	for _, r := range isolate.Rlimits(spec, false, false) {
		out = append(out, repl.Rlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max})
	}
	return level, nil, out, nil
}

// isolatedLauncher starts each interpreter of a session through
// internal/sandbox/isolate with base (Argv, Env, Dir and ExtraFiles filled in per start)
// and hands each started sandbox to started (nil: nobody).
func isolatedLauncher(base isolate.Spec, started func(*isolate.Cmd)) repl.Launcher {
	return func(argv, env []string, dir string, extra []*os.File, stdout, stderr *os.File) (repl.Proc, error) {
		spec := base
		spec.Argv, spec.Env, spec.Dir, spec.ExtraFiles = argv, env, dir, extra
		// The session, not a request, bounds the interpreter's life: Kill
		// ends it, and the plugin's death ends it through Pdeathsig.
		cmd, err := isolate.Command(context.Background(), spec)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			_ = cmd.Cleanup()
			return nil, fmt.Errorf("starting the sandbox: %w", err)
		}
		if started != nil {
			started(cmd)
		}
		return &isolatedProc{cmd: cmd}, nil
	}
}

// isolatedProc is an interpreter running under internal/sandbox/isolate.
type isolatedProc struct{ cmd *isolate.Cmd }

func (p *isolatedProc) Pid() int { return p.cmd.ProgramPid() }

func (p *isolatedProc) Kill() { _ = p.cmd.Kill() }

func (p *isolatedProc) Wait() repl.Exit {
	_ = p.cmd.Wait()
	o := p.cmd.Outcome()
	ex := repl.Exit{Code: int32(o.ExitCode), Desc: fmt.Sprintf("exit status %d", o.ExitCode), EndedBy: o.Ending}
	if o.Signal != "" {
		ex.Signal, ex.Code, ex.Desc = o.Signal, 128+int32(o.SignalNumber), "killed by "+o.Signal
	}
	switch o.Ending {
	case ending.MemoryLimit:
		ex.Desc = fmt.Sprintf("killed at the session's memory limit (%d MiB)", o.PeakMemoryBytes>>20)
	case ending.ProcessLimit:
		ex.Desc += ", at the session's process limit"
	case ending.DiskLimit:
		ex.Desc += ", with its working directory full"
	case ending.Exit, ending.Signal, ending.Timeout, ending.Cancelled:
		// Exit and signal are the REPL's to judge from the status; timeout
		// and cancelled mean the REPL itself killed it and knows why.
		ex.EndedBy = ""
	}
	return ex
}
