// Package program runs one stateless program the way every native runtime
// plugin needs: a fresh private working directory with the request's files,
// the code written to a file with the runtime's extension, a scrubbed
// environment, capped output, a wall-clock limit enforced on the whole
// process group, and the produced files collected before everything is
// removed.
//
// # Notes
//
//   - stdout and stderr are handed to the child as plain pipes that this
//     package drains itself. os/exec's copying goroutines would make Wait
//     block until every background grandchild closed its copy of the pipe
//     (the earlier sandbox server's hang); here the group is killed as soon as
//     the main process exits and the drain is bounded.
//   - A program that keeps flooding output far past what is kept is killed
//     (ended_by OUTPUT_LIMIT) rather than allowed to burn CPU until its
//     timeout.
package program

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
)

// Defaults applied when a request's limit is zero.
const (
	DefaultMaxFiles = 100
	DefaultMaxFile  = 10 << 20
	// floodFactor × the kept budget (at least floodMin) of output ends a run.
	floodFactor = 64
	floodMin    = 64 << 20
)

// drainGrace bounds the wait for output pipes after the group is killed;
// only a process that escaped the group (setsid) can hold them longer. A
// variable for the test that sets it to zero.
var drainGrace = 300 * time.Millisecond

// Workspace is a run's private working directory.
type Workspace struct {
	Dir      string // the program's working directory and $OUTPUT_DIR
	CodePath string // absolute path of the code file
	codeName string
	before   snapshot
	prog     core.Program
	staged   bool // nothing of it is on the host (StagedWorkspace)
	// What a staged run produced (CollectStaged), for Finish.
	files   []core.File
	omitted bool
}

// ErrNotStarted, wrapped in a Spawner's error, says that nothing of the
// program was started, so the caller may start it by other means (a
// staged run whose sandbox could not be had, on a host workspace).
var ErrNotStarted = errors.New("the program was not started")

// StagedWorkspace is a workspace that exists only inside the sandbox that
// runs the program: Dir is the directory as the program sees it there,
// nothing is created on the host, and the spawner writes the code file
// (Code) into the sandbox's own directory and reads the produced files
// back from it (CollectStaged). For a program with no other files: the
// common run of a warm sandbox, which then costs no directory made,
// written, listed three times and removed on the host's disk.
func StagedWorkspace(p core.Program, codeName, dir string) *Workspace {
	return &Workspace{Dir: dir, CodePath: path.Join(dir, codeName), codeName: codeName, prog: p, staged: true}
}

// CollectStaged records the files a staged run created or changed, when
// the request asked for them, read from root (the sandbox's working
// directory) exactly as Finish reads a host workspace: the sandbox calls
// it once the run's processes are gone and before it wipes the directory.
func (w *Workspace) CollectStaged(root *os.Root) {
	if !w.staged || !w.prog.ReturnFiles {
		return
	}
	read := func(rel string, max int64) ([]byte, error) {
		f, err := root.OpenFile(rel, os.O_RDONLY|noFollow, 0)
		if err != nil {
			return nil, err
		}
		return readAtMost(f, max)
	}
	w.files, w.omitted = producedIn(root.FS(), read, nil, map[string]bool{w.codeName: true}, w.prog.Limits)
}

// Code is the code file's name in Dir and its contents.
func (w *Workspace) Code() (name string, data []byte) {
	return w.codeName, []byte(w.prog.Code)
}

// NewWorkspace creates a private directory holding the program's files and
// its code as codeName (for example "main.py").
func NewWorkspace(p core.Program, codeName string) (*Workspace, error) {
	dir, err := os.MkdirTemp("", "rlm-run-")
	if err != nil {
		return nil, fmt.Errorf("creating the working directory: %w", err)
	}
	w := &Workspace{Dir: dir, codeName: codeName, prog: p}
	w.CodePath = filepath.Join(dir, codeName)
	if err := os.WriteFile(w.CodePath, []byte(p.Code), 0o644); err != nil {
		w.Remove()
		return nil, err
	}
	if err := WriteFiles(dir, p.Files); err != nil {
		w.Remove()
		return nil, err
	}
	w.before = takeSnapshot(dir)
	return w, nil
}

// Remove deletes the working directory and everything in it; a staged
// workspace's is the sandbox's to remove.
func (w *Workspace) Remove() {
	if w.staged {
		return
	}
	_ = os.RemoveAll(w.Dir)
}

