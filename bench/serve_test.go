package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// trivial is the request every python benchmark sends; trivialShell the
// shell one.
const (
	trivial      = `{"code": "print(1)"}`
	trivialShell = `{"code": "echo 1", "language": "shell"}`
)

// BenchmarkServe measures POST /execute of a trivial program at 1, 8 and 32
// concurrent clients, in the same run, against:
//
//   - rlm: rlm serve's handler with its plugins, at the default isolation
//     (auto: namespace wherever bubblewrap works), where programs run in
//     warm sandboxes (plugins/internal/warm);
//   - rlm-cold: the same with RLM_WARM=0, a sandbox built per request (what
//     rlm did before issue 13);
//   - reference: a server built the way the earlier sandbox server worked:
//     per request a temp directory, the code written to a file, the
//     interpreter spawned (no sandbox), its output collected;
//   - floor (python): a warm Python forking one child per run, no sandbox,
//     one per slot: the least a fresh-process-per-request design can cost.
//
// All use the same real interpreter (the pyenv shim resolved once) and the
// same number of run slots (runtime.NumCPU), and queue requests beyond it,
// so the figures compare throughput and latency, not rejections. The
// shell rows compare rlm with the reference spawning bash.
func BenchmarkServe(b *testing.B) {
	exe := realPython(b)
	slots := runtime.NumCPU()
	for _, lang := range []string{"python", "shell"} {
		impls := []string{"rlm", "rlm-cold", "reference", "floor"}
		body, interp, ext := trivial, exe, ".py"
		if lang == "shell" {
			impls = impls[:3]
			body, interp, ext = trivialShell, "/bin/bash", ".sh"
		}
		for _, impl := range impls {
			for _, clients := range []int{1, 8, 32} {
				b.Run(fmt.Sprintf("%s/%s/clients=%d", lang, impl, clients), func(b *testing.B) {
					var h http.Handler
					isolation := ""
					switch impl {
					case "rlm", "rlm-cold":
						if impl == "rlm-cold" {
							b.Setenv("RLM_WARM", "0")
						}
						srv, err := server.New(server.Config{Modes: []string{"python", "shell"}, Open: pluginOpener(b),
							MaxConcurrent: slots, Queue: 4096, QueueWait: 5 * time.Minute})
						if err != nil {
							b.Fatal(err)
						}
						defer srv.Close()
						h = srv
						isolation = string(isolate.Strongest())
					case "reference":
						h = newReference(interp, ext, slots)
					case "floor":
						f := newFloor(b, exe, slots)
						h = f
					}
					ts := httptest.NewServer(h)
					defer ts.Close()
					load(b, ts.URL+"/execute", body, isolation, clients)
				})
			}
		}
	}
}

// target is one server under load: its /execute URL, the program, and the
// isolation every answer must say it ran under ("" for any).
type target struct {
	url, body, isolation string
	client               *http.Client
}

func newTarget(url, body, isolation string, clients int) *target {
	return &target{url: url, body: body, isolation: isolation,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}}
}

