package isolate

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
)

// BenchmarkPythonPass measures a trivial `python3 -c pass` under each level.
// Figures and the command are in BENCHMARKS.md.
func BenchmarkPythonPass(b *testing.B) {
	p := python(b)
	for _, level := range []Level{LevelNone, LevelProcess, LevelNamespace} {
		b.Run(string(level), func(b *testing.B) {
			requireLevel(b, level)
			dir := b.TempDir()
			spec := Spec{Spec: isolation.Spec{Level: level, Argv: []string{p.exe, "-c", "pass"}, Dir: dir, ReadOnlyPaths: p.roDirs}}
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

// BenchmarkLevelRatios reports the median time of `python3 -c pass` per
// level and its ratio to "none", interleaving the levels round by round so
// that machine noise hits them alike (b.N rounds).
func BenchmarkLevelRatios(b *testing.B) {
	p := python(b)
	levels := []Level{LevelNone, LevelProcess, LevelNamespace}
	for _, level := range levels {
		requireLevel(b, level)
	}
	times := map[Level][]time.Duration{}
	for r := 0; r < b.N; r++ {
		for _, level := range levels {
			spec := Spec{Spec: isolation.Spec{Level: level, Argv: []string{p.exe, "-c", "pass"}, Dir: b.TempDir(), ReadOnlyPaths: p.roDirs}}
			if level != LevelNone {
				spec.MemoryBytes, spec.MaxProcesses, spec.CPUSeconds, spec.OpenFiles = 256<<20, 64, 10, 256
			}
			start := time.Now()
			c, err := Command(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Run(); err != nil || c.Outcome().ExitCode != 0 {
				b.Fatalf("err=%v outcome=%+v", err, c.Outcome())
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
		b.ReportMetric(float64(m.Microseconds())/1000, string(level)+"-ms")
		if level != LevelNone {
			b.ReportMetric(float64(m)/float64(base), string(level)+"/none")
		}
	}
}
