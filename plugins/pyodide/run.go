package pyodide

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/fuel"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/memalloc"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/memfs"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/rootfs"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/wsfs"
)

// Guest paths.
const (
	GuestWorkspace = "/app"
	GuestCodeFile  = "/sandbox/user_code.py"
	guestStdlibDir = "/usr/local/lib/python3.11"
)

// RunSpec is one program run.
type RunSpec struct {
	// Code is the Python source. It is served read-only at
	// /sandbox/user_code.py, outside the workspace, and run as __main__ with
	// that __file__, so tracebacks look like a user's own script.
	Code string
	// Workspace is the host directory mounted at /app, the guest's working
	// directory. Empty: a temporary directory is created and removed after
	// the run (the result still lists the files the program wrote).
	Workspace string
	Args      []string          // sys.argv[1:]
	Env       map[string]string // extra environment variables
	Stdin     []byte
	// NoSetup skips the sys.path setup: by default /app and
	// /app/site-packages are put first so workspace modules import.
	NoSetup bool

	// Fuel is the CPU budget in fuel units (loop iterations plus entries of
	// calling functions, counted in the interpreter's own code; a program
	// printing hello costs ~2.4 million, a simple Python loop iteration ~57).
	// 0 means DefaultFuel; negative means unlimited.
	Fuel int64
	// Timeout is the wall-clock limit; 0 means none (fuel still applies).
	Timeout time.Duration
	// MemoryBytes caps the guest's linear memory; 0 means DefaultMemoryBytes.
	MemoryBytes uint64
	// MaxOutputBytes caps stdout and stderr each; 0 means
	// defaults.MaxOutputBytes; negative means unlimited.
	MaxOutputBytes int
}

// Result is what a run produced. Field names follow core's result shape.
type Result struct {
	Success  bool          `json:"success"`   // exit status 0 and no limit hit
	ExitCode int           `json:"exit_code"` // process exit status; -1 when the guest trapped
	EndedBy  ending.Reason `json:"ended_by"`  // exit, timeout, cancelled, fuel, memory_limit or crashed (the interpreter trapped)
	// Error is a one-line description of a failure: the last line of a
	// Python traceback, or the limit that stopped the program.
	Error string `json:"error,omitempty"`

	// Stdout and Stderr are capped: head and tail kept (bytes; base64 in JSON).
	Stdout          []byte `json:"stdout"`
	Stderr          []byte `json:"stderr"`
	StdoutOmitted   int64  `json:"stdout_omitted"` // bytes dropped from the middle
	StderrOmitted   int64  `json:"stderr_omitted"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`

	DurationMS      float64  `json:"duration_ms"`
	FuelLimit       int64    `json:"fuel_limit"` // math.MaxInt64 when unlimited
	FuelConsumed    int64    `json:"fuel_consumed"`
	MemoryUsedBytes uint64   `json:"memory_used_bytes"` // guest linear memory size at the end
	MemoryLimit     uint64   `json:"memory_limit"`
	WorkspacePath   string   `json:"workspace_path"`
	FilesCreated    []string `json:"files_created"` // workspace-relative, slash-separated, sorted
	FilesModified   []string `json:"files_modified"`

	// Session cells only.
	Value     string `json:"value,omitempty"`      // repr of the cell's final expression, if any and not None
	StateLost bool   `json:"state_lost,omitempty"` // the interpreter was restarted: earlier globals are gone
}

// Security event types logged with slog (attribute "event").
const (
	EventFuelExhaustion = "fuel_exhaustion"
	EventMemoryLimit    = "memory_limit"
	EventFSEscapeDenied = "fs_escape_denied"
	EventTimeout        = "timeout"
)

// The prelude is run with `python -c`: it moves to /app, sets sys.path and
// runs the code file as __main__, printing a traceback without its own frame.
const prelude = `import sys
def _rlm_run(setup):
    import os
    os.chdir('/app')
    del sys.argv[0]
    p = sys.argv[0]
    if setup:
        sys.path[0:1] = ['/app', '/app/site-packages']
    with open(p, 'rb') as f:
        src = f.read()
    g = sys.modules['__main__'].__dict__
    g.pop('_rlm_run', None)
    g['__file__'] = p
    try:
        exec(compile(src, p, 'exec'), g)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        tb = tb.tb_next if tb is not None else None
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        sys.exit(1)
_rlm_run(%s)
`

