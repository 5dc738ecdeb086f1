package testscripts

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// loads holds each script's running load (load start … load stop).
var loads sync.Map // *testscript.TestScript → *loadRun

type loadRun struct {
	done     atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	outcomes []string
	byCode   map[string]int
}

// load start URL BODY PARALLEL | load wait N | load stop REGEXP puts a
// server under steady load the way a Service spreads it: PARALLEL clients
// POST the JSON BODY to URL over and over, each request on a new
// connection (no keep-alive hides a closed listener). wait returns once N
// more requests have been answered (or have failed) since the last start or
// wait; stop ends the load and fails unless every request got a 200 whose
// body matches REGEXP, printing "N requests, 0 failed" to stdout.
func cmdLoad(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: load start URL BODY PARALLEL | load wait N | load stop REGEXP")
	}
	switch {
	case args[0] == "start" && len(args) == 4:
		par, err := strconv.Atoi(args[3])
		if err != nil || par < 1 {
			ts.Fatalf("load start: PARALLEL must be a positive number")
		}
		l := &loadRun{stop: make(chan struct{}), byCode: map[string]int{}}
		if _, dup := loads.LoadOrStore(ts, l); dup {
			ts.Fatalf("load start: a load is already running")
		}
		client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
		for range par {
			l.wg.Go(func() { l.client(client, args[1], args[2]) })
		}
	case args[0] == "wait" && len(args) == 2:
		n, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || n < 1 {
			ts.Fatalf("load wait: N must be a positive number")
		}
		l := runningLoad(ts)
		want := l.done.Load() + n
		deadline := time.Now().Add(3 * time.Minute)
		for l.done.Load() < want {
			if time.Now().After(deadline) {
				ts.Fatalf("load wait: %d requests answered, %d wanted, after 3 minutes", l.done.Load(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	case args[0] == "stop" && len(args) == 2:
		re := regexp.MustCompile(args[1])
		l := runningLoad(ts)
		loads.Delete(ts)
		close(l.stop)
		l.wg.Wait()
		var bad []string
		for _, f := range l.outcomes {
			if !strings.HasPrefix(f, "200 ") || !re.MatchString(f) {
				bad = append(bad, f)
			}
		}
		ts.Logf("load: %d requests, outcomes %v", l.done.Load(), l.byCode)
		if len(bad) > 0 {
			n := len(bad)
			if n > 5 {
				bad = append(bad[:5], fmt.Sprintf("... %d more", n-5))
			}
			ts.Fatalf("load: %d of %d requests failed:\n\t%s", n, l.done.Load(), strings.Join(bad, "\n\t"))
		}
		fmt.Fprintf(ts.Stdout(), "%d requests, 0 failed\n", l.done.Load())
	default:
		ts.Fatalf("usage: load start URL BODY PARALLEL | load wait N | load stop REGEXP")
	}
}

func runningLoad(ts *testscript.TestScript) *loadRun {
	v, ok := loads.Load(ts)
	if !ok {
		ts.Fatalf("load: no load is running (load start)")
	}
	return v.(*loadRun)
}

// client sends requests until stop, recording each outcome: "STATUS BODY"
// for an answer (kept only when it is not a plain success, below), the
// error otherwise.
func (l *loadRun) client(c *http.Client, url, body string) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		var outcome, code string
		resp, err := c.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			outcome, code = err.Error(), "error"
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			outcome, code = fmt.Sprintf("%d %s", resp.StatusCode, b), strconv.Itoa(resp.StatusCode)
		}
		l.mu.Lock()
		l.byCode[code]++
		// Every outcome is checked at stop against the regexp, so all are
		// kept; a test's load is a few hundred requests.
		l.outcomes = append(l.outcomes, outcome)
		l.mu.Unlock()
		l.done.Add(1)
	}
}
