package pyodide

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
	"github.com/rlmkit/rlm/plugins/internal/pycell"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/chanfs"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/fuel"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/memalloc"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/memfs"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/rootfs"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/wsfs"
)

//go:embed repl_driver.py
var replDriver string

// driver is the REPL server run inside the guest: the cell semantics shared
// with the native REPL (plugins/internal/pycell), then repl_driver.py.
var driver = pycell.Source + "\n" + replDriver

// CallbackFunc answers a guest's llm_query or rlm_query (batched forms carry
// several prompts; one result each, in order). An error is raised in the
// cell as LLMQueryError. It is the native REPL's callback type too, so the
// plugin's session stream answers both backends with one bridge.
type CallbackFunc = plugin.CallbackFunc

// SessionSpec configures a REPL session.
type SessionSpec struct {
	// Workspace is mounted at /app as for Run. Empty: a temporary directory
	// removed by Close.
	Workspace string
	// Context becomes the guest variable `context`: a str, or, with
	// ContextJSON, the decoded JSON value. It is served to the guest as a
	// read-only file, so a large context costs one read, not an encoding.
	Context     []byte
	ContextJSON bool
	Env         map[string]string
	// MemoryBytes caps guest memory for the session's whole life.
	MemoryBytes uint64
	// Callback answers llm_query and friends. Nil: such calls raise.
	Callback CallbackFunc
}

// CellSpec limits one cell. Zero values mean the Run defaults.
type CellSpec struct {
	Code           string
	Fuel           int64
	Timeout        time.Duration
	MaxOutputBytes int
	// Callback answers this cell's model queries instead of the session's.
	Callback CallbackFunc
}

// ErrUndefined is wrapped by GetVariable's error for a name the session
// has not defined.
var ErrUndefined = errors.New("pyodide: variable not defined")

// Session is a long-lived guest that keeps its globals between cells, like a
// notebook. Cells run one at a time.
//
// A cell that exhausts its fuel or time cannot be interrupted gently: WASI
// has no signals, and a `while True: pass` never returns to the driver. The
// instance is discarded instead; the cell's result has StateLost set and the
// next cell starts a fresh interpreter with the same context.
type Session struct {
	r    *Runner
	spec SessionSpec
	ws   string
	tmp  bool

	mu   sync.Mutex // one cell at a time
	inst *instance
	lost bool // the previous instance died; report on the next result too

	// cancelCell stops the running cell (Interrupt); nil between cells.
	cancelMu   sync.Mutex
	cancelCell context.CancelFunc
}

// instance is one running driver.
type instance struct {
	mod    api.Module
	fuel   api.MutableGlobal
	ch     *chanfs.Chan
	wfs    *wsfs.FS
	alloc  *memalloc.Allocator
	exited chan struct{}
	err    error // _start's error, valid after exited is closed

	out, errw *switchWriter
	// interrupt is closed to wake a sleeping guest; swapped per cell.
	interrupt atomic.Pointer[chan struct{}]
	nextID    int64
}

// switchWriter forwards to the current cell's buffer; output between cells
// (there should be none) is dropped.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.w.Write(p)
	}
	return len(p), nil
}

