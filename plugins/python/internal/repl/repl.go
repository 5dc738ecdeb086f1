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
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
	"github.com/rlmkit/rlm/plugins/internal/pycell"
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

type execParams struct {
	Code   string `json:"code"`
	Cell   int    `json:"cell"`
	Marker string `json:"marker"`
	// MaxValue caps the result's repr in bytes, as output is capped.
	MaxValue int64 `json:"max_value"`
}

type cellReply struct {
	ExitCode    int32   `json:"exit_code"`
	Error       string  `json:"error"`
	Interrupted bool    `json:"interrupted"`
	MarkerOut   bool    `json:"marker_out"`
	MarkerErr   bool    `json:"marker_err"`
	Value       *string `json:"value"`
}

// Execute runs code as the next cell. timeout <= 0 means no timeout. cb
// serves the cell's llm_query / rlm_query calls; nil makes them raise
// "llm_query is not available: this session has no LLM configured".
//
// The error is non-nil only when the cell could not be run at all (session
// closed, interpreter cannot be started); everything that happens to the
// cell itself is described by the Result.
func (p *Process) Execute(ctx context.Context, code string, timeout time.Duration, cb CallbackFunc) (*core.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil { // do not start a cell that is already cancelled
		return &core.Result{EndedBy: ending.Cancelled, ExitCode: 130, Error: "cancelled before the cell started: " + ctx.Err().Error()}, nil
	}
	p.cell++
	cell := p.cell
	p.nextID++
	id := p.nextID
	idStr := strconv.FormatUint(id, 10)
	// unguessable (a random per-process secret) and unique (the cell number)
	marker := "\x1e<rlm-cell-end:" + p.secret + ":" + strconv.Itoa(cell) + ">\x1e"
	d.out.arm([]byte(marker))
	d.err.arm([]byte(marker))
	p.setRunning(true)
	defer p.setRunning(false)

	cbCtx, cbCancel := context.WithCancel(ctx)
	defer cbCancel()

	start := time.Now()
	if err := d.send(request{JSONRPC: "2.0", ID: id, Method: "execute", Params: execParams{Code: code, Cell: cell, Marker: marker, MaxValue: p.cfg.MaxOutputBytes}}, nil); err != nil {
		return p.crashed(d, start, "sending the cell failed: "+err.Error())
	}

	// The watchdog ends the cell at its deadline or the caller's cancel;
	// Interrupt asks it too. The loop interrupts the driver itself, so a
	// cell whose reply it has read is never interrupted; one that ignores
	// KeyboardInterrupt for Grace is killed (Expired).
	w := watchdog.Start(ctx, watchdog.Options{Timeout: timeout, Grace: p.cfg.Grace})
	defer w.Done()
	var (
		why        ending.Reason // set once the cell was interrupted
		reply      *cellReply
		outC, errC *capbuf.Buffer
		stopping   = w.Stopping()
	)
	for reply == nil || (outC == nil && reply.MarkerOut) || (errC == nil && reply.MarkerErr) {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				return p.crashed(d, start, "")
			}
			if m.Method == "callback" {
				p.callback(cbCtx, d, m, cb)
				continue
			}
			if string(m.ID) != idStr {
				continue // a stale reply
			}
			if m.Error != nil {
				reply = &cellReply{ExitCode: 1, Error: "driver error: " + m.Error.Message}
				outC, errC = d.out.take(), d.err.take()
				continue
			}
			r := new(cellReply)
			if err := json.Unmarshal(m.Result, r); err != nil {
				r = &cellReply{ExitCode: 1, Error: "driver error: bad reply: " + err.Error()}
			}
			reply = r
			if !r.MarkerOut && outC == nil {
				outC = d.out.take()
			}
			if !r.MarkerErr && errC == nil {
				errC = d.err.take()
			}
		case c := <-d.out.done:
			outC = c
		case c := <-d.err.done:
			errC = c
		case <-p.intr:
			w.Stop(ending.Cancelled)
		case why = <-stopping:
			stopping = nil
			d.interrupt(cell)
			cbCancel()
		case <-w.Expired():
			if why == "" { // the grace began before the loop took the cause
				why = w.Why()
			}
			return p.hardKill(d, start, why, w.Message(why))
		case <-d.exited:
			return p.crashed(d, start, "")
		case <-p.closing:
			return p.closedUnder(d, start)
		}
	}
	res := buildResult(outC, errC, start)
	res.ExitCode = int(reply.ExitCode)
	res.Error = reply.Error
	res.Value = reply.Value
	res.EndedBy = watchdog.Ending(why)
	if why != "" {
		msg := pycell.Error(why, w.Message(why))
		if reply.Interrupted {
			res.Signal = "SIGINT"
			res.Error = msg + "; KeyboardInterrupt was raised in the cell and the session state was kept"
		} else if reply.Error != "" {
			res.Error = msg + "; the cell then ended with " + reply.Error
		} else {
			res.Error = msg + "; the cell then finished"
		}
	}
	return res, nil
}

