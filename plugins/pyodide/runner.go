// Package pyodide runs Python programs in CPython 3.11 compiled to
// wasm32-wasi, inside the wazero WebAssembly runtime, so Python works on a
// machine with no Python at all and untrusted code meets the strongest
// boundary rlm has.
//
// Despite the name (kept for the backend's user-facing name, seed 000), this
// is not Pyodide: Pyodide is an Emscripten build that needs a JavaScript
// engine. CPython for WASI under wazero starts in milliseconds from a warm
// compilation cache, runs in the host process, and can be metered.
//
// What the guest gets:
//   - the workspace directory at /app (its working directory), through a file
//     system that refuses symbolic links and any path leaving the directory;
//   - its code read-only at /sandbox/user_code.py, outside the workspace;
//   - the standard library (sources, pycs, tzdata) read-only at
//     /usr/local/lib/python3.11, served from the embedded python311.zip;
//   - /dev/null, /dev/zero, /dev/random and /dev/urandom, and a read-only "/"
//     holding the mount points, where any other path is "not found";
//   - nothing else: no network, no processes, no threads, no other files.
//
// Limits: memory by a per-run cap on linear memory (a clean MemoryError),
// CPU by fuel (a counter instrumented into the module, see internal/fuel),
// wall-clock time by a watchdog that empties the fuel counter, and output by
// per-stream caps that keep the head and tail.
//
// Not available in this CPython build: ssl, ctypes, threading of real
// threads, subprocess, sockets (zlib, bz2, lzma and sqlite3 are built in).
package pyodide

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/rlmkit/rlm/plugins/pyodide/internal/fuel"
	"github.com/rlmkit/rlm/plugins/pyodide/internal/memfs"
)

// BuildCommand is how to produce python.wasm; errors about a missing or
// unusable binary name it.
const BuildCommand = "make wasm (runs plugins/pyodide/wasm/build.sh)"

// Defaults applied when a RunSpec leaves a limit at zero.
const (
	DefaultFuel        = 2_000_000_000 // about 17 s of CPython work on a 2-core EPYC
	DefaultMemoryBytes = 256 << 20
	// MaxMemoryBytes is the ceiling for any run: wasm32 addresses 4 GiB.
	MaxMemoryBytes = 4 << 30
)

// Options configure a Runner. The zero value uses the embedded python.wasm and
// standard library and caches compiled code under the user cache directory.
type Options struct {
	// WasmPath is a python.wasm to use instead of the embedded one. It may be
	// instrumented already (exports "rlm_fuel") or not; if not, it is
	// instrumented at load time and the result cached.
	WasmPath string
	// StdlibPath is the standard library zip. Default: python311.zip next to
	// WasmPath when WasmPath is set, else the embedded one.
	StdlibPath string
	// CacheDir holds wazero's compilation cache and instrumented modules.
	// Default: $XDG_CACHE_HOME/rlm/wasm-runtime (os.UserCacheDir). "-"
	// disables the on-disk cache (every New then compiles for ~2 s).
	CacheDir string
	// Logger receives execution and security events. Default: slog.Default().
	Logger *slog.Logger

	// noFuel skips instrumentation; only the benchmarks use it, to measure
	// what metering costs. Such a runner has neither fuel nor timeouts.
	noFuel bool
}

// Runner holds one compiled python.wasm and runs programs in fresh instances
// of it. It is safe for concurrent use; each Run gets its own memory, file
// mounts and fuel.
type Runner struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	stdlib   *memfs.Zip
	log      *slog.Logger
	source   string // where python.wasm came from, for messages
	cacheDir string
	noFuel   bool

	mu     sync.Mutex
	closed bool

	versionOnce sync.Once
	version     string
	versionErr  error
}

// New loads, instruments (if needed) and compiles python.wasm.
//
// # Notes
//
//   - With a warm compilation cache this takes ~70 ms; the first time about
//     2 s (two compiler workers are used).
//   - A missing or corrupt binary is an error naming its path and
//     BuildCommand; errors.Is(err, fs.ErrNotExist) holds when it is missing.
func New(ctx context.Context, opts Options) (*Runner, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	wasm, source, err := loadWasm(opts.WasmPath)
	if err != nil {
		return nil, err
	}
	stdlibZip, stdlibSize, stdlibSource, err := loadStdlib(opts.StdlibPath, opts.WasmPath)
	if err != nil {
		return nil, err
	}
	stdlib, err := memfs.NewZipAt(stdlibZip, stdlibSize)
	if err != nil {
		return nil, fmt.Errorf("pyodide: %s is unreadable: %w; rebuild it with %s", stdlibSource, err, BuildCommand)
	}

	cacheDir := opts.CacheDir
	if cacheDir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(base, "rlm", "wasm-runtime")
		} else {
			log.Warn("pyodide: no user cache directory; compiling python.wasm in memory (~2 s per process); set Options.CacheDir", "err", err)
		}
	}
	if cacheDir == "-" {
		cacheDir = ""
	}

	if !fuel.IsInstrumented(wasm) && !opts.noFuel {
		wasm, err = instrumentCached(wasm, cacheDir, log)
		if err != nil {
			return nil, fmt.Errorf("pyodide: %s: %w; rebuild it with %s", source, err, BuildCommand)
		}
	}

	cfg := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(MaxMemoryBytes >> 16).
		WithCloseOnContextDone(false) // see Run: a watchdog empties the fuel instead
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(cacheDir, "compiled"))
		if err != nil {
			log.Warn("pyodide: compilation cache unavailable; compiling in memory", "dir", cacheDir, "err", err)
		} else {
			cfg = cfg.WithCompilationCache(cache)
		}
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("pyodide: WASI: %w", err)
	}
	start := time.Now()
	compiled, err := rt.CompileModule(experimental.WithCompilationWorkers(ctx, 2), wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("pyodide: %s is not a usable WebAssembly module: %w; rebuild it with %s", source, err, BuildCommand)
	}
	if _, ok := compiled.ExportedFunctions()["_start"]; !ok {
		rt.Close(ctx)
		return nil, fmt.Errorf("pyodide: %s has no _start export (not a WASI command module); rebuild it with %s", source, BuildCommand)
	}
	log.Debug("pyodide: module ready", "source", source, "compile_ms", time.Since(start).Milliseconds())
	return &Runner{rt: rt, compiled: compiled, stdlib: stdlib, log: log, source: source, cacheDir: cacheDir, noFuel: opts.noFuel}, nil
}