// Finish collects produced files into res when the request asked for them,
// then removes the workspace.
func (w *Workspace) Finish(res *core.Result) {
	defer w.Remove()
	if !w.prog.ReturnFiles {
		return
	}
	if w.staged {
		res.Files, res.FilesOmitted = w.files, w.omitted
		return
	}
	res.Files, res.FilesOmitted = produced(w.Dir, w.before, map[string]bool{w.codeName: true}, w.prog.Limits)
}

// BaseEnv is the scrubbed environment programs start from: enough to find
// interpreters and behave predictably, none of the host's secrets.
func BaseEnv(workdir string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + workdir,
		"LANG=C.UTF-8",
		"OUTPUT_DIR=" + workdir,
	}
}

// Command is one process to run.
type Command struct {
	Argv   []string
	Dir    string
	Env    []string // complete environment
	Stdin  []byte
	Limits core.Limits
	// Wall overrides Limits.Wall (e.g. a build step's own limit).
	Wall time.Duration
	// Spawner starts the process; nil starts it with os/exec. The python
	// plugin's fork server is one; an isolation layer is another.
	Spawner Spawner
}

// Spawner starts a process with the given standard files. The process must
// lead a process group of its own (pgid == pid), so that killing the group
// kills everything it started.
type Spawner interface {
	Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (Process, error)
}

// Process is a started program.
type Process interface {
	// Pid is the process's host pid (its group's id), or 0 when the
	// spawner does not know it yet: then the Process must be a Killer,
	// and Exec's own group kills do nothing.
	Pid() int
	// Wait blocks until the process has exited and returns how.
	Wait() (isolation.Exit, error)
}

// Contained is a Process whose descendants can never become this
// process's children: a program in a pid namespace of its own, whose
// orphans its namespace's init reaps (a warm sandbox's worker). Exec skips
// the sweep for orphans after such a run: it reads /proc for every thread
// of the plugin, which on a warm run is most of the plugin's own work
// after the program ends, and finds nothing.
type Contained interface {
	OrphansContained() bool
}

// Killer is a Process that knows better than a process-group kill how to end
// everything it started (an isolated run's cgroups and pid namespace). Exec
// calls Kill on timeout, cancellation and output floods.
type Killer interface {
	Kill()
}

// ExecSpawner starts processes with os/exec; the default Spawner.
type ExecSpawner struct{}

