package native

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// A REPL session keeps one interpreter alive across cells, and that
// interpreter runs the model's code: it must live in the same sandbox as a
// program would. The built-in python plugin builds its own; StartInterpreter
// is the same thing for any plugin, through the plugin's Sandbox (the host's
// supervisor, `rlm __sandbox`, by default), so a third-party session is
// sandboxed without linking rlm's sandbox code. A plugin declares the levels
// its sessions reach in Runtime.SessionLevels; Info announces those the
// host can enforce, the host resolves a session's level among them, and
// StartInterpreter starts the interpreter at that level or refuses.

// InterpreterOptions say how to start a session's interpreter.
type InterpreterOptions struct {
	// Argv is the interpreter and its arguments; empty means the runtime's
	// tool alone (its resolved executable). Under namespace prefer absolute
	// paths under /usr or the tool's own directories (ReadOnlyPaths).
	Argv []string
	// Env is added to the scrubbed base environment (program.BaseEnv)
	// before the session's own variables.
	Env []string
	// ReadOnly are more host paths the interpreter needs to read (an
	// installed set, a helper script), exposed read-only in the sandbox.
	ReadOnly []string
}

// Interpreter is a session's interpreter process, started by
// StartInterpreter inside the sandbox at Level. The REPL talks to it over
// Stdin and Stdout (and reads Stderr); Close ends it and removes its
// directory.
type Interpreter struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser
	// Dir is the session's working directory on the host.
	Dir string
	// Level is the isolation the interpreter runs under: report it in
	// plugin.SessionOptions.Isolation.
	Level isolation.Level

	proc program.Process
	done chan struct{}
	exit isolation.Exit
	err  error
	once sync.Once
}

// StartInterpreter starts the interpreter of a session opened with open, at
// the level the host resolved (open.Limits.Isolation), with the session's
// memory, process, disk and network limits. A level the runtime's sessions
// do not declare (SessionLevels) or the host cannot enforce is a refusal,
// never a silent downgrade. CPU time is not limited per interpreter: over
// a session's cells it only adds up; bound a cell by its timeout.
func (s *Server) StartInterpreter(ctx context.Context, open core.SessionOptions, o InterpreterOptions) (*Interpreter, error) {
	t, err := s.Tool()
	if err != nil {
		return nil, s.unavailable(err)
	}
	level := open.Limits.Level()
	if level != isolation.None {
		if !slices.Contains(s.RT.SessionLevels, level) {
			return nil, plugin.Invalid(fmt.Errorf("the %s runtime's sessions do not run at isolation %s (they declare %v in SessionLevels)", s.RT.Name, level, s.RT.SessionLevels))
		}
		if err := s.sandbox().Available(level); err != nil {
			return nil, plugin.Unavailable(fmt.Errorf("isolation %s: %w", level, err))
		}
	}
	dir, err := os.MkdirTemp("", "rlm-session-")
	if err != nil {
		return nil, fmt.Errorf("creating the session directory: %w", err)
	}
	env, err := program.Environ(append(program.BaseEnv(dir), o.Env...), open.Env)
	if err != nil {
		os.RemoveAll(dir)
		return nil, plugin.Invalid(err)
	}
	argv := o.Argv
	if len(argv) == 0 {
		argv = []string{t.Exe}
	}
	var sp program.Spawner = program.ExecSpawner{}
	if level != isolation.None {
		spec := open.Limits.SandboxSpec(level, ReadOnlyPaths(t, o.ReadOnly...))
		spec.CPUSeconds = 0
		sp = s.sandbox().Spawner(ctx, SandboxRun{Spec: spec, Tool: t, Limits: open.Limits})
	}
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	closeAll := func() {
		for _, f := range pipes {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := 0; i < 6; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeAll()
			os.RemoveAll(dir)
			return nil, err
		}
	}
	proc, err := sp.Spawn(argv, dir, env, pipes[0], pipes[3], pipes[5])
	// The child holds its ends now (or never will).
	pipes[0].Close()
	pipes[3].Close()
	pipes[5].Close()
	if err != nil {
		pipes[1].Close()
		pipes[2].Close()
		pipes[4].Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the %s interpreter at isolation %s: %w", s.RT.Name, level, err)
	}
	in := &Interpreter{Stdin: pipes[1], Stdout: pipes[2], Stderr: pipes[4], Dir: dir, Level: level, proc: proc, done: make(chan struct{})}
	go func() {
		in.exit, in.err = proc.Wait()
		close(in.done)
	}()
	return in, nil
}

// Done is closed when the interpreter has exited.
func (in *Interpreter) Done() <-chan struct{} { return in.done }

// Exit is how the interpreter ended; valid after Done.
func (in *Interpreter) Exit() (isolation.Exit, error) {
	<-in.done
	return in.exit, in.err
}

// Kill ends the interpreter and everything it started: the sandbox's own
// kill (its cgroup and pid namespace) when it has one, else its process
// group.
func (in *Interpreter) Kill() {
	if k, ok := in.proc.(program.Killer); ok {
		k.Kill()
		return
	}
	proctree.KillGroup(in.proc.Pid())
}

// Close kills the interpreter, waits for it and removes its directory.
func (in *Interpreter) Close() {
	in.once.Do(func() {
		in.Stdin.Close()
		in.Kill()
		<-in.done
		in.Stdout.Close()
		in.Stderr.Close()
		os.RemoveAll(in.Dir)
	})
}
