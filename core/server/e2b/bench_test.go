package e2b_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/e2b"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/python"
)

// TestMain doubles as the python plugin, as core/server's tests do.
func TestMain(m *testing.M) {
	plugintest.Main(m, map[string]func(){"python": python.Main})
}

// serveE2B serves the E2B API over a real server with the python plugin
// (this test binary), with `rlm serve`'s defaults: 2 warm sessions, a
// queue of 64 runs, namespace sandboxes of 1 GiB and 256 processes.
func serveE2B(tb testing.TB, maxSessions int) string {
	tb.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		tb.Skip("python3 is not installed")
	}
	dir := tb.TempDir()
	plugintest.LinkPlugins(tb, dir, "python")
	path := filepath.Join(dir, runtimepb.Prefix+"python")
	if err := isolate.Available(isolate.LevelNamespace); err != nil {
		tb.Skipf("rlm serve's sandboxes are namespaces, which this host cannot make: %v", err)
	}
	s, err := server.New(server.Config{Modes: []string{"python"}, WarmSessions: 2, MaxSessions: maxSessions, Queue: 64,
		Limits: core.Limits{Isolation: "namespace", MemoryBytes: 1 << 30, MaxProcesses: 256},
		Open: func(ctx context.Context, name string) (*client.Runtime, error) {
			p, err := launch.Launch(path)
			if err != nil {
				return nil, err
			}
			return client.NewRuntime(name, "native", p.Client, p.Kill, isolate.Available), nil
		}})
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(e2b.Handler(s, ""))
	tb.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return ts.URL
}

type sbx struct{ id, token string }

func create(tb testing.TB, url string) sbx {
	resp, err := http.Post(url+"/v2/sandboxes", "application/json", strings.NewReader(`{"templateID": "code-interpreter-v1"}`))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if resp.StatusCode != 201 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		tb.Fatalf("create: %d", resp.StatusCode)
	}
	return sbx{out.SandboxID, out.EnvdAccessToken}
}

// runCode runs one cell through the code interpreter's /execute and
// returns its main result.
func runCode(tb testing.TB, url string, s sbx, code string) string {
	body, _ := json.Marshal(map[string]string{"code": code})
	req, _ := http.NewRequest("POST", url+"/execute", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("E2b-Sandbox-Id", s.id)
	req.Header.Set("E2b-Sandbox-Port", "49999")
	req.Header.Set("X-Access-Token", s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m struct{ Type, Text string }
		_ = json.Unmarshal(sc.Bytes(), &m)
		if m.Type == "result" {
			return m.Text
		}
	}
	tb.Fatalf("no result from %q", code)
	return ""
}

func kill(url string, s sbx) {
	req, _ := http.NewRequest("DELETE", url+"/sandboxes/"+s.id, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// BenchmarkReady is issue 29's "new sandbox ready" figure: create → first
// runCode result (ns/op), next to one warm /execute round trip on an open
// sandbox (warm-ns), and their ratio. Between creates the warm pool is
// given time to refill, as between a user's sandboxes.
//
//	go test -run '^$' -bench Ready -benchtime 20x ./core/server/e2b/
func BenchmarkReady(b *testing.B) {
	url := serveE2B(b, 64)
	warm := create(b, url)
	runCode(b, url, warm, "1")
	var cold, hot, created time.Duration
	for i := 0; i < b.N; i++ {
		time.Sleep(2 * time.Second) // the pool refills (untimed)
		t0 := time.Now()
		runCode(b, url, warm, "1 + 1")
		hot += time.Since(t0)
		t0 = time.Now()
		s := create(b, url)
		created += time.Since(t0)
		if got := runCode(b, url, s, "1 + 1"); got != "2" {
			b.Fatalf("first cell: %q", got)
		}
		cold += time.Since(t0)
		kill(url, s)
	}
	b.ReportMetric(float64(cold.Nanoseconds())/float64(b.N), "ready-ns")
	b.ReportMetric(float64(hot.Nanoseconds())/float64(b.N), "warm-ns")
	b.ReportMetric(float64(cold)/float64(hot), "ratio")
	b.ReportMetric(float64(created.Nanoseconds())/float64(b.N), "create-ns")
}

// BenchmarkFifty opens 50 sandboxes at once, runs a cell in each that
// holds 10 MB, and reports the time to have all 50 answering and the
// memory the host lost meanwhile (MemAvailable), per sandbox.
//
//	go test -run '^$' -bench Fifty -benchtime 1x ./core/server/e2b/
func BenchmarkFifty(b *testing.B) {
	url := serveE2B(b, 64)
	for i := 0; i < b.N; i++ {
		before := memAvailable()
		t0 := time.Now()
		boxes := make([]sbx, 50)
		var wg sync.WaitGroup
		for j := range boxes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				boxes[j] = create(b, url)
				if got := runCode(b, url, boxes[j], "x = bytearray(10 << 20)\nlen(x)"); got != "10485760" {
					b.Errorf("cell: %q", got)
				}
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		used := before - memAvailable()
		for _, s := range boxes {
			kill(url, s)
		}
		b.ReportMetric(took.Seconds(), "s-for-50")
		b.ReportMetric(float64(used)/50/(1<<20), "MiB/sandbox")
	}
}

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}
