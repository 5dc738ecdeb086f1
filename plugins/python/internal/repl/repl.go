// Package repl runs a stateful Python REPL: a real CPython interpreter
// executing the embedded driver (driver.py), driven over private pipes.
//
// # Protocol
//
// JSON-RPC 2.0 messages framed as a 4-byte big-endian length followed by
// UTF-8 JSON, on two pipes that are fds 3 (host → driver) and 4 (driver →
// host) when the interpreter starts; the driver moves them at once to high
// close-on-exec fds. fd 0 is /dev/null and fds 1 and 2 are pipes this
// package reads continuously, so print, os.write(1, …), os.system and C
// extensions all land in the captured stdout/stderr and can never reach, or
// forge, protocol messages.
//
// Host → driver: open {context_bytes, kind} followed by the raw context
// bytes (no JSON encoding, one readinto on the other side); execute {code,
// cell, marker}; get_variable {name}. Driver → host: the replies, and
// callback requests {kind, prompts, contexts, has_context, model} that the
// host answers with {results} or an error while the cell waits.
//
// A cell ends when the host has its reply and has seen the cell's marker (a
// random per-cell string chosen by the host) on both output pipes: the
// driver flushes sys.stdout/sys.stderr and writes the marker after the cell,
// so everything the cell printed before is attributed to it. Output written
// between cells (by background processes) goes to the next cell's result.
//
// # Notes
//
//   - Cells run with script semantics: the value of a final expression is not
//     printed (use print); as in a Jupyter notebook its repr is the result's
//     Value (none when the cell ends in another statement or a semicolon, or
//     the value is None), capped at MaxOutputBytes with head and tail kept.
//     The code doing this is shared with the WebAssembly REPL
//     (plugins/internal/pycell). Each cell is compiled as "<cell N>", so
//     tracebacks name the cell and line; the driver's own frames are removed.
//   - Timeouts and cancellation first raise KeyboardInterrupt in the cell
//     (SIGINT, state kept). A cell still running Config.Grace later is killed
//     with its whole process group, a fresh interpreter is started with the
//     same context, and the result has state_lost set.
//   - llm_query & co. are served by the CallbackFunc passed to Execute. The
//     batched forms send one callback with all prompts; running them
//     concurrently is the CallbackFunc's job. Callbacks from several user
//     threads are serialised by the driver.
//   - Output beyond Config.MaxOutputBytes per stream keeps its head and tail
//     with "... [N bytes omitted] ..." in between; host memory stays bounded.
//   - stdout is block-buffered as in any script writing to a pipe (even under
//     PYTHONUNBUFFERED), flushed at the end of each cell and on interrupt; a
//     hard kill loses at most one 8 KiB buffer of unflushed output.
//   - Exit codes: 0 ok; 1 uncaught exception; n for sys.exit(n) (the driver
//     survives it); 130 with signal "SIGINT" when interrupted; 128+signal
//     when the interpreter was killed or crashed (state_lost set).
//   - The interpreter runs in its own process group with Pdeathsig=SIGKILL
//     (it dies with the host thread that started it; Go only ends threads
//     of goroutines that exit while locked to them). Close and every hard
//     kill SIGKILL the group and every process carrying the session's
//     RLM_REPL_SESSION tag or descending from the interpreter, including
//     children that left the group with setsid (internal/sandbox/proctree.KillTree);
//     call proctree.BecomeSubreaper once so such orphans are re-parented
//     to this process and get reaped. Orphans
//     that exit on their own while the session lives are reaped by whoever
//     reaps this process's children; this package only reaps processes it
//     killed, so it never steals another exec.Cmd's exit status.
//   - A cell that forks (os.fork) must not talk to the host from the child:
//     the child exits at the end of the cell and llm_query raises there.
package repl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
)

// Config configures a Process. Zero values select the documented defaults.
type Config struct {
	// Python is the real interpreter's path (not a pyenv shim), already
	// resolved by the caller.
	Python string
	// Env is the interpreter's full environment; nil inherits this
	// process's. The package adds RLM_REPL_SESSION, which marks the
	// session's processes so they can be killed at Close.
	Env []string
	// Dir is the working directory; "" is the current one.
	Dir string
	// MaxOutputBytes caps each of stdout and stderr per cell (head and tail
	// kept). 0 means 1 MiB.
	MaxOutputBytes int64
	// Grace is how long an interrupted cell may take to stop before the
	// interpreter is killed and restarted. 0 means 2s.
	Grace time.Duration
	// Context becomes the `context` variable: nil gives None, kind "text"
	// (or "") a str, kind "json" the decoded JSON value.
	Context *core.Context
	// Rlimits are applied to the interpreter (prlimit) right after it is
	// spawned, before any user code can run, and are inherited by its
	// children; e.g. {unix.RLIMIT_AS, 1 << 30} turns runaway allocation into
	// MemoryError. They carry over to restarted interpreters. Only the
	// default launcher applies them; a Launch of one's own sets its own.
	Rlimits []Rlimit
	// Launch starts each interpreter (the first and every restart); nil
	// starts a plain child (ChildLauncher). See Launcher.
	Launch Launcher
}

