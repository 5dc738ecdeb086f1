package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/sandboxfusion"
)

var rlCount = flag.Int("rl.cases", 2000, "cases BenchmarkRLTraffic sends to each server")

// rlTimeout is every RL case's run timeout, in seconds: short, as reward
// functions set it, so the ~5% of cases that run forever cost what they
// cost a trainer.
const rlTimeout = 0.5

// An rlCase is one sample of RL traffic: a small python program, its
// stdin, the stdout a correct one prints, and the verdict it must get.
type rlCase struct {
	code, stdin, want string
	verdict           string // pass, wrong, timeout, crash
}

// rlPrograms are the programs of correct (or wrong) samples: each reads
// its stdin and answers in a line, as competitive-programming rewards do.
var rlPrograms = []struct {
	code  string
	right func(nums []int) string
}{
	{"import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
		func(n []int) string {
			t := 0
			for _, x := range n {
				t += x
			}
			return strconv.Itoa(t)
		}},
	{"import sys\nprint(*sorted(map(int, sys.stdin.read().split())))\n",
		func(n []int) string {
			s := slices.Clone(n)
			slices.Sort(s)
			return join(s)
		}},
	{"import sys\nxs = list(map(int, sys.stdin.read().split()))\nprint(max(xs) - min(xs))\n",
		func(n []int) string { return strconv.Itoa(slices.Max(n) - slices.Min(n)) }},
	{"import sys\nfrom collections import Counter\nc = Counter(sys.stdin.read().split())\nprint(len(c))\n",
		func(n []int) string {
			seen := map[int]bool{}
			for _, x := range n {
				seen[x] = true
			}
			return strconv.Itoa(len(seen))
		}},
}

func join(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}

// rlCases generates n cases, the same for every run: ~5% run forever
// (half busy, half asleep), ~5% crash (an exception, a signal, an exit
// code), ~10% print a wrong answer, the rest are right, each on its own
// stdin.
func rlCases(n int) []rlCase {
	rng := rand.New(rand.NewPCG(28, 13))
	cases := make([]rlCase, n)
	for i := range cases {
		nums := make([]int, 5+rng.IntN(20))
		for j := range nums {
			nums[j] = rng.IntN(1000)
		}
		stdin := join(nums) + "\n"
		p := rlPrograms[rng.IntN(len(rlPrograms))]
		c := rlCase{code: p.code, stdin: stdin, want: p.right(nums), verdict: "pass"}
		switch r := rng.IntN(100); {
		case r < 3:
			c.code, c.verdict = "while True:\n    pass\n", "timeout"
		case r < 5:
			c.code, c.verdict = "import time\ntime.sleep(60)\n", "timeout"
		case r < 7:
			c.code, c.verdict = "import sys\nxs = sys.stdin.read().split()\nraise ValueError(xs[0])\n", "crash"
		case r < 8:
			c.code, c.verdict = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "crash"
		case r < 10:
			c.code, c.verdict = "import sys\nsys.exit(3)\n", "crash"
		case r < 20:
			c.want, c.verdict = c.want+"0", "wrong"
		}
		cases[i] = c
	}
	return cases
}

// rlTarget is one server as a reward function sees it: send a case, get
// a verdict.
type rlTarget struct {
	name   string
	client *http.Client
	post   func(c *http.Client, rc rlCase) (string, error)
}

// judgeOutput is the reward function's own comparison: a trimmed line.
func judgeOutput(stdout string, rc rlCase) string {
	if strings.TrimSpace(stdout) == rc.want {
		return "pass"
	}
	return "wrong"
}

// runCodeTarget speaks SandboxFusion's /run_code, as verl does.
func runCodeTarget(url string) func(*http.Client, rlCase) (string, error) {
	return func(c *http.Client, rc rlCase) (string, error) {
		body, _ := json.Marshal(map[string]any{"code": rc.code, "stdin": rc.stdin, "language": "python",
			"run_timeout": rlTimeout, "memory_limit_MB": 256})
		var r sandboxfusion.Response
		if err := postJSON(c, url, body, &r); err != nil {
			return "", err
		}
		switch {
		case r.RunResult == nil:
			return "", fmt.Errorf("no run_result: %s %s", r.Status, r.Message)
		case r.RunResult.Status == sandboxfusion.CommandTimeLimitExceeded:
			return "timeout", nil
		case r.Status == sandboxfusion.StatusSuccess:
			return judgeOutput(r.RunResult.Stdout, rc), nil
		case r.RunResult.Status == "Finished":
			return "crash", nil
		}
		return "", fmt.Errorf("status %s: %s", r.Status, r.Message)
	}
}

