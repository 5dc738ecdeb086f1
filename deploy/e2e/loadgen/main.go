// Command loadgen drives rlm serve through a Kubernetes Service for the
// live-cluster checks (deploy/e2e/check.sh, docs/kubernetes.md). Every
// request goes on a new connection, as kube-proxy spreads new connections,
// so a keep-alive cannot hide a replica that stopped answering.
//
//	loadgen session -url URL -token T -cells 20       a session's cells, by status
//	loadgen open -url URL -token T                     open a session, print its id
//	loadgen cell -url URL -token T -id ID              one cell on a session, status and body
//	loadgen load -url URL -token T -clients 6 -until FILE   /execute until FILE exists
//	loadgen recover -url URL -token T -ok 10          time until 10 new sessions in a row work
//	loadgen command -url URL -h 'K: V'... -cmd 'echo hi'  agent-sandbox's POST /execute {"command"}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

var (
	url     = flag.String("url", "", "rlm serve's base URL (the Service)")
	token   = flag.String("token", "", "bearer token")
	cells   = flag.Int("cells", 20, "session: cells to run")
	clients = flag.Int("clients", 6, "load: concurrent clients")
	until   = flag.String("until", "", "load: stop once this file exists")
	okRun   = flag.Int("ok", 10, "recover: successes in a row that count as recovered")
	id      = flag.String("id", "", "cell: session id")
	cmd     = flag.String("cmd", "", "command: the shell command")
	timeout = flag.Duration("timeout", 10*time.Second, "per-request timeout")
	extra   headers
)

func main() {
	flag.Var(&extra, "h", "extra header K: V (repeatable)")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen session|open|cell|load|recover|command [flags]")
		os.Exit(2)
	}
	sub := os.Args[1]
	_ = flag.CommandLine.Parse(os.Args[2:])
	switch sub {
	case "session":
		session()
	case "open":
		sid, st, body := open()
		if st != 201 {
			fail("open: %d %s", st, body)
		}
		fmt.Println(sid)
	case "cell":
		st, body := post("/sessions/"+*id+"/execute", `{"code": "print('alive')"}`)
		fmt.Printf("%d %s\n", st, body)
	case "load":
		load()
	case "recover":
		recoverTime()
	case "command":
		b, _ := json.Marshal(map[string]string{"command": *cmd})
		st, body := post("/execute", string(b))
		fmt.Printf("%d %s\n", st, body)
	default:
		fail("unknown subcommand %q", sub)
	}
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+f+"\n", a...)
	os.Exit(1)
}

// post sends one request on a new connection; status 0 is a transport
// error, whose text is the body.
func post(path, body string) (int, string) { return do("POST", path, body) }

// closeSession deletes a session, so that checks that open many do not
// fill the server's --max-sessions.
func closeSession(sid string) { do("DELETE", "/sessions/"+sid, "") }

func do(method, path, body string) (int, string) {
	c := &http.Client{Timeout: *timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(method, *url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	for _, h := range extra {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func open() (string, int, string) {
	st, body := post("/sessions", `{}`)
	var r struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(body), &r)
	return r.ID, st, body
}

// session opens one session and runs -cells cells on it, each adding one
// to a counter, and prints how many cells got which status and whether
// the counter reached -cells (every cell saw the same interpreter).
func session() {
	sid, st, body := open()
	if st != 201 {
		fail("open: %d %s", st, body)
	}
	byStatus := map[int]int{}
	var last string
	for i := range *cells {
		code := "n = 0\nn += 1\nprint(n)"
		if i > 0 {
			code = "n += 1\nprint(n)"
		}
		b, _ := json.Marshal(map[string]string{"code": code})
		st, body := post("/sessions/"+sid+"/execute", string(b))
		byStatus[st]++
		if st != 200 && last == "" {
			last = body
		}
		var r struct {
			Stdout string `json:"stdout"`
		}
		if json.Unmarshal([]byte(body), &r) == nil && r.Stdout != "" {
			last = strings.TrimSpace(r.Stdout)
		}
	}
	closeSession(sid)
	fmt.Printf("cells=%d statuses=%v counter=%s\n", *cells, byStatus, last)
	if byStatus[200] != *cells || last != fmt.Sprint(*cells) {
		os.Exit(1)
	}
}

// load runs -clients clients posting a short program until -until exists,
// then prints the totals, the failures by kind, and up to 5 of them.
func load() {
	var (
		total atomic.Int64
		mu    sync.Mutex
		kinds = map[string]int{}
		first []string
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range *clients {
		wg.Go(func() {
			for {
				if _, err := os.Stat(*until); err == nil {
					return
				}
				st, body := post("/execute", `{"code": "print(sum(range(1000)))"}`)
				total.Add(1)
				if st == 200 && strings.Contains(body, `"stdout":"499500\n"`) {
					continue
				}
				kind := fmt.Sprint(st)
				if st == 0 {
					kind = body
					if i := strings.LastIndex(body, ": "); i >= 0 {
						kind = body[i+2:]
					}
				}
				mu.Lock()
				kinds[kind]++
				if len(first) < 5 {
					first = append(first, fmt.Sprintf("%s %d %.200s", time.Since(start).Round(time.Millisecond), st, body))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	failed := 0
	var ks []string
	for k, n := range kinds {
		failed += n
		ks = append(ks, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(ks)
	fmt.Printf("requests=%d failed=%d seconds=%.1f kinds=%v\n", total.Load(), failed, time.Since(start).Seconds(), ks)
	for _, f := range first {
		fmt.Println("  " + f)
	}
}

// recoverTime opens a session and runs a cell on it, over and over, and
// prints the time until -ok of them in a row worked, from its start.
func recoverTime() {
	start := time.Now()
	run, tries := 0, 0
	for run < *okRun {
		tries++
		sid, st, _ := open()
		ok := st == 201
		if ok {
			st, _ = post("/sessions/"+sid+"/execute", `{"code": "print(1)"}`)
			ok = st == 200
			closeSession(sid)
		}
		if ok {
			run++
		} else {
			run = 0
		}
		if time.Since(start) > 10*time.Minute {
			fail("no recovery after 10 minutes")
		}
	}
	fmt.Printf("recovered_after=%.1fs tries=%d\n", time.Since(start).Seconds(), tries)
}
