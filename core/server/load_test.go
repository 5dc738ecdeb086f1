package server_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// A few thousand requests from 32 concurrent clients (2 slots and a
// queue of 24, so a few clients bounce off with 429 and retry), some of
// them timing out with a background child: each is answered 200 or 429,
// none is lost, one plugin serves them all, and afterwards no
// program process or working directory is left and memory is where it was.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test skipped with -short")
	}
	noPlugins(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the plugin's workspaces land here, and only theirs
	var launches atomic.Int64
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, &launches),
		MaxConcurrent: runtime.NumCPU(), Queue: 24})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(code string) (int, []byte, error) {
		resp, err := client.Post(url+"/execute", "application/json", strings.NewReader(code))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	for i := 0; i < 20; i++ { // warm up: plugin, caches, connections
		if st, b, err := post(`{"code": "print(1)"}`); err != nil || st != 200 {
			t.Fatalf("warm-up: %d %s %v", st, b, err)
		}
	}
	plugins := childPlugins()
	if len(plugins) != 1 {
		t.Fatalf("%d plugin processes, want 1", len(plugins))
	}
	// Long-lived helpers (python's fork server) mention tmp too; programs
	// must come and go around them.
	helpers := strings.Join(procsMentioning(tmp), "\n")
	heap0, rss0, prss0 := heapInUse(), rss(os.Getpid()), rss(plugins[0])

	const clients, total = 32, 2000
	var next, sent, ok, busy, other, timeouts atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				want := "n" + strconv.FormatInt(i, 10)
				body := `{"code": "print('` + want + `')"}`
				if i%100 == 0 {
					// Every 100th run times out with a background child: its
					// processes and directory must go too.
					body = `{"code": "import subprocess, time; subprocess.Popen(['sleep', '313']); time.sleep(30)", "timeout_ms": 200}`
					want = `"status":"timeout"`
				} else {
					want = `"stdout":"` + want + `\n"`
				}
				// A timeout job is sent again after a 429 until it runs, so
				// that some certainly run; every send counts as a request.
				for {
					sent.Add(1)
					st, b, err := post(body)
					switch {
					case err != nil:
						other.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					case st == 200 && bytes.Contains(b, []byte(want)):
						ok.Add(1)
						if i%100 == 0 {
							timeouts.Add(1)
						}
					case st == 429:
						busy.Add(1)
						time.Sleep(5 * time.Millisecond) // a polite client backs off
						if i%100 == 0 {
							continue
						}
					default:
						other.Add(1)
						firstErr.CompareAndSwap(nil, strconv.Itoa(st)+" "+string(b))
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d requests from %d clients: %d ran (200; %d of them timed out), %d refused (429), %d other",
		sent.Load(), clients, ok.Load(), timeouts.Load(), busy.Load(), other.Load())
	if other.Load() != 0 || ok.Load()+busy.Load() != sent.Load() || sent.Load() < total {
		t.Fatalf("requests lost or failed: %d other; first: %v", other.Load(), firstErr.Load())
	}
	if timeouts.Load() != total/100 || ok.Load() <= timeouts.Load() {
		t.Fatalf("%d requests ran, %d of them timeouts; want %d timeouts and more", ok.Load(), timeouts.Load(), total/100)
	}
	if n := launches.Load(); n != 1 {
		t.Errorf("%d plugin launches, want 1 for the server's life", n)
	}
	if p := childPlugins(); len(p) != 1 || p[0] != plugins[0] {
		t.Errorf("plugin processes after the load: %v, want %v", p, plugins)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "rlm-run-*")); len(dirs) != 0 {
		t.Errorf("%d working directories left: %v", len(dirs), dirs[:min(3, len(dirs))])
	}
	waitFor(t, "no program processes", func() bool {
		return strings.Join(procsMentioning(tmp), "\n") == helpers && len(procsMentioning("sleep 313")) == 0
	})

	heap1, rss1, prss1 := heapInUse(), rss(os.Getpid()), rss(plugins[0])
	t.Logf("heap in use %d → %d KiB; server RSS %d → %d KiB; plugin RSS %d → %d KiB", heap0>>10, heap1>>10, rss0, rss1, prss0, prss1)
	if heap1 > heap0+32<<20 {
		t.Errorf("heap grew from %d to %d bytes", heap0, heap1)
	}
	if rss1 > rss0+128<<10 || prss1 > prss0+128<<10 {
		t.Errorf("RSS grew: server %d → %d KiB, plugin %d → %d KiB", rss0, rss1, prss0, prss1)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is a process's resident set in KiB.
func rss(pid int) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// procsMentioning lists live processes whose command line contains s.
func procsMentioning(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !proctree.Alive(pid) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cl, []byte(s)) {
			out = append(out, e.Name()+": "+string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
		}
	}
	return out
}