// OpenSession starts a REPL guest and waits until it is ready.
func (r *Runner) OpenSession(ctx context.Context, spec SessionSpec) (*Session, error) {
	s := &Session{r: r, spec: spec, ws: spec.Workspace}
	if s.ws == "" {
		d, err := tempDir()
		if err != nil {
			return nil, err
		}
		s.ws, s.tmp = d, true
	}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// WorkspacePath is the host directory mounted at /app.
func (s *Session) WorkspacePath() string { return s.ws }

func (s *Session) start(ctx context.Context) error {
	r := s.r
	_, memLimit, _ := (&RunSpec{MemoryBytes: s.spec.MemoryBytes}).limits()
	if err := r.checkMemory(memLimit); err != nil {
		return err
	}
	inst := &instance{ch: chanfs.New(), exited: make(chan struct{}), out: &switchWriter{}, errw: &switchWriter{}}
	never := make(chan struct{})
	inst.interrupt.Store(&never)
	wfs, err := wsfs.New(s.ws, func(op, path, reason string) {
		r.security(EventFSEscapeDenied, "op", op, "path", path, "reason", reason)
	})
	if err != nil {
		return fmt.Errorf("pyodide: %w", err)
	}
	inst.wfs = wfs
	files := memfs.FS{}
	if s.spec.Context != nil {
		files["context"] = s.spec.Context
	}
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).
		WithSysFSMount(rootfs.New(guestStdlibDir, "/rlm/ctx", "/rlm/io", GuestWorkspace), "/").
		WithFSMount(r.stdlib, guestStdlibDir).
		WithFSMount(files, "/rlm/ctx").(sysfs.FSConfig).
		WithSysFSMount(inst.ch, "/rlm/io").(sysfs.FSConfig).
		WithSysFSMount(wfs, GuestWorkspace)
	ctxKind := "text"
	if s.spec.ContextJSON {
		ctxKind = "json"
	}
	cfg := guestConfig(fsc, []string{"python", "-S", "-u", "-B", "-c", driver, ctxKind}, inst.out, inst.errw, s.spec.Env,
		func() <-chan struct{} { return *inst.interrupt.Load() })
	inst.alloc = &memalloc.Allocator{Limit: memLimit}
	mod, err := r.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, inst.alloc), r.compiled, cfg)
	if err != nil {
		wfs.Close()
		return fmt.Errorf("pyodide: instantiating python.wasm: %w", err)
	}
	inst.mod = mod
	g, ok := mod.ExportedGlobal(fuel.GlobalName).(api.MutableGlobal)
	if !ok {
		mod.Close(context.Background())
		wfs.Close()
		return fmt.Errorf("pyodide: %s has no %q global; sessions need fuel", r.source, fuel.GlobalName)
	}
	inst.fuel = g
	g.Set(uint64(DefaultFuel)) // start-up budget
	startBuf := capbuf.New(64 << 10)
	inst.errw.set(startBuf)
	go func() {
		_, inst.err = mod.ExportedFunction("_start").Call(context.Background())
		close(inst.exited)
	}()
	// Wait for the driver's "ready".
	select {
	case line := <-inst.ch.Out():
		var m struct{ Type string }
		if json.Unmarshal(line, &m) != nil || m.Type != "ready" {
			s.kill(inst)
			return fmt.Errorf("pyodide: REPL driver sent %q instead of ready", line)
		}
	case <-inst.exited:
		s.kill(inst)
		return fmt.Errorf("pyodide: REPL driver exited during start-up: %v: %s", inst.err, lastLine(startBuf.Kept()))
	case <-ctx.Done():
		s.kill(inst)
		return ctx.Err()
	}
	inst.errw.set(nil)
	s.inst = inst
	return nil
}