// executeTarget speaks the bench's reference and floor servers' /execute.
func executeTarget(url string) func(*http.Client, rlCase) (string, error) {
	return func(c *http.Client, rc rlCase) (string, error) {
		body, _ := json.Marshal(map[string]any{"code": rc.code, "stdin": rc.stdin, "timeout_seconds": rlTimeout})
		var r struct{ Status, Stdout string }
		if err := postJSON(c, url, body, &r); err != nil {
			return "", err
		}
		switch r.Status {
		case "timeout":
			return "timeout", nil
		case "error":
			return "crash", nil
		case "success":
			return judgeOutput(r.Stdout, rc), nil
		}
		return "", fmt.Errorf("status %q", r.Status)
	}
}

func postJSON(c *http.Client, url string, body []byte, into any) error {
	resp, err := c.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, out)
	}
	return json.Unmarshal(out, into)
}

// rlTally is one target's account over the whole run.
type rlTally struct {
	elapsed    time.Duration
	lat        []time.Duration // of cases that did not time out
	lost       int             // no verdict: an HTTP or transport error
	misjudged  int
	firstError string
}

// fireCases sends cases from clients goroutines and tallies them.
func fireCases(t *rlTarget, cases []rlCase, clients int, tally *rlTally) {
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cases) {
					return
				}
				t0 := time.Now()
				got, err := t.post(t.client, cases[i])
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err != nil:
					tally.lost++
					if tally.firstError == "" {
						tally.firstError = err.Error()
					}
				case got != cases[i].verdict:
					tally.misjudged++
					if tally.firstError == "" {
						tally.firstError = fmt.Sprintf("case %d: %s, want %s", i, got, cases[i].verdict)
					}
				}
				if cases[i].verdict != "timeout" {
					tally.lat = append(tally.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	tally.elapsed += time.Since(start)
}

// BenchmarkRLTraffic sends traffic shaped like an RL trainer's reward
// calls (-rl.cases small single-case python programs, each on its own
// stdin: ~5% run past their 0.5 s timeout, ~5% crash, ~10% answer
// wrong) from 32 clients to three servers with the same number of run
// slots (the CPUs), in batches alternating between them so that drift in
// the machine's speed hits all alike:
//
//   - rlm: rlm serve's /run_code (SandboxFusion's wire, what verl sends),
//     programs in warm sandboxes at the default isolation;
//   - spawn: a spawn-per-request server (temp directory, python3 started
//     per case, no sandbox);
//   - floor: a warm Python forking one child per case, no sandbox.
//
// It reports each one's cases/s, rlm's ratio to both, and rlm's p50 and
// p99 over the cases that did not time out (a timeout's latency is its
// timeout), and each one's lost (no verdict) and misjudged cases: one
// of rlm's fails the benchmark.
func BenchmarkRLTraffic(b *testing.B) {
	const clients, batch = 32, 200
	exe := realPython(b)
	slots := runtime.NumCPU()
	rlmTS := pythonServer(b, slots)
	spawnTS := httptest.NewServer(newReference(exe, ".py", slots))
	defer spawnTS.Close()
	floorTS := httptest.NewServer(newFloor(b, exe, slots))
	defer floorTS.Close()
	hc := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 5 * time.Minute}
	}
	targets := []*rlTarget{
		{"rlm", hc(), runCodeTarget(rlmTS.URL + "/run_code")},
		{"spawn", hc(), executeTarget(spawnTS.URL + "/execute")},
		{"floor", hc(), executeTarget(floorTS.URL + "/execute")},
	}
	cases := rlCases(*rlCount)
	warmup := rlCases(2 * clients)
	tallies := make([]rlTally, len(targets))
	for _, t := range targets {
		var w rlTally
		fireCases(t, warmup, clients, &w)
		if w.lost+w.misjudged > 0 {
			b.Fatalf("%s while warming up: %d lost, %d misjudged: %s", t.name, w.lost, w.misjudged, w.firstError)
		}
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for start := 0; start < len(cases); start += batch {
			part := cases[start:min(start+batch, len(cases))]
			for i, t := range targets {
				fireCases(t, part, clients, &tallies[i])
			}
		}
	}
	b.StopTimer()
	rate := make([]float64, len(targets))
	for i, t := range targets {
		tl := &tallies[i]
		// rlm must judge every case; a baseline that cannot (the spawn
		// server's interpreter start eats a 0.5 s timeout on a loaded
		// machine) is a figure, not a failure of the benchmark.
		if t.name == "rlm" && tl.lost+tl.misjudged > 0 {
			b.Errorf("%s: %d lost, %d misjudged of %d: %s", t.name, tl.lost, tl.misjudged, b.N*len(cases), tl.firstError)
		}
		b.ReportMetric(float64(tl.lost+tl.misjudged), t.name+"-lost+misjudged")
		rate[i] = float64(b.N*len(cases)) / tl.elapsed.Seconds()
		p50, p99 := percentiles(tl.lat)
		b.ReportMetric(rate[i], t.name+"-cases/s")
		b.ReportMetric(ms(p50), t.name+"-p50-ms")
		b.ReportMetric(ms(p99), t.name+"-p99-ms")
	}
	b.ReportMetric(rate[0]/rate[2], "rlm/floor")
	b.ReportMetric(rate[0]/rate[1], "rlm/spawn")
}