func (t *target) post() error {
	resp, err := t.client.Post(t.url, "application/json", strings.NewReader(t.body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var r struct{ Status, Stdout, Isolation string }
	if resp.StatusCode != 200 || json.Unmarshal(out, &r) != nil || r.Stdout != "1\n" || (t.isolation != "" && r.Isolation != t.isolation) {
		return fmt.Errorf("%d %s", resp.StatusCode, out)
	}
	return nil
}

// warm sends a few requests, then more until a second has passed: it warms
// interpreters, caches, connections and warm sandboxes (which a server
// starts building at its second run).
func (t *target) warm(clients int) error {
	start := time.Now()
	for i := 0; i < 2*clients || time.Since(start) < time.Second; i++ {
		if err := t.post(); err != nil {
			return err
		}
	}
	return nil
}

// fire sends n requests from clients goroutines and returns how long they
// took and each one's latency.
func (t *target) fire(n, clients int) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := t.post(); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	err, _ := failed.Load().(error)
	return elapsed, lat, err
}

// load sends b.N requests from clients goroutines and reports requests per
// second and latency percentiles. isolation, when set, is what every
// answer must say it ran under.
func load(b *testing.B, url, body, isolation string, clients int) {
	t := newTarget(url, body, isolation, clients)
	if err := t.warm(clients); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	elapsed, lat, err := t.fire(b.N, clients)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// BenchmarkServeFloorRatio measures rlm against the floor (a warm Python
// forking one child per run, no sandbox) at 32 clients, alternating
// batches of 64 requests between the two so that a machine whose speed
// drifts during the run (this VM's does, by ±10% over minutes) slows both
// alike. BenchmarkServe measures them one after the other, and its ratio
// moves with that drift. b.N requests go to each.
func BenchmarkServeFloorRatio(b *testing.B) {
	const clients, batch = 32, 64
	exe := realPython(b)
	slots := runtime.NumCPU()
	rlmTS := pythonServer(b, slots)
	floorTS := httptest.NewServer(newFloor(b, exe, slots))
	defer floorTS.Close()
	rlm := newTarget(rlmTS.URL+"/execute", trivial, string(isolate.Strongest()), clients)
	floor := newTarget(floorTS.URL+"/execute", trivial, "", clients)
	for _, t := range []*target{rlm, floor} {
		if err := t.warm(clients); err != nil {
			b.Fatal(err)
		}
	}
	var rlmTime, floorTime time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		for _, x := range []struct {
			t   *target
			sum *time.Duration
		}{{rlm, &rlmTime}, {floor, &floorTime}} {
			d, _, err := x.t.fire(n, clients)
			if err != nil {
				b.Fatal(err)
			}
			*x.sum += d
		}
	}
	b.StopTimer()
	rlmRate, floorRate := float64(b.N)/rlmTime.Seconds(), float64(b.N)/floorTime.Seconds()
	b.ReportMetric(rlmRate, "rlm-req/s")
	b.ReportMetric(floorRate, "floor-req/s")
	b.ReportMetric(rlmRate/floorRate, "rlm/floor")
}

// pluginOpener launches the plugins built by TestMain.
func pluginOpener(b *testing.B) server.Opener {
	return func(ctx context.Context, name string) (*client.Runtime, error) {
		p, err := launch.Launch(filepath.Join(binDir, runtimepb.Prefix+name))
		if err != nil {
			return nil, err
		}
		return client.NewRuntime(name, "native", p.Client, p.Kill, isolate.Available), nil
	}
}

// newReference is the earlier sandbox server's execute path, minimal: a
// slot, a temp directory, file.py (file.sh), `python3 file.py` (`bash
// file.sh`) with a timeout, the output read whole, the directory removed.
func newReference(interp, ext string, slots int) http.Handler {
	sem := make(chan struct{}, slots)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Code           string  `json:"code"`
			Stdin          string  `json:"stdin"`
			TimeoutSeconds float64 `json:"timeout_seconds"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if req.TimeoutSeconds <= 0 {
			req.TimeoutSeconds = 30
		}
		sem <- struct{}{}
		defer func() { <-sem }()
		dir, err := os.MkdirTemp("", "ref-run-")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "file"+ext)
		if err := os.WriteFile(file, []byte(req.Code), 0o644); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.TimeoutSeconds*float64(time.Second)))
		defer cancel()
		cmd := exec.CommandContext(ctx, interp, file)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "OUTPUT_DIR=" + dir}
		cmd.Stdin = strings.NewReader(req.Stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err = cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		status := "success"
		if ctx.Err() != nil {
			status, code = "timeout", -1
		} else if code != 0 {
			status = "error"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"status": status, "stdout": stdout.String(), "stderr": stderr.String(), "exit_code": code,
			"execution_time_ms": time.Since(start).Milliseconds(), "files_produced": map[string]string{},
		})
	})
}

// floorPy is the floor's worker: a warm Python that forks one child per
// run, which runs the file as __main__ with its stdin from a file and its
// output in a file; the parent waits (killing the child at the request's
// timeout, if any) and answers with the wait status and whether it timed
// out. No sandbox, no limits, no plugin.
const floorPy = `import os, sys, json, select
r, w = sys.stdin.buffer, sys.stdout.buffer
for line in r:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        if req.get("stdin"):
            fd = os.open(req["stdin"], os.O_RDONLY)
            os.dup2(fd, 0)
        fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(req["dir"])
        code = 0
        try:
            exec(compile(open(req["path"]).read(), req["path"], "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            code = 1
        sys.stdout.flush()
        os._exit(code)
    timed_out = 0
    if req.get("timeout"):
        pfd = os.pidfd_open(pid)
        if not select.select([pfd], [], [], req["timeout"])[0]:
            os.kill(pid, 9)
            timed_out = 1
        os.close(pfd)
    _, st = os.waitpid(pid, 0)
    w.write(b"%d %d\n" % (st, timed_out))
    w.flush()
`

type floorWorker struct {
	in  io.Writer
	out *bufio.Reader
}

// newFloor starts one floor worker per slot and serves /execute with them:
// a temp directory and file per request, as the reference does.
func newFloor(b *testing.B, python string, slots int) http.Handler {
	workers := make(chan *floorWorker, slots)
	for i := 0; i < slots; i++ {
		cmd := exec.Command(python, "-c", floorPy)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { in.Close(); cmd.Wait() })
		workers <- &floorWorker{in: in, out: bufio.NewReader(out)}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Code           string  `json:"code"`
			Stdin          string  `json:"stdin"`
			TimeoutSeconds float64 `json:"timeout_seconds"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		wk := <-workers
		defer func() { workers <- wk }()
		dir, err := os.MkdirTemp("", "floor-run-")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer os.RemoveAll(dir)
		file, out := filepath.Join(dir, "main.py"), filepath.Join(dir, ".out")
		if err := os.WriteFile(file, []byte(req.Code), 0o644); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		job := map[string]any{"path": file, "dir": dir, "out": out, "timeout": req.TimeoutSeconds}
		if req.Stdin != "" {
			in := filepath.Join(dir, ".in")
			if err := os.WriteFile(in, []byte(req.Stdin), 0o644); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			job["stdin"] = in
		}
		start := time.Now()
		line, _ := json.Marshal(job)
		if _, err := wk.in.Write(append(line, '\n')); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		st, err := wk.out.ReadString('\n')
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		stdout, _ := os.ReadFile(out)
		status := "success"
		switch f := strings.Fields(st); {
		case len(f) == 2 && f[1] == "1":
			status = "timeout"
		case len(f) != 2 || f[0] != "0":
			status = "error"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"status": status, "stdout": string(stdout), "stderr": "", "exit_code": 0,
			"execution_time_ms": time.Since(start).Milliseconds(), "files_produced": map[string]string{},
		})
	})
}

