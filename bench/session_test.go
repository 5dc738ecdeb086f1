package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

func pythonRuntime(b *testing.B) *client.Runtime {
	realPython(b)
	p, err := launch.Launch(binDir + "/rlm-plugin-python")
	if err != nil {
		b.Fatal(err)
	}
	rt := client.NewRuntime("python", "native", p.Client, p.Kill, isolate.Available)
	b.Cleanup(rt.Close)
	return rt
}

func openSession(b *testing.B, rt *client.Runtime, opts core.SessionOptions) core.Session {
	s, err := rt.OpenSession(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// cellLatencies runs code b.N times and reports p50/p99 in microseconds.
func cellLatencies(b *testing.B, s core.Session, code string) {
	ctx := context.Background()
	for i := 0; i < 50; i++ { // warm up
		if _, err := s.Execute(ctx, code, 0); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := s.Execute(ctx, code, 0)
		lat = append(lat, time.Since(t0))
		if err != nil || r.Error != "" {
			b.Fatalf("%v %v", err, r.Error)
		}
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
}

// BenchmarkCellRoundTripPlugin is a warm cell `x = 1`: host → plugin (gRPC
// stream) → driver (JSON-RPC on pipes) → back.
func BenchmarkCellRoundTripPlugin(b *testing.B) {
	cellLatencies(b, openSession(b, pythonRuntime(b), core.SessionOptions{}), "x = 1")
}

// BenchmarkCellPrint1MB is a cell printing 1 MB through the plugin.
func BenchmarkCellPrint1MB(b *testing.B) {
	s := openSession(b, pythonRuntime(b), core.SessionOptions{Limits: core.Limits{MaxOutputBytes: 2 << 20}})
	cellLatencies(b, s, "print('x' * 1_000_000)")
}

// BenchmarkSessionOpen is spawn → first result: opening a session and
// running `x = 1`.
func BenchmarkSessionOpen(b *testing.B) {
	rt := pythonRuntime(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, err := rt.OpenSession(ctx, core.SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Execute(ctx, "x = 1", 0); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		s.Close()
	}
	p50, p99 := percentiles(lat)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
}

// BenchmarkSessionOpen50MB opens a session whose context is 50 MB and runs
// len(context); it reports the plugin host's peak RSS growth is not
// measured here (see the repl package benchmark for Python's peak).
func BenchmarkSessionOpen50MB(b *testing.B) {
	rt := pythonRuntime(b)
	data := []byte(strings.Repeat("abcdefghij", 5<<20))
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, err := rt.OpenSession(ctx, core.SessionOptions{Context: &core.Context{Data: data}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Execute(ctx, "print(len(context))", 0)
		if err != nil || strings.TrimSpace(r.Stdout) != "52428800" {
			b.Fatalf("%v %q", err, r.Stdout)
		}
		lat = append(lat, time.Since(t0))
		s.Close()
	}
	p50, _ := percentiles(lat)
	b.ReportMetric(ms(p50), "p50-ms")
}

// BenchmarkCellRoundTripPyodide is the same warm cell on WebAssembly
// Python: host → rlm-plugin-pyodide (gRPC stream) → guest driver → back.
func BenchmarkCellRoundTripPyodide(b *testing.B) {
	p, err := launch.Launch(binDir + "/rlm-plugin-pyodide")
	if err != nil {
		b.Fatal(err)
	}
	rt := client.NewRuntime("python", "pyodide", p.Client, p.Kill, isolate.Available)
	b.Cleanup(rt.Close)
	cellLatencies(b, openSession(b, rt, core.SessionOptions{}), "x = 1")
}

// BenchmarkSessionIsolation compares a python session at isolation process
// and namespace in the same run: opens are interleaved (one of each per
// iteration, so machine noise hits both alike) and measured spawn → first
// result; then a warm cell `x = 1` at each level. ns/proc is the ratio of
// the open p50s.
func BenchmarkSessionIsolation(b *testing.B) {
	rt := pythonRuntime(b)
	ctx := context.Background()
	levels := []string{"process", "namespace"}
	open := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for _, lv := range levels {
			t0 := time.Now()
			s, err := rt.OpenSession(ctx, core.SessionOptions{Limits: core.Limits{Isolation: lv}})
			if err != nil {
				b.Fatal(err)
			}
			if r, err := s.Execute(ctx, "x = 1", 0); err != nil || r.Isolation != lv && r.Isolation != "" {
				b.Fatalf("%s: %v %+v", lv, err, r)
			}
			open[lv] = append(open[lv], time.Since(t0))
			s.Close()
		}
	}
	p50 := map[string]time.Duration{}
	for _, lv := range levels {
		p, _ := percentiles(open[lv])
		p50[lv] = p
		b.ReportMetric(ms(p), "open-"+lv+"-p50-ms")
	}
	b.ReportMetric(float64(p50["namespace"])/float64(p50["process"]), "open-ns/proc")
	for _, lv := range levels {
		s := openSession(b, rt, core.SessionOptions{Limits: core.Limits{Isolation: lv}})
		lat := make([]time.Duration, 0, 200)
		for i := 0; i < 250; i++ {
			t0 := time.Now()
			if _, err := s.Execute(ctx, "x = 1", 0); err != nil {
				b.Fatal(err)
			}
			if i >= 50 { // the first 50 warm up
				lat = append(lat, time.Since(t0))
			}
		}
		c50, c99 := percentiles(lat)
		b.ReportMetric(float64(c50.Microseconds()), "cell-"+lv+"-p50-us")
		b.ReportMetric(float64(c99.Microseconds()), "cell-"+lv+"-p99-us")
	}
}
