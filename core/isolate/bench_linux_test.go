package isolate

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

// BenchmarkPythonPass measures a trivial `python3 -c pass` under each level.
// Figures and the command are in BENCHMARKS.md.
func BenchmarkPythonPass(b *testing.B) {
	p := python(b)
	for _, level := range []Level{LevelNone, LevelProcess, LevelNamespace} {
		b.Run(string(level), func(b *testing.B) {
			requireLevel(b, level)
			dir := b.TempDir()
			spec := Spec{Level: level, Argv: []string{p.exe, "-c", "pass"}, Dir: dir, ReadOnlyPaths: p.roDirs}
			if level != LevelNone {
				spec.MemoryBytes, spec.MaxProcesses, spec.CPUSeconds, spec.OpenFiles = 256<<20, 64, 10, 256
			}
			for i := 0; i < b.N; i++ {
				c, err := Command(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Run(); err != nil || c.Outcome().ExitCode != 0 {
					b.Fatalf("err=%v outcome=%+v", err, c.Outcome())
				}
			}
		})
	}
}

// TestBenchmarkRatios prints the median time of `python3 -c pass` per level
// and its ratio to "none", interleaving the levels so that machine noise
// hits them alike. Run with RLM_ISOLATE_BENCH=N (N rounds).
func TestBenchmarkRatios(t *testing.T) {
	rounds := 0
	fmt.Sscan(os.Getenv("RLM_ISOLATE_BENCH"), &rounds)
	if rounds <= 0 {
		t.Skip("set RLM_ISOLATE_BENCH=<rounds> to measure")
	}
	p := python(t)
	levels := []Level{LevelNone, LevelProcess, LevelNamespace}
	times := map[Level][]time.Duration{}
	for r := 0; r < rounds; r++ {
		for _, level := range levels {
			requireLevel(t, level)
			spec := Spec{Level: level, Argv: []string{p.exe, "-c", "pass"}, Dir: t.TempDir(), ReadOnlyPaths: p.roDirs}
			if level != LevelNone {
				spec.MemoryBytes, spec.MaxProcesses, spec.CPUSeconds, spec.OpenFiles = 256<<20, 64, 10, 256
			}
			start := time.Now()
			c, err := Command(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Run(); err != nil || c.Outcome().ExitCode != 0 {
				t.Fatalf("err=%v outcome=%+v", err, c.Outcome())
			}
			times[level] = append(times[level], time.Since(start))
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	base := median(times[LevelNone])
	for _, level := range levels {
		m := median(times[level])
		t.Logf("%-9s median %7.2f ms  ratio %.2f  (%d runs)", level, float64(m.Microseconds())/1000, float64(m)/float64(base), len(times[level]))
	}
}
