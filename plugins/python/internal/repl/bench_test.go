package repl

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
)

// reportPercentiles adds p50/p99 (milliseconds) of the samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		i := int(q * float64(len(samples)-1))
		return float64(samples[i].Nanoseconds()) / 1e6
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkCellRoundTrip: a warm `x = 1` cell, host -> driver -> host.
func BenchmarkCellRoundTrip(b *testing.B) {
	p := start(b, Config{})
	ctx := context.Background()
	for range 200 { // warm up
		if _, err := p.Execute(ctx, "x = 1", 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		res, err := p.Execute(ctx, "x = 1", 0, nil)
		samples = append(samples, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
	}
	reportPercentiles(b, samples)
}

// BenchmarkStart: spawn -> ready (no context).
func BenchmarkStart(b *testing.B) {
	benchStart(b, "")
}

// BenchmarkStartFirstResult: spawn -> first cell result.
func BenchmarkStartFirstResult(b *testing.B) {
	benchStart(b, "x = 1")
}

// benchStart times spawn -> ready, or, when first is not empty, spawn ->
// the result of first run as the first cell.
func benchStart(b *testing.B, first string) {
	needPython(b)
	dir := b.TempDir()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		p, err := Start(context.Background(), Config{Python: pythonPath, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if first != "" {
			if _, err := p.Execute(context.Background(), first, 0, nil); err != nil {
				b.Fatal(err)
			}
		}
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		p.Close()
		b.StartTimer()
	}
	reportPercentiles(b, samples)
}

// BenchmarkPrint1MB: a cell printing 1 MiB (default cap: all of it kept).
func BenchmarkPrint1MB(b *testing.B) {
	benchPrint1MB(b, "print('x' * ((1 << 20) - 1))")
}

// benchPrint1MB times cells of code, which must print exactly 1 MiB.
func benchPrint1MB(b *testing.B, code string) {
	p := start(b, Config{})
	ctx := context.Background()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		res, err := p.Execute(ctx, code, 0, nil)
		samples = append(samples, time.Since(t0))
		if err != nil || len(res.Stdout) != 1<<20 {
			b.Fatal(err, len(res.Stdout))
		}
	}
	b.SetBytes(1 << 20)
	reportPercentiles(b, samples)
}

// BenchmarkPrint1MBLines: 1 MiB as 16384 print() calls of 64 bytes.
func BenchmarkPrint1MBLines(b *testing.B) {
	benchPrint1MB(b, "for _ in range(16384):\n    print('y' * 63)")
}

// BenchmarkOpen50MB: spawn -> ready with a 50 MB text context; also reports
// the interpreter's peak RSS (ru_maxrss) as a multiple of the context size.
func BenchmarkOpen50MB(b *testing.B) {
	needPython(b)
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz\n"), 50<<20/37+1)[:50<<20]
	dir := b.TempDir()
	cfg := Config{Python: pythonPath, Dir: dir, Context: &core.Context{Data: data, Kind: "text"}}
	samples := make([]time.Duration, 0, b.N)
	var peak float64
	for b.Loop() {
		t0 := time.Now()
		p, err := Start(context.Background(), cfg)
		samples = append(samples, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		res, err := p.Execute(context.Background(), "import resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)", 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		kb, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		peak = max(peak, float64(kb)*1024/float64(len(data)))
		p.Close()
		b.StartTimer()
	}
	b.SetBytes(int64(len(data)))
	reportPercentiles(b, samples)
	b.ReportMetric(peak, "peak-rss/context")
}

// BenchmarkBarePython is the baseline for BenchmarkStart: the same
// interpreter running `python -c pass` to exit.
func BenchmarkBarePython(b *testing.B) {
	needPython(b)
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command(pythonPath, "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(t0))
	}
	reportPercentiles(b, samples)
}