// Spawn implements Spawner.
func (ExecSpawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (Process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	proctree.Configure(cmd)
	if err := proctree.Start(cmd); err != nil {
		return nil, err
	}
	return &execProcess{cmd}, nil
}

type execProcess struct{ cmd *exec.Cmd }

func (p *execProcess) Pid() int { return p.cmd.Process.Pid }

func (p *execProcess) Wait() (isolation.Exit, error) {
	err := p.cmd.Wait()
	proctree.Untrack(p.cmd.Process.Pid)
	ps := p.cmd.ProcessState
	if ps == nil {
		return isolation.Exit{Code: -1}, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return isolation.Exit{Signal: ws.Signal()}, nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return isolation.Exit{Code: ps.ExitCode()}, err
	}
	return isolation.Exit{Code: ps.ExitCode()}, nil
}

// devNull is the standard input of programs given none, opened once: a
// spawner only duplicates it into the program.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// readBufs are the output drains' read buffers: two of 64 KiB for every
// run were most of what a warm run allocated, and of its plugin's GC.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Exec runs cmd to completion and reports how it ended. Errors starting the
// process (missing interpreter) come back as an error; everything the
// program itself does comes back in the Result.
func Exec(ctx context.Context, c Command) (*core.Result, error) {
	wall := c.Wall
	if wall <= 0 {
		wall = c.Limits.Wall
	}
	if wall <= 0 {
		wall = defaults.Timeout
	}
	maxOut := c.Limits.MaxOutputBytes
	stdout, stderr := capbuf.New(maxOut), capbuf.New(maxOut)
	flood := max(int64(floodMin), floodFactor*max(maxOut, capbuf.DefaultMax))
	sp := c.Spawner
	if sp == nil {
		sp = ExecSpawner{}
	}

	outR, outW, err := outputPipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := outputPipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	var inR, inW *os.File
	if len(c.Stdin) > 0 {
		inR, inW, err = inputPipe()
	} else {
		inR, err = devNull()
	}
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}

	start := time.Now()
	proc, err := sp.Spawn(c.Argv, c.Dir, c.Env, inR, outW, errW)
	outW.Close()
	errW.Close()
	if inW != nil {
		inR.Close() // not the shared /dev/null
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", c.Argv[0], err)
	}
	pid := proc.Pid()
	if inW != nil {
		go func() { // a program that never reads stdin must not block us
			_, _ = inW.Write(c.Stdin)
			inW.Close()
		}()
	}

	// The watchdog ends the run at the deadline, at the caller's cancel
	// or at an output flood, killing the whole group.
	w := watchdog.Start(ctx, watchdog.Options{Timeout: wall, Stop: func(ending.Reason) {
		proctree.KillGroup(pid)
		if k, ok := proc.(Killer); ok {
			k.Kill()
		}
	}})

	var total int64
	var totalMu sync.Mutex
	drain := func(r *os.File, buf *capbuf.Buffer, done chan<- struct{}) {
		defer close(done)
		bp := readBufs.Get().(*[]byte)
		defer readBufs.Put(bp)
		b := *bp
		keep := func(p []byte) {
			buf.Write(p)
			totalMu.Lock()
			total += int64(len(p))
			over := total > flood
			totalMu.Unlock()
			if over {
				w.StopAt(ending.OutputLimit, flood)
			}
		}
		for {
			n, err := r.Read(b)
			if n > 0 {
				keep(b[:n])
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				takeBuffered(r, b, keep)
			}
			if err != nil {
				return
			}
		}
	}
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go drain(outR, stdout, outDone)
	go drain(errR, stderr, errDone)

	exit, waitErr := proc.Wait()
	dur := time.Since(start)
	w.Done()
	// The main process is gone; nothing it left in its group may outlive it.
	proctree.KillGroup(pid)
	// The grace ends the wait for writers that escaped the group, never
	// what the pipes hold: on a loaded machine the drains may not have
	// run at all yet, and closing the pipes at the grace's end answered a
	// run that printed with an empty stdout.
	graceEnd := time.Now().Add(drainGrace)
	if outR.SetReadDeadline(graceEnd) != nil || errR.SetReadDeadline(graceEnd) != nil {
		// Not pollable (never so for os.Pipe on Linux): the old bound.
		time.AfterFunc(drainGrace, func() { outR.Close(); errR.Close() })
	}
	<-outDone
	<-errDone
	if c, ok := proc.(Contained); !ok || !c.OrphansContained() {
		proctree.KillOrphans(nil)
	}
	outR.Close()
	errR.Close()
	if inW != nil {
		inW.Close()
	}

	res := &core.Result{
		Stdout:          string(stdout.Bytes()),
		Stderr:          string(stderr.Bytes()),
		StdoutOmitted:   stdout.Omitted(),
		StderrOmitted:   stderr.Omitted(),
		DurationMs:      dur.Milliseconds(),
		Duration:        dur,
		Backend:         "native",
		Isolation:       "none",
		ExitCode:        exit.Code,
		MemoryUsedBytes: exit.PeakMemoryBytes,
	}
	if exit.Isolation != "" {
		res.Isolation = string(exit.Isolation)
	}
	if exit.Signal != 0 {
		res.Signal = signalName(exit.Signal)
		res.ExitCode = 128 + int(exit.Signal)
	}
	if waitErr != nil {
		res.Error = waitErr.Error()
	}
	// An output flood found while draining still counts: Done disarmed
	// only the deadline and the context.
	var own ending.Reason // a limit the spawner's sandbox enforced
	if exit.EndedBy != ending.Exit && exit.EndedBy != ending.Signal {
		own = exit.EndedBy
	}
	var signalled ending.Reason
	if res.Signal != "" {
		signalled = ending.Signal
	}
	res.EndedBy = watchdog.Ending(w.Why(), own, signalled)
	switch res.EndedBy {
	case ending.Timeout, ending.OutputLimit, ending.Cancelled:
		res.Error = w.Message(res.EndedBy)
	case ending.MemoryLimit:
		res.Error = res.EndedBy.Message(c.Limits.MemoryBytes)
	case ending.ProcessLimit:
		res.Error = res.EndedBy.Message(c.Limits.MaxProcesses)
	case ending.DiskLimit:
		res.Error = res.EndedBy.Message(c.Limits.MaxDiskBytes)
	case ending.CPULimit:
		res.Error = res.EndedBy.Message(int64(c.Limits.CPU))
	}
	return res, nil
}