// BenchmarkServeSessionOpen measures a new session through rlm serve's
// handler, POST /sessions then its first cell (`x = 1`), at the default
// isolation (namespace wherever bubblewrap works): warm (a session the
// server opened ahead of demand, --warm-sessions) against cold (opened by
// the request) in the same run, alternating so noise hits both alike.
// Between two warm opens the benchmark waits until the pool holds one
// again, outside the timing: it measures a hand-over, as a client that
// opens sessions no faster than the pool refills sees it.
func BenchmarkServeSessionOpen(b *testing.B) {
	newServer := func(warm int) *httptest.Server {
		srv, err := server.New(server.Config{Modes: []string{"python"}, Open: pluginOpener(b), WarmSessions: warm})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		b.Cleanup(func() { ts.Close(); srv.Close() })
		return ts
	}
	post := func(url, body string) map[string]any {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode >= 300 {
			b.Fatalf("%s: %d %v %v", url, resp.StatusCode, m, err)
		}
		return m
	}
	warmReady := func(url string) {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			resp, err := http.Get(url + "/health")
			if err != nil {
				b.Fatal(err)
			}
			var h server.Health
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.WarmSessions["python"] > 0 {
				return
			}
		}
		b.Fatal("the pool never refilled")
	}
	servers := map[string]*httptest.Server{"warm": newServer(1), "cold": newServer(0)}
	post(servers["warm"].URL+"/sessions", `{}`) // starts the pool
	times := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for _, kind := range []string{"warm", "cold"} {
			url := servers[kind].URL
			if kind == "warm" {
				warmReady(url)
			}
			t0 := time.Now()
			id := post(url+"/sessions", `{}`)["id"].(string)
			if r := post(url+"/sessions/"+id+"/execute", `{"code": "x = 1"}`); r["status"] != "success" {
				b.Fatalf("%s cell: %v", kind, r)
			}
			times[kind] = append(times[kind], time.Since(t0))
			req, _ := http.NewRequest("DELETE", url+"/sessions/"+id, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	p50 := map[string]time.Duration{}
	for _, kind := range []string{"warm", "cold"} {
		p, p99 := percentiles(times[kind])
		p50[kind] = p
		b.ReportMetric(ms(p), kind+"-p50-ms")
		b.ReportMetric(ms(p99), kind+"-p99-ms")
	}
	b.ReportMetric(float64(p50["cold"])/float64(p50["warm"]), "cold/warm")
}
