package bench

import (
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

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/server"
)

// trivial is the request every benchmark sends.
const trivial = `{"code": "print(1)"}`

// BenchmarkServe measures POST /execute of a trivial python program at 1,
// 8 and 32 concurrent clients, against rlm serve's handler and against a
// reference server built the way the earlier sandbox server worked: per
// request a temp directory, the code written to file.py, `python3 file.py`
// spawned with its output collected. Both use the same real interpreter
// (the pyenv shim resolved once) and the same number of run slots
// (runtime.NumCPU); both queue requests beyond that, so the figures compare
// throughput and latency, not rejections.
func BenchmarkServe(b *testing.B) {
	exe := realPython(b)
	for _, impl := range []string{"rlm", "reference"} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d", impl, clients), func(b *testing.B) {
				var h http.Handler
				if impl == "rlm" {
					srv, err := server.New(server.Config{Modes: []string{"python"}, Open: pluginOpener(b),
						MaxConcurrent: runtime.NumCPU(), Queue: 4096, QueueWait: 5 * time.Minute})
					if err != nil {
						b.Fatal(err)
					}
					defer srv.Close()
					h = srv
				} else {
					h = newReference(exe, runtime.NumCPU())
				}
				ts := httptest.NewServer(h)
				defer ts.Close()
				load(b, ts.URL+"/execute", clients)
			})
		}
	}
}

// load sends b.N requests from clients goroutines and reports requests per
// second and latency percentiles.
func load(b *testing.B, url string, clients int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	post := func() error {
		resp, err := client.Post(url, "application/json", strings.NewReader(trivial))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r struct{ Status, Stdout string }
		if resp.StatusCode != 200 || json.Unmarshal(body, &r) != nil || r.Stdout != "1\n" {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	}
	for i := 0; i < 2*clients; i++ { // warm up interpreters, caches, connections
		if err := post(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := post(); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// pluginOpener launches the python plugin built by TestMain.
func pluginOpener(b *testing.B) server.Opener {
	path := filepath.Join(binDir, plugin.Prefix+"python")
	return func(ctx context.Context, name string) (*core.Runtime, error) {
		p, err := plugin.Launch(path)
		if err != nil {
			return nil, err
		}
		return core.NewRuntime(name, "native", p.Client, p.Kill), nil
	}
}

// newReference is the earlier sandbox server's execute path, minimal: a
// slot, a temp directory, file.py, `python3 file.py` with a timeout, the
// output read whole, the directory removed.
func newReference(python string, slots int) http.Handler {
	sem := make(chan struct{}, slots)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Code           string  `json:"code"`
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
		file := filepath.Join(dir, "file.py")
		if err := os.WriteFile(file, []byte(req.Code), 0o644); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.TimeoutSeconds*float64(time.Second)))
		defer cancel()
		cmd := exec.CommandContext(ctx, python, file)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "OUTPUT_DIR=" + dir}
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