func (s *RunSpec) limits() (fuelLimit int64, mem uint64, out int) {
	fuelLimit = s.Fuel
	switch {
	case fuelLimit == 0:
		fuelLimit = DefaultFuel
	case fuelLimit < 0:
		fuelLimit = math.MaxInt64
	}
	mem = s.MemoryBytes
	if mem == 0 {
		mem = DefaultMemoryBytes
	}
	mem = min(mem, MaxMemoryBytes)
	out = s.MaxOutputBytes
	if out == 0 {
		out = defaults.MaxOutputBytes
	} // negative: capbuf keeps everything
	return
}

// Run runs spec.Code in a fresh interpreter. The error is non-nil only when
// the run could not happen (bad workspace, closed Runner); everything the
// program does, including exceeding a limit, is reported in the Result.
func (r *Runner) Run(ctx context.Context, spec RunSpec) (*Result, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errors.New("pyodide: runner is closed")
	}
	setup := "True"
	if spec.NoSetup {
		setup = "False"
	}
	args := append([]string{"python", "-S", "-u", "-B", "-c", fmt.Sprintf(prelude, setup), GuestCodeFile}, spec.Args...)

	ws := spec.Workspace
	if ws == "" {
		d, err := tempDir()
		if err != nil {
			return nil, err
		}
		defer removeAll(d)
		ws = d
	}
	if st, err := os.Stat(ws); err != nil {
		return nil, fmt.Errorf("pyodide: workspace: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("pyodide: workspace %s is not a directory", ws)
	}
	before, err := snapshot(ws)
	if err != nil {
		return nil, fmt.Errorf("pyodide: scanning workspace: %w", err)
	}
	wfs, err := wsfs.New(ws, func(op, path, reason string) {
		r.security(EventFSEscapeDenied, "op", op, "path", path, "reason", reason)
	})
	if err != nil {
		return nil, fmt.Errorf("pyodide: %w", err)
	}
	defer wfs.Close()

	res, err := r.exec(ctx, execSpec{
		spec:  &spec,
		args:  args,
		mount: wfs,
		code:  []byte(spec.Code),
	})
	if err != nil {
		return nil, err
	}
	res.WorkspacePath = ws
	after, err := snapshot(ws)
	if err != nil {
		return nil, fmt.Errorf("pyodide: scanning workspace: %w", err)
	}
	res.FilesCreated, res.FilesModified = delta(before, after)
	r.logComplete(res)
	return res, nil
}

type execSpec struct {
	spec  *RunSpec
	args  []string
	mount *wsfs.FS // nil: no workspace
	code  []byte
	quiet bool // no start/complete events (syntax checks)
}