// closedUnder ends a cell whose session was closed under it.
func (p *Process) closedUnder(d *inst, start time.Time) (*core.Result, error) {
	d.kill()
	oc, ec := d.drain(100 * time.Millisecond)
	d.closeStreams()
	p.d = nil
	res := buildResult(oc, ec, start)
	res.EndedBy = ending.Cancelled
	res.StateLost = true
	res.Signal = "SIGKILL"
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.Error = "session closed while the cell was running"
	return res, nil
}

func buildResult(outC, errC *capbuf.Buffer, start time.Time) *core.Result {
	dur := time.Since(start)
	res := &core.Result{DurationMs: dur.Milliseconds(), Duration: dur}
	if outC != nil {
		res.Stdout, res.StdoutOmitted = string(outC.Bytes()), outC.Omitted()
	}
	if errC != nil {
		res.Stderr, res.StderrOmitted = string(errC.Bytes()), errC.Omitted()
	}
	return res
}

// restart replaces a dead or killed driver; on failure p.d stays nil and
// the next call tries again.
func (p *Process) restart() error {
	p.d = nil
	if p.isClosed() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.startInst(ctx)
}

// hardKill handles a cell that ignored its interrupt for the grace period.
func (p *Process) hardKill(d *inst, start time.Time, why ending.Reason, msg string) (*core.Result, error) {
	d.kill()
	oc, ec := d.drain(250 * time.Millisecond)
	d.closeStreams()
	res := buildResult(oc, ec, start)
	res.EndedBy = why
	res.StateLost = true
	res.Signal = "SIGKILL"
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.Error = fmt.Sprintf("%s; the cell did not stop within %s of KeyboardInterrupt, so the interpreter was killed and restarted (session state lost)",
		pycell.Error(why, msg), p.cfg.Grace)
	if err := p.restart(); err != nil {
		res.Error += "; restarting it failed: " + err.Error()
	}
	return res, nil
}

// exitWait bounds how long crashed waits for a driver whose channel broke
// to exit by itself. A sandbox's pid 1 reports the interpreter's exit a
// moment after the channel closes; killing it sooner would report every
// os._exit(3) as SIGKILL. It is paid in full only when the channel broke
// and the interpreter lives on.
const exitWait = 2 * time.Second

// crashed handles a driver that died (or whose channel broke) mid-cell.
func (p *Process) crashed(d *inst, start time.Time, detail string) (*core.Result, error) {
	t := time.NewTimer(exitWait)
	select {
	case <-d.exited:
	case <-t.C:
	}
	t.Stop()
	d.kill()
	oc, ec := d.drain(250 * time.Millisecond)
	d.closeStreams()
	desc, sig, code := d.exitDescription()
	res := buildResult(oc, ec, start)
	res.EndedBy = ending.Crashed
	if d.exit.EndedBy != "" {
		res.EndedBy = d.exit.EndedBy // the sandbox's memory or process limit killed it
	}
	res.StateLost = true
	res.Signal = sig
	res.ExitCode = int(code)
	res.Error = fmt.Sprintf("the Python interpreter died during the cell (%s); it was restarted and the session state was lost", desc)
	if detail != "" {
		res.Error += " (" + detail + ")"
	}
	if err := p.restart(); err != nil {
		res.Error += "; restarting it failed: " + err.Error()
	}
	return res, nil
}