// Rlimit is one resource limit (unix.RLIMIT_*); Max 0 means Max = Cur.
type Rlimit struct {
	Resource int
	Cur, Max uint64
}

// DefaultMaxOutputBytes and DefaultGrace are the zero-value defaults.
const (
	DefaultMaxOutputBytes = defaults.MaxOutputBytes
	DefaultGrace          = 2 * time.Second
)

// CallbackFunc answers a cell's llm_query / rlm_query call (batched forms
// carry several prompts; the results must be in the same order). A returned
// error is raised in the cell as LLMQueryError (a RuntimeError). ctx is
// cancelled when the cell is interrupted or ends.
//
// It is an alias, so a Process satisfies core/plugin.REPL as it is.
type CallbackFunc = func(ctx context.Context, q core.Query) (results []string, err error)

// ErrClosed is returned by calls on a closed Process.
var ErrClosed = errors.New("repl: session closed")

type contextData struct {
	data []byte
	kind string
}

// Process is one REPL session. Its methods are safe for concurrent use;
// Execute and Variable are serialised, Interrupt and Close may be called at
// any time.
type Process struct {
	cfg     Config
	ctxData *contextData
	secret  string // random, part of every cell's end marker

	mu     sync.Mutex // serialises Execute, Variable and restarts
	d      *inst      // nil after a failed restart or Close
	cell   int
	nextID uint64
	pid    atomic.Int64

	stateMu   sync.Mutex
	version   string
	running   bool
	closed    bool
	intr      chan struct{}
	closing   chan struct{}
	closeOnce sync.Once
}

// Start spawns the driver, sends it the context and waits until it is ready.
// ctx bounds the start only; the process lives until Close.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Python == "" {
		return nil, errors.New("repl: Config.Python is empty")
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	p := &Process{
		cfg:     cfg,
		secret:  randomHex(16),
		intr:    make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
	if c := cfg.Context; c != nil {
		switch c.Kind {
		case "", "text":
			p.ctxData = &contextData{data: c.Data, kind: "text"}
		case "json":
			p.ctxData = &contextData{data: c.Data, kind: "json"}
		default:
			return nil, fmt.Errorf("repl: unknown context kind %q (want text or json)", c.Kind)
		}
	}
	if err := p.startInst(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// startInst starts a driver and makes it current. Callers hold p.mu (or own
// p exclusively).
func (p *Process) startInst(ctx context.Context) error {
	err := p.startInstWith(ctx, true)
	if errors.Is(err, errCachedStart) && ctx.Err() == nil {
		// a stale marshalled driver (the interpreter changed): compile it
		err = p.startInstWith(ctx, false)
	}
	return err
}

var errCachedStart = errors.New("repl: the cached driver failed to start")

func (p *Process) startInstWith(ctx context.Context, useCache bool) error {
	d, err := spawn(&p.cfg, useCache)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	r, err := d.open(ctx, p.ctxData)
	if err != nil {
		if d.cached && !errors.Is(err, errOpenRejected) && ctx.Err() == nil {
			codeCache.Delete(d.key)
			return fmt.Errorf("%w: %w", errCachedStart, err)
		}
		return err
	}
	p.d = d
	p.stateMu.Lock()
	p.version = r.Python
	p.stateMu.Unlock()
	p.pid.Store(int64(d.proc.Pid()))
	return nil
}

// Pid is the current interpreter's process id (it changes on restart).
func (p *Process) Pid() int { return int(p.pid.Load()) }

// PythonVersion is the interpreter's version, e.g. "3.11.7".
func (p *Process) PythonVersion() string {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return p.version
}

func (p *Process) isClosed() bool {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return p.closed
}

func (p *Process) setRunning(on bool) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if on {
		select { // an interrupt aimed at an earlier cell must not hit this one
		case <-p.intr:
		default:
		}
	}
	p.running = on
}

// Interrupt raises KeyboardInterrupt in the running cell (its result is
// ended_by=CANCELLED, state kept; a cell that does not stop within Grace is
// killed as on timeout). Without a running cell it does nothing.
func (p *Process) Interrupt() error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.running {
		select {
		case p.intr <- struct{}{}:
		default:
		}
	}
	return nil
}

// Close kills the interpreter with its whole process group and every
// process it started (also those that left the group with setsid), and
// reaps them. A running Execute returns at once. Close is idempotent.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.stateMu.Lock()
		p.closed = true
		p.stateMu.Unlock()
		close(p.closing)
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.d != nil {
		p.d.kill()
		p.d.closeStreams()
		p.d = nil
	}
	return nil
}

// ensure returns the current driver, restarting one if an earlier restart
// failed.
func (p *Process) ensure(ctx context.Context) (*inst, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	if p.d == nil {
		if err := p.startInst(ctx); err != nil {
			return nil, err
		}
	}
	return p.d, nil
}