// exec instantiates and runs one guest with the given limits.
func (r *Runner) exec(ctx context.Context, e execSpec) (*Result, error) {
	spec := e.spec
	fuelLimit, memLimit, outMax := spec.limits()
	if err := r.checkMemory(memLimit); err != nil {
		return nil, err
	}
	if !e.quiet {
		r.log.Info("execution start", "runtime", "python", "backend", "pyodide",
			"fuel", fuelLimit, "memory_bytes", memLimit, "timeout", spec.Timeout, "max_output_bytes", outMax)
	}
	stdout, stderr := capbuf.New(int64(outMax)), capbuf.New(int64(outMax))

	wake := make(chan struct{})

	// "/" is a read-only skeleton with /dev: paths outside the mounts are
	// then "not found" rather than PermissionError (see internal/rootfs).
	mounts := []string{guestStdlibDir, "/sandbox"}
	if e.mount != nil {
		mounts = append(mounts, GuestWorkspace)
	}
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).
		WithSysFSMount(rootfs.New(mounts...), "/").
		WithFSMount(r.stdlib, guestStdlibDir).
		WithFSMount(memfs.FS{"user_code.py": e.code}, "/sandbox")
	if e.mount != nil {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(e.mount, GuestWorkspace)
	}
	// Sleep until the watchdog fires at most. It empties the fuel before
	// it closes wake, so the guest traps as soon as it runs again instead
	// of running on (e.g. printing) for a moment.
	cfg := guestConfig(fsc, e.args, stdout, stderr, spec.Env, func() <-chan struct{} { return wake }).
		WithStdin(bytes.NewReader(spec.Stdin))

	alloc := &memalloc.Allocator{Limit: memLimit}
	ictx := experimental.WithMemoryAllocator(ctx, alloc)
	start := time.Now()
	mod, err := r.rt.InstantiateModule(ictx, r.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("pyodide: instantiating python.wasm: %w", err)
	}
	defer mod.Close(context.Background())
	g, ok := mod.ExportedGlobal(fuel.GlobalName).(api.MutableGlobal)
	if !ok {
		if !r.noFuel {
			return nil, fmt.Errorf("pyodide: %s has no mutable %q global", r.source, fuel.GlobalName)
		}
		g = &fakeGlobal{}
	}
	g.Set(uint64(fuelLimit))

	// The watchdog stops the guest at the deadline or the caller's cancel
	// (see fuelStop).
	stop := &fuelStop{g: g, wake: wake}
	w := watchdog.Start(ctx, watchdog.Options{Timeout: spec.Timeout, CtxDeadlineIsTimeout: true,
		Stop: func(ending.Reason) { stop.stop() }, Again: stop.again})
	_, callErr := mod.ExportedFunction("_start").Call(ctx)
	w.Done()
	dur := time.Since(start)

	left := int64(g.Get())
	res := &Result{
		DurationMS:      float64(dur.Microseconds()) / 1000,
		FuelLimit:       fuelLimit,
		MemoryLimit:     memLimit,
		MemoryUsedBytes: uint64(mod.Memory().Size()),
		EndedBy:         ending.Exit,
	}
	res.FuelConsumed = stop.consumed(fuelLimit)

	var exitErr *sys.ExitError
	switch {
	case callErr == nil:
		res.ExitCode = 0
	case errors.As(callErr, &exitErr):
		res.ExitCode = int(exitErr.ExitCode())
	default:
		res.ExitCode = -1
		// The watchdog keeps zeroing the counter until _start returns, so
		// after a trap it may read 0, not -1: a trap after the stop is the
		// stop (w.Ending puts the watchdog's cause first).
		res.EndedBy, res.Error = stoppedBy(w, w.Why(), left, alloc.Refused(), fuelLimit, memLimit, "the interpreter trapped: "+firstLine(callErr.Error()))
		fmt.Fprintf(stderr, "\n%s\n", res.Error)
	}
	if res.EndedBy == ending.Exit && res.ExitCode != 0 {
		if alloc.Refused() && bytes.Contains(stderr.Kept(), []byte("MemoryError")) {
			res.EndedBy = ending.MemoryLimit
		}
		res.Error = lastLine(stderr.Kept())
	}
	res.Success = res.EndedBy == ending.Exit && res.ExitCode == 0
	res.Stdout, res.Stderr = stdout.Kept(), stderr.Kept()
	res.StdoutOmitted, res.StderrOmitted = stdout.Omitted(), stderr.Omitted()
	res.StdoutTruncated, res.StderrTruncated = stdout.Omitted() > 0, stderr.Omitted() > 0

	if !e.quiet {
		switch res.EndedBy {
		case ending.Fuel:
			r.security(EventFuelExhaustion, "fuel", fuelLimit, "fuel_consumed", res.FuelConsumed)
		case ending.MemoryLimit:
			r.security(EventMemoryLimit, "memory_bytes", memLimit, "memory_used_bytes", res.MemoryUsedBytes)
		case ending.Timeout:
			r.security(EventTimeout, "timeout", spec.Timeout, "duration_ms", res.DurationMS)
		}
	}
	return res, nil
}

// fakeGlobal stands in for the fuel counter of an uninstrumented module
// (benchmarks only): nothing decrements it.
type fakeGlobal struct {
	api.MutableGlobal
	v atomic.Uint64
}

func (f *fakeGlobal) Get() uint64  { return f.v.Load() }
func (f *fakeGlobal) Set(v uint64) { f.v.Store(v) }

// guestEnv is the environment every guest starts with; RunSpec.Env and
// SessionSpec.Env add to it and override it.
var guestEnv = map[string]string{
	"PYTHONHOME": "/usr/local",
	"HOME":       GuestWorkspace,
	"LANG":       "C.UTF-8",
}