type callbackParams struct {
	Kind       string   `json:"kind"`
	Prompts    []string `json:"prompts"`
	Contexts   []string `json:"contexts"`
	HasContext []bool   `json:"has_context"`
	Model      string   `json:"model"`
}

// callback serves one callback request in its own goroutine, so output and
// protocol reading go on meanwhile, and writes the reply itself.
func (p *Process) callback(ctx context.Context, d *inst, m *rpcMsg, cb CallbackFunc) {
	id := m.ID
	replyErr := func(msg string) {
		_ = d.send(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: -32000, Message: msg}}, nil)
	}
	var params callbackParams
	if err := json.Unmarshal(m.Params, &params); err != nil {
		replyErr("bad callback request: " + err.Error())
		return
	}
	if cb == nil {
		kind := params.Kind
		if kind == "" {
			kind = "llm_query"
		}
		replyErr(kind + " is not available: this session has no LLM configured")
		return
	}
	req := core.Query{
		Kind:       params.Kind,
		Prompts:    params.Prompts,
		Contexts:   params.Contexts,
		HasContext: params.HasContext,
		Model:      params.Model,
	}
	go func() {
		var (
			results []string
			err     error
		)
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("callback panicked: %v", r)
				}
			}()
			results, err = cb(ctx, req)
		}()
		if err == nil {
			err = req.CheckAnswers(results)
		}
		if err != nil {
			replyErr(err.Error())
			return
		}
		_ = d.send(response{JSONRPC: "2.0", ID: id, Result: map[string]any{"results": results}}, nil)
	}()
}

type varReply struct {
	Found bool   `json:"found"`
	JSON  string `json:"json"`
}

// Variable reads a global of the session as JSON. found is false when the
// name is not defined (None is found, with "null"). A value JSON cannot
// encode comes back as a JSON string holding its repr (at most 1 MiB).
func (p *Process) Variable(ctx context.Context, name string) (found bool, jsonValue string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.ensure(ctx)
	if err != nil {
		return false, "", err
	}
	p.nextID++
	id := p.nextID
	idStr := strconv.FormatUint(id, 10)
	if err := d.send(request{JSONRPC: "2.0", ID: id, Method: "get_variable", Params: map[string]string{"name": name}}, nil); err != nil {
		return false, "", p.lost(d, err)
	}
	for {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				return false, "", p.lost(d, errors.New("the interpreter's channel closed"))
			}
			if m.Method == "callback" {
				p.callback(ctx, d, m, nil)
				continue
			}
			if string(m.ID) != idStr {
				continue
			}
			if m.Error != nil {
				return false, "", fmt.Errorf("repl: get_variable %q: %s", name, m.Error.Message)
			}
			var r varReply
			if err := json.Unmarshal(m.Result, &r); err != nil {
				return false, "", fmt.Errorf("repl: get_variable %q: bad reply: %w", name, err)
			}
			return r.Found, r.JSON, nil
		case <-d.exited:
			return false, "", p.lost(d, errors.New("the interpreter exited"))
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-p.closing:
			return false, "", ErrClosed
		}
	}
}

// lost restarts after the driver died outside a cell.
func (p *Process) lost(d *inst, cause error) error {
	d.kill()
	d.closeStreams()
	desc, _, _ := d.exitDescription()
	err := fmt.Errorf("repl: %w (%s); the interpreter was restarted and the session state was lost", cause, desc)
	if rerr := p.restart(); rerr != nil {
		err = fmt.Errorf("%w; restarting it failed: %v", err, rerr)
	}
	return err
}
