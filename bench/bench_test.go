// Package bench measures rlm against its baselines in the same run, so the
// figures in BENCHMARKS.md are ratios that hold on a loaded machine too.
// Run with `make bench` (go test -bench . ./bench/...). Nothing here asserts
// a time: benchmarks report, they do not pass or fail.
package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/internal/testutil"
)

var binDir string

func TestMain(m *testing.M) {
	cmds, _ := filepath.Glob("../plugins/*/cmd/rlm-plugin-*")
	testutil.BuildMain(m, &binDir, append([]string{"-trimpath", "-ldflags=-s -w", "../cmd/rlm"}, cmds...)...)
}

// realPython resolves a pyenv-style shim to the interpreter it runs, so the
// baseline is the real python3, as the targets define it.
func realPython(tb testing.TB) string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		tb.Skip("python3 not installed")
	}
	return strings.TrimSpace(string(out))
}

// percentiles returns p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timeCmd runs argv once and returns its wall time; a failure stops the
// benchmark (a broken command would otherwise look fast).
func timeCmd(b *testing.B, env []string, argv ...string) time.Duration {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%v: %v\n%s", argv, err, out)
	}
	return d
}

// compareCommands alternates rlm and the baseline, b.N times each, and
// reports both medians and their ratio.
func compareCommands(b *testing.B, env []string, rlm, base []string) {
	timeCmd(b, env, rlm...) // warm caches (tool probe, page cache)
	timeCmd(b, env, base...)
	var tr, tb []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr = append(tr, timeCmd(b, env, rlm...))
		tb = append(tb, timeCmd(b, env, base...))
	}
	b.StopTimer()
	r50, r99 := percentiles(tr)
	b50, _ := percentiles(tb)
	b.ReportMetric(ms(r50), "rlm-p50-ms")
	b.ReportMetric(ms(r99), "rlm-p99-ms")
	b.ReportMetric(ms(b50), "base-p50-ms")
	b.ReportMetric(float64(r50)/float64(b50), "ratio")
}

// BenchmarkExecPythonPrint1 is `rlm exec -c 'print(1)'` (native backend, a
// plugin started per command) against `python3 -c 'print(1)'`.
func BenchmarkExecPythonPrint1(b *testing.B) {
	py := realPython(b)
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	compareCommands(b, env,
		[]string{binDir + "/rlm", "exec", "-b", "native", "-c", "print(1)"},
		[]string{py, "-c", "print(1)"})
}

// BenchmarkExecIsolation is the cost of each isolation level on a trivial
// python run: `rlm exec --isolation LEVEL -c 'print(1)'` against the same
// command at --isolation none, alternated in one run.
func BenchmarkExecIsolation(b *testing.B) {
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	argv := func(level string) []string {
		return []string{binDir + "/rlm", "exec", "-b", "native", "--isolation", level, "-c", "print(1)"}
	}
	for _, level := range []string{"process", "namespace"} {
		b.Run(level, func(b *testing.B) {
			compareCommands(b, env, argv(level), argv("none"))
		})
	}
}
