package pyodide

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Benchmarks measure rlm against its baseline in the same run (TARGETS.md);
// no timing is ever a test's pass/fail. Run:
//
//	go test ./plugins/pyodide -run '^$' -bench . -benchtime 20x

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// cpuLoop is the CPU-bound program compared with native CPython.
const cpuLoop = `s = 0
for i in range(2_000_000):
    s += i * i % 7
print(s)
`

// BenchmarkColdStart is a new Runner (compiled code loaded from the warm
// on-disk cache) plus its first print('hello'): what a fresh plugin process
// pays before its first result.
func BenchmarkColdStart(b *testing.B) {
	requireAssets(b)
	ctx := context.Background()
	warm, err := New(ctx, Options{Logger: quiet}) // fills the caches
	if err != nil {
		b.Fatal(err)
	}
	warm.Close(ctx)
	ws := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := New(ctx, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.Run(ctx, RunSpec{Code: "print('hello')", Workspace: ws})
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
		r.Close(ctx)
	}
}

// BenchmarkHello is one print('hello') round trip on a ready Runner: a fresh
// instance, the prelude, the program, the workspace scan.
func BenchmarkHello(b *testing.B) {
	r := runner(b)
	ctx := context.Background()
	ws := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Run(ctx, RunSpec{Code: "print('hello')", Workspace: ws})
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// nativePython resolves the real interpreter behind any pyenv-style shim.
func nativePython(b *testing.B) string {
	p, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 not found: no native baseline")
	}
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		b.Skipf("python3 -c failed: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// BenchmarkCPULoopVsNative runs the same CPU-bound program in python.wasm
// (with fuel metering) and in native CPython, alternating, and reports the
// ratio. Both timings include interpreter start-up.
func BenchmarkCPULoopVsNative(b *testing.B) {
	r := runner(b)
	py := nativePython(b)
	file := filepath.Join(b.TempDir(), "loop.py")
	if err := os.WriteFile(file, []byte(cpuLoop), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ws := b.TempDir()
	var wasm, native time.Duration
	var want string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := r.Run(ctx, RunSpec{Code: cpuLoop, Workspace: ws, Fuel: -1})
		wasm += time.Since(t0)
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
		t0 = time.Now()
		out, err := exec.Command(py, "-S", file).Output()
		native += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if want == "" {
			want = string(out)
		}
		if string(res.Stdout) != want {
			b.Fatalf("wasm printed %q, native %q", res.Stdout, out)
		}
	}
	b.ReportMetric(float64(wasm.Milliseconds())/float64(b.N), "wasm-ms/op")
	b.ReportMetric(float64(native.Milliseconds())/float64(b.N), "native-ms/op")
	b.ReportMetric(float64(wasm)/float64(native), "x-native")
}

// BenchmarkFuelOverhead runs the CPU-bound program with the instrumented
// module and with the original one, alternating, and reports the ratio.
func BenchmarkFuelOverhead(b *testing.B) {
	metered := runner(b)
	ctx := context.Background()
	plain, err := New(ctx, Options{Logger: quiet, noFuel: true})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close(ctx)
	ws := b.TempDir()
	var tm, tp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := metered.Run(ctx, RunSpec{Code: cpuLoop, Workspace: ws, Fuel: -1})
		tm += time.Since(t0)
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
		t0 = time.Now()
		res, err = plain.Run(ctx, RunSpec{Code: cpuLoop, Workspace: ws})
		tp += time.Since(t0)
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.ReportMetric(float64(tm.Milliseconds())/float64(b.N), "metered-ms/op")
	b.ReportMetric(float64(tp.Milliseconds())/float64(b.N), "plain-ms/op")
	b.ReportMetric(float64(tm)/float64(tp), "x-overhead")
}

// BenchmarkSessionCell is a warm REPL cell round trip with trivial code
// (x = 1): host -> guest driver -> host, in process (no plugin hop).
func BenchmarkSessionCell(b *testing.B) {
	r := runner(b)
	ctx := context.Background()
	s, err := r.OpenSession(ctx, SessionSpec{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := s.Execute(ctx, CellSpec{Code: "x = 1"})
		lat = append(lat, time.Since(t0))
		if err != nil || !res.Success {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkSessionOpen is a new REPL session until its driver is ready.
func BenchmarkSessionOpen(b *testing.B) {
	r := runner(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		s, err := r.OpenSession(ctx, SessionSpec{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