// kill stops an instance for good and waits for its goroutine.
func (s *Session) kill(inst *instance) {
	inst.ch.Close()
	select {
	case <-inst.exited:
	default:
		if p := inst.interrupt.Load(); p != nil {
			select {
			case <-*p:
			default:
				close(*p)
			}
		}
		for done := false; !done; {
			inst.fuel.Set(0)
			select {
			case <-inst.exited:
				done = true
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	inst.mod.Close(context.Background())
	inst.wfs.Close()
}

// Close ends the session and removes a temporary workspace.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst != nil {
		s.inst.ch.Send([]byte(`{"op":"close"}`))
		select {
		case <-s.inst.exited:
		case <-time.After(100 * time.Millisecond):
		}
		s.kill(s.inst)
		s.inst = nil
	}
	if s.tmp {
		s.tmp = false
		return removeAll(s.ws)
	}
	return nil
}

type guestMsg struct {
	Type  string  `json:"type"`
	ID    int64   `json:"id"`
	Value *string `json:"value"`
	JSON  *string `json:"json"`
	Error *string `json:"error"`
	Found *bool   `json:"found"`
	// A callback request, as the native driver sends it.
	Kind       string   `json:"kind"`
	Prompts    []string `json:"prompts"`
	Contexts   []string `json:"contexts"`
	HasContext []bool   `json:"has_context"`
	Model      string   `json:"model"`
}

// Execute runs one cell. Like Run, the error is only for a cell that could
// not be run; what the code did is in the Result, whose Value is the repr of
// a final expression (as an interactive interpreter would echo it).
func (s *Session) Execute(ctx context.Context, cell CellSpec) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stateLost := s.lost
	s.lost = false
	if s.inst == nil {
		if err := s.start(ctx); err != nil {
			return nil, err
		}
	}
	inst := s.inst
	spec := RunSpec{Fuel: cell.Fuel, Timeout: cell.Timeout, MaxOutputBytes: cell.MaxOutputBytes, MemoryBytes: s.spec.MemoryBytes}
	fuelLimit, memLimit, outMax := spec.limits()
	s.r.log.Info("execution start", "runtime", "python", "backend", "pyodide", "mode", "repl",
		"fuel", fuelLimit, "memory_bytes", memLimit, "timeout", cell.Timeout)
	before, err := snapshot(s.ws)
	if err != nil {
		return nil, fmt.Errorf("pyodide: scanning workspace: %w", err)
	}
	stdout, stderr := capbuf.New(int64(outMax)), capbuf.New(int64(outMax))
	inst.out.set(stdout)
	inst.errw.set(stderr)
	defer inst.out.set(nil)
	defer inst.errw.set(nil)

	// The watchdog ends the cell at its deadline, at the caller's cancel
	// or at Interrupt. The loop below stops the guest itself (emptying its
	// fuel, see fuelStop), so that a cell whose result it has read is
	// never stopped; the callbacks' context is cancelled at once.
	cbCtx, cbCancel := context.WithCancel(ctx)
	defer cbCancel()
	w := watchdog.Start(ctx, watchdog.Options{Timeout: cell.Timeout, CtxDeadlineIsTimeout: true,
		Stop: func(ending.Reason) { cbCancel() }})
	defer w.Done()
	s.cancelMu.Lock()
	s.cancelCell = func() { w.Stop(ending.Cancelled) }
	s.cancelMu.Unlock()
	defer func() {
		s.cancelMu.Lock()
		s.cancelCell = nil
		s.cancelMu.Unlock()
	}()
	cb := cell.Callback
	if cb == nil {
		cb = s.spec.Callback
	}
	interrupt := make(chan struct{})
	inst.interrupt.Store(&interrupt)
	stop := &fuelStop{g: inst.fuel, wake: interrupt}

	inst.nextID++
	id := inst.nextID
	req, _ := json.Marshal(map[string]any{"op": "exec", "id": id, "code": cell.Code, "max_value": outMax})
	inst.fuel.Set(uint64(fuelLimit))
	start := time.Now()
	if !inst.ch.Send(req) {
		return nil, errors.New("pyodide: session channel closed")
	}

	res := &Result{FuelLimit: fuelLimit, MemoryLimit: memLimit, WorkspacePath: s.ws, EndedBy: ending.Exit, StateLost: stateLost}
	finish := func() {
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		res.FuelConsumed = stop.consumed(fuelLimit)
		res.MemoryUsedBytes = uint64(inst.mod.Memory().Size())
	}
	stopping := w.Stopping()
	var stoppedFor ending.Reason // the cause the loop stopped the guest for
loop:
	for {
		select {
		case line := <-inst.ch.Out():
			var m guestMsg
			if err := json.Unmarshal(line, &m); err != nil {
				s.r.log.Warn("pyodide: bad message from REPL driver", "err", err)
				continue
			}
			switch m.Type {
			case "callback":
				s.answer(cbCtx, inst, &m, cb)
			case "result":
				if m.ID != id {
					continue
				}
				finish()
				if m.Value != nil {
					res.Value = *m.Value
				}
				if m.Error != nil {
					res.Error = *m.Error
					res.ExitCode = 1
					if inst.alloc.Refused() && len(res.Error) >= 11 && res.Error[:11] == "MemoryError" {
						res.EndedBy = ending.MemoryLimit
					}
				}
				break loop
			}
		case <-inst.exited:
			// The guest died: out of fuel, stopped by the watchdog, or
			// crashed. Once stopped, the counter may be re-zeroed after the
			// trap, so a stopped guest's trap is the stop, whatever the
			// counter reads now.
			finish()
			res.ExitCode = -1
			res.EndedBy, res.Error = stoppedBy(w, stoppedFor, int64(inst.fuel.Get()), inst.alloc.Refused(), fuelLimit, memLimit,
				"the interpreter stopped: "+firstLine(fmt.Sprint(inst.err)))
			fmt.Fprintf(stderr, "\n%s\n", res.Error)
			res.StateLost = true
			s.kill(inst)
			s.inst = nil
			break loop
		case why := <-stopping:
			stopping, stoppedFor = nil, why
			stop.stop()
			w.Repeat(stop.again) // the guest's decrement can race
		}
	}
	w.Done()
	res.Success = res.EndedBy == ending.Exit && res.ExitCode == 0
	res.Stdout, res.Stderr = stdout.Kept(), stderr.Kept()
	res.StdoutOmitted, res.StderrOmitted = stdout.Omitted(), stderr.Omitted()
	res.StdoutTruncated, res.StderrTruncated = stdout.Omitted() > 0, stderr.Omitted() > 0
	after, err := snapshot(s.ws)
	if err == nil {
		res.FilesCreated, res.FilesModified = delta(before, after)
	}
	switch res.EndedBy {
	case ending.Fuel:
		s.r.security(EventFuelExhaustion, "fuel", fuelLimit, "fuel_consumed", res.FuelConsumed)
	case ending.MemoryLimit:
		s.r.security(EventMemoryLimit, "memory_bytes", memLimit, "memory_used_bytes", res.MemoryUsedBytes)
	case ending.Timeout:
		s.r.security(EventTimeout, "timeout", cell.Timeout, "duration_ms", res.DurationMS)
	}
	s.r.logComplete(res)
	return res, nil
}