// withEnv sets the merged environment, sorted so runs are reproducible.
// guestConfig is the module configuration of every guest, a program's or a
// session's interpreter: the host's clocks and randomness, no start
// function (_start is called once the fuel is set), guestEnv with env over
// it, and a sleep that ends early when the channel wake returns is closed
// (wake is asked at each sleep: a session swaps it per cell).
func guestConfig(fsc wazero.FSConfig, args []string, stdout, stderr io.Writer, env map[string]string, wake func() <-chan struct{}) wazero.ModuleConfig {
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(args...).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-wake():
			}
		}).
		WithStartFunctions()
	return withEnv(cfg, env)
}

func withEnv(cfg wazero.ModuleConfig, extra map[string]string) wazero.ModuleConfig {
	env := make(map[string]string, len(guestEnv)+len(extra))
	for k, v := range guestEnv {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, env[k])
	}
	return cfg
}

// ErrMemoryTooSmall is wrapped by the error of a run or session whose
// memory limit is below the interpreter's initial memory: the request is
// wrong, not the runtime, and the plugin refuses it as such.
var ErrMemoryTooSmall = errors.New("memory limit below the interpreter's initial memory")

// checkMemory rejects a cap below the module's initial memory: wazero cannot
// fail an instantiation gracefully when the allocator refuses that much.
func (r *Runner) checkMemory(limit uint64) error {
	for _, m := range r.compiled.ExportedMemories() {
		if min := uint64(m.Min()) << 16; limit < min {
			return fmt.Errorf("pyodide: memory limit of %d bytes is below the interpreter's initial memory of %d bytes; give at least %d MiB (--memory %dMiB): %w",
				limit, min, (min+1<<20-1)>>20, (min+1<<20-1)>>20, ErrMemoryTooSmall)
		}
	}
	return nil
}

func tempDir() (string, error) {
	d, err := os.MkdirTemp("", "rlm-pyodide-*")
	if err != nil {
		return "", fmt.Errorf("pyodide: creating a workspace: %w", err)
	}
	return d, nil
}

func removeAll(dir string) error { return os.RemoveAll(dir) }

func (r *Runner) security(event string, attrs ...any) {
	r.log.Warn("security event", append([]any{"event", event, "runtime", "python", "backend", "pyodide"}, attrs...)...)
}

func (r *Runner) logComplete(res *Result) {
	lvl := slog.LevelInfo
	r.log.Log(context.Background(), lvl, "execution complete", "runtime", "python", "backend", "pyodide",
		"success", res.Success, "ended_by", string(res.EndedBy), "exit_code", res.ExitCode,
		"duration_ms", res.DurationMS, "fuel_consumed", res.FuelConsumed,
		"memory_used_bytes", res.MemoryUsedBytes, "files_created", len(res.FilesCreated),
		"files_modified", len(res.FilesModified))
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// lastLine returns the last non-blank line, the exception line of a traceback.
func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n\r\t "), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 {
			return string(l)
		}
	}
	return ""
}

// Check reports whether code compiles as Python, without running it: the
// guest only calls compile(code, "<sandbox>", "exec"), has no workspace
// mounted and cannot touch any file. msg describes the syntax error.
func (r *Runner) Check(ctx context.Context, code string) (ok bool, msg string, err error) {
	const checker = `import sys
try:
    with open('/sandbox/user_code.py', 'rb') as f:
        compile(f.read(), '<sandbox>', 'exec')
except (SyntaxError, ValueError) as e:
    line = getattr(e, 'lineno', None)
    sys.stdout.write('ERR %s: %s' % (type(e).__name__, getattr(e, 'msg', None) or e) + (' (line %d)' % line if line else ''))
else:
    sys.stdout.write('OK')
`
	res, err := r.exec(ctx, execSpec{
		spec:  &RunSpec{Fuel: DefaultFuel, Timeout: defaults.Timeout, MaxOutputBytes: 64 << 10},
		args:  []string{"python", "-S", "-u", "-B", "-c", checker},
		code:  []byte(code),
		quiet: true,
	})
	if err != nil {
		return false, "", err
	}
	out := string(res.Stdout)
	switch {
	case out == "OK":
		return true, "", nil
	case len(out) > 4 && out[:4] == "ERR ":
		return false, out[4:], nil
	}
	return false, "", fmt.Errorf("pyodide: syntax check failed (%s, exit %d): %s", res.EndedBy, res.ExitCode, lastLine(res.Stderr))
}