// BenchmarkJudgeBatch compares the two ways to judge one sample on N
// test cases: one POST /judge with the N cases (compiled or imported
// once, each case still in its own sandbox) against N POST /run_code
// requests from 32 clients, as a reward function without /judge sends
// them. Both go to the same rlm server, alternating, b.N samples each;
// it reports cases per second per core for each and their ratio.
func BenchmarkJudgeBatch(b *testing.B) {
	const cases, clients = 100, 32
	slots := runtime.NumCPU()
	ts := pythonServer(b, slots)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 5 * time.Minute}
	sample := rlPrograms[0]
	var rcs []rlCase
	var judged []sandboxfusion.Case
	rng := rand.New(rand.NewPCG(28, 4))
	for range cases {
		nums := []int{rng.IntN(1000), rng.IntN(1000), rng.IntN(1000)}
		rc := rlCase{code: sample.code, stdin: join(nums) + "\n", want: sample.right(nums), verdict: "pass"}
		rcs = append(rcs, rc)
		stdin, want := rc.stdin, rc.want+"\n"
		judged = append(judged, sandboxfusion.Case{Stdin: &stdin, ExpectedStdout: &want})
	}
	judgeBody, _ := json.Marshal(map[string]any{"code": sample.code, "language": "python", "run_timeout": 5, "cases": judged})
	judge := func() {
		var r sandboxfusion.JudgeResponse
		if err := postJSON(c, ts.URL+"/judge", judgeBody, &r); err != nil {
			b.Fatal(err)
		}
		if r.Accepted != cases {
			b.Fatalf("/judge accepted %d of %d: %+v", r.Accepted, cases, r)
		}
	}
	single := &rlTarget{"run_code", c, runCodeTarget(ts.URL + "/run_code")}
	runCode := func() {
		var tl rlTally
		fireCases(single, rcs, clients, &tl)
		if tl.lost+tl.misjudged > 0 {
			b.Fatalf("/run_code: %d lost, %d misjudged: %s", tl.lost, tl.misjudged, tl.firstError)
		}
	}
	judge()
	runCode()
	var judgeTime, singleTime time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		judge()
		judgeTime += time.Since(t0)
		t0 = time.Now()
		runCode()
		singleTime += time.Since(t0)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(b.N*cases) / d.Seconds() / float64(runtime.NumCPU()) }
	b.ReportMetric(per(judgeTime), "judge-cases/s/core")
	b.ReportMetric(per(singleTime), "run_code-cases/s/core")
	b.ReportMetric(per(judgeTime)/per(singleTime), "judge/run_code")
}

// pythonServer is rlm serve's handler with the python plugin, slots run
// slots and a queue no benchmark fills, SandboxFusion's routes mounted;
// it closes with b.
func pythonServer(b *testing.B, slots int) *httptest.Server {
	srv, err := server.New(server.Config{Modes: []string{"python"}, Open: pluginOpener(b),
		MaxConcurrent: slots, Queue: 4096, QueueWait: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	sandboxfusion.Mount(srv)
	ts := httptest.NewServer(srv)
	b.Cleanup(func() { ts.Close(); srv.Close() })
	return ts
}
