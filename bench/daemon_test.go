package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/daemon"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// startDaemon runs `rlm daemon start` on a socket of its own and stops it
// when the benchmark ends. It returns the environment that points rlm at
// that daemon, and the socket.
func startDaemon(b *testing.B, workers string) ([]string, string) {
	dir := b.TempDir()
	sock := filepath.Join(dir, "d.sock")
	env := append(os.Environ(),
		"PATH="+binDir+":"+os.Getenv("PATH"),
		"HOME="+dir, "RLM_DAEMON_SOCKET="+sock, "RLM_CONFIG=")
	start := exec.Command(binDir+"/rlm", "daemon", "start", "--workers", workers)
	start.Env = env
	if out, err := start.CombinedOutput(); err != nil {
		b.Fatalf("rlm daemon start: %v\n%s", err, out)
	}
	b.Cleanup(func() {
		stop := exec.Command(binDir+"/rlm", "daemon", "stop")
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			b.Errorf("rlm daemon stop: %v\n%s", err, out)
		}
	})
	return env, sock
}

// BenchmarkDaemonExecPrint1 is `rlm exec -c 'print(1)'` served by the
// daemon (auto finds it), against the native backend and against
// `python3 -c 'print(1)'`, alternated in the same run.
func BenchmarkDaemonExecPrint1(b *testing.B) {
	py := realPython(b)
	env, _ := startDaemon(b, "2")
	viaDaemon := []string{binDir + "/rlm", "exec", "-c", "print(1)"}
	native := []string{binDir + "/rlm", "exec", "-b", "native", "-c", "print(1)"}
	python := []string{py, "-c", "print(1)"}
	for _, c := range [][]string{viaDaemon, native, python} {
		timeCmd(b, env, c...) // warm caches
	}
	var td, tn, tp []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		td = append(td, timeCmd(b, env, viaDaemon...))
		tn = append(tn, timeCmd(b, env, native...))
		tp = append(tp, timeCmd(b, env, python...))
		// Let the daemon replace the worker it used, as between real
		// commands, so each sample finds the pool warm.
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	d50, d99 := percentiles(td)
	n50, _ := percentiles(tn)
	p50, _ := percentiles(tp)
	b.ReportMetric(ms(d50), "daemon-p50-ms")
	b.ReportMetric(ms(d99), "daemon-p99-ms")
	b.ReportMetric(ms(n50), "native-p50-ms")
	b.ReportMetric(ms(p50), "python3-p50-ms")
	b.ReportMetric(float64(d50)/float64(p50), "daemon/python3")
	b.ReportMetric(float64(d50)/float64(n50), "daemon/native")
}

// BenchmarkDaemonCell is a warm REPL cell round trip (`x = 1`) through the
// daemon (client → daemon → plugin → interpreter) against the same cell
// through a plugin launched directly (client → plugin → interpreter). It
// also reports how long opening a session takes from the daemon's warm
// pool and from the plugin directly (an interpreter start).
func BenchmarkDaemonCell(b *testing.B) {
	_, sock := startDaemon(b, "2")
	ctx := context.Background()
	viaDaemon, err := daemon.Dial(ctx, sock, "python")
	if err != nil {
		b.Fatal(err)
	}
	defer viaDaemon.Close()
	p, err := launch.Launch(binDir + "/rlm-plugin-python")
	if err != nil {
		b.Fatal(err)
	}
	direct := client.NewRuntime("python", "native", p.Client, p.Kill, isolate.Available)
	defer direct.Close()

	open := func(rt *client.Runtime) (core.Session, time.Duration) {
		t0 := time.Now()
		s, err := rt.OpenSession(ctx, core.SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return s, time.Since(t0)
	}
	cells := func(s core.Session, n int) []time.Duration {
		ds := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			res, err := s.Execute(ctx, "x = 1", 0)
			ds = append(ds, time.Since(t0))
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("cell: %v %+v", err, res)
			}
		}
		return ds
	}
	var openD, openP []time.Duration
	for i := 0; i < 10; i++ {
		s, d := open(viaDaemon)
		openD = append(openD, d)
		s.Close()
		s, d = open(direct)
		openP = append(openP, d)
		s.Close()
		time.Sleep(500 * time.Millisecond) // the pool refills
	}
	sd, _ := open(viaDaemon)
	defer sd.Close()
	sp, _ := open(direct)
	defer sp.Close()
	cells(sd, 50) // warm up both paths
	cells(sp, 50)
	b.ResetTimer()
	var td, tp []time.Duration
	for done := 0; done < b.N; done += 100 {
		td = append(td, cells(sd, 100)...)
		tp = append(tp, cells(sp, 100)...)
	}
	b.StopTimer()
	d50, d99 := percentiles(td)
	p50, p99 := percentiles(tp)
	o50d, _ := percentiles(openD)
	o50p, _ := percentiles(openP)
	b.ReportMetric(float64(d50)/1e3, "daemon-cell-p50-us")
	b.ReportMetric(float64(d99)/1e3, "daemon-cell-p99-us")
	b.ReportMetric(float64(p50)/1e3, "plugin-cell-p50-us")
	b.ReportMetric(float64(p99)/1e3, "plugin-cell-p99-us")
	b.ReportMetric(ms(o50d), "daemon-open-p50-ms")
	b.ReportMetric(ms(o50p), "plugin-open-p50-ms")
}