// Interrupt stops the running cell. WASI has no signals, so this is the
// same stop as a timeout: the instance is discarded and the cell's result
// says state was lost (ended_by cancelled). Without a running cell it does
// nothing.
func (s *Session) Interrupt() error {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.cancelCell != nil {
		s.cancelCell()
	}
	return nil
}

// answer runs the callback for one guest request and sends the reply. The
// guest waits for it, so the cell's fuel does not run meanwhile.
func (s *Session) answer(ctx context.Context, inst *instance, m *guestMsg, cb CallbackFunc) {
	reply := map[string]any{"id": m.ID}
	kind := m.Kind
	if kind == "" {
		kind = "llm_query"
	}
	if cb == nil {
		reply["error"] = kind + " is not available: this session has no LLM configured"
	} else {
		q := core.Query{Kind: kind, Prompts: m.Prompts, Contexts: m.Contexts, HasContext: m.HasContext, Model: m.Model}
		results, err := cb(ctx, q)
		if err == nil {
			err = q.CheckAnswers(results)
		}
		if err != nil {
			reply["error"] = err.Error()
		} else {
			reply["results"] = results
		}
	}
	b, _ := json.Marshal(reply)
	inst.ch.Send(b)
}

// GetVariable returns the repr of a guest global and, when it is
// JSON-encodable, its JSON encoding (else nil).
func (s *Session) GetVariable(ctx context.Context, name string) (repr string, js json.RawMessage, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil {
		return "", nil, errors.New("pyodide: session state was lost; the variable no longer exists")
	}
	inst := s.inst
	inst.nextID++
	id := inst.nextID
	req, _ := json.Marshal(map[string]any{"op": "get", "id": id, "name": name})
	inst.fuel.Set(uint64(DefaultFuel))
	if !inst.ch.Send(req) {
		return "", nil, errors.New("pyodide: session channel closed")
	}
	for {
		select {
		case line := <-inst.ch.Out():
			var m guestMsg
			if json.Unmarshal(line, &m) != nil || m.Type != "result" || m.ID != id {
				continue
			}
			if m.Found != nil && !*m.Found {
				return "", nil, fmt.Errorf("%w: %s", ErrUndefined, derefOr(m.Error, name))
			}
			if m.Error != nil {
				return "", nil, errors.New(*m.Error)
			}
			if m.Value != nil {
				repr = *m.Value
			}
			if m.JSON != nil {
				js = json.RawMessage(*m.JSON)
			}
			return repr, js, nil
		case <-inst.exited:
			s.kill(inst)
			s.inst, s.lost = nil, true
			return "", nil, fmt.Errorf("pyodide: the interpreter stopped: %v", inst.err)
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
}

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