// Close releases the compiled module and the runtime. Runs in progress fail.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	return r.rt.Close(ctx)
}

// RuntimeVersion is the guest's version, e.g. "Python 3.11.2 (wasi)",
// asked from the interpreter once (one short run) and then remembered.
func (r *Runner) RuntimeVersion(ctx context.Context) (string, error) {
	r.versionOnce.Do(func() {
		res, err := r.exec(ctx, execSpec{
			spec:  &RunSpec{Timeout: 10 * time.Second},
			args:  []string{"python", "-S", "-c", "import sys; print('Python %d.%d.%d (%s)' % (sys.version_info[:3] + (sys.platform,)), end='')"},
			quiet: true,
		})
		switch {
		case err != nil:
			r.versionErr = err
		case !res.Success:
			r.versionErr = fmt.Errorf("pyodide: asking the interpreter its version: %s", res.Error)
		default:
			r.version = string(res.Stdout)
		}
	})
	return r.version, r.versionErr
}

func loadWasm(path string) ([]byte, string, error) {
	if path == "" {
		b, err := embeddedAsset("python.wasm")
		if err != nil {
			return nil, "", fmt.Errorf("pyodide: this binary has no embedded python.wasm (plugins/pyodide/wasm/assets was empty when it was built): build it with %s and rebuild, or set a wasm path: %w", BuildCommand, err)
		}
		return b, "embedded python.wasm", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("pyodide: python.wasm not found at %s: build it with %s: %w", path, BuildCommand, err)
		}
		return nil, "", fmt.Errorf("pyodide: reading python.wasm: %w", err)
	}
	return b, path, nil
}

func loadStdlib(path, wasmPath string) (io.ReaderAt, int64, string, error) {
	if path == "" && wasmPath != "" {
		path = filepath.Join(filepath.Dir(wasmPath), "python311.zip")
	}
	if path == "" {
		r, size, err := embeddedReaderAt("python311.zip")
		if err != nil {
			return nil, 0, "", fmt.Errorf("pyodide: this binary has no embedded python311.zip: build it with %s and rebuild: %w", BuildCommand, err)
		}
		return r, size, "embedded python311.zip", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, "", fmt.Errorf("pyodide: standard library zip not found at %s: build it with %s: %w", path, BuildCommand, err)
		}
		return nil, 0, "", fmt.Errorf("pyodide: reading the standard library: %w", err)
	}
	return bytes.NewReader(b), int64(len(b)), path, nil
}

// instrumentVersion changes whenever internal/fuel changes its output, so a
// cached instrumented module is never stale.
const instrumentVersion = "fuel-v2"

// instrumentCached adds fuel metering, reusing an earlier result from
// cacheDir. Instrumenting python.wasm takes ~0.1 s, more than the whole cold
// start budget, so it is done once per binary, not once per process.
//
// Instrumenting at load time rather than in build.sh means any python.wasm
// (a custom WasmPath included) is metered, and a change to the instrumenter
// cannot be masked by build.sh's cache, which is keyed on the script alone.
func instrumentCached(wasm []byte, cacheDir string, log *slog.Logger) ([]byte, error) {
	sum := sha256.Sum256(append([]byte(instrumentVersion), wasm...))
	key := hex.EncodeToString(sum[:])
	var path string
	if cacheDir != "" {
		path = filepath.Join(cacheDir, "instrumented", key+".wasm")
		if b, err := os.ReadFile(path); err == nil && fuel.IsInstrumented(b) {
			return b, nil
		}
	}
	start := time.Now()
	out, st, err := fuel.Instrument(wasm)
	if err != nil {
		return nil, fmt.Errorf("fuel instrumentation failed: %w", err)
	}
	log.Debug("pyodide: instrumented for fuel", "functions", st.Functions, "loops", st.Loops, "ms", time.Since(start).Milliseconds())
	if path != "" {
		if err := writeFileAtomic(path, out); err != nil {
			log.Warn("pyodide: cannot cache the instrumented module", "path", path, "err", err)
		}
	}
	return out, nil
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
