package testscripts

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// started holds the requests httpstart sent, by script and name, until
// httpwait collects them.
var started sync.Map // startedKey → chan httpAnswer

type startedKey struct {
	ts   *testscript.TestScript
	name string
}

type httpAnswer struct {
	status int
	body   []byte
	err    error
}

// httpstart NAME METHOD URL [BODY] sends a request in the background and
// goes on at once (a session cell that runs until something stops it);
// httpwait NAME waits for its answer.
func cmdHTTPStart(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: httpstart NAME METHOD URL [BODY]")
	}
	var body io.Reader
	if len(args) == 4 {
		body = strings.NewReader(args[3])
	}
	req, err := http.NewRequest(args[1], args[2], body)
	if err != nil {
		ts.Fatalf("httpstart: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ch := make(chan httpAnswer, 1)
	if _, dup := started.LoadOrStore(startedKey{ts, args[0]}, ch); dup {
		ts.Fatalf("httpstart: %s is already started", args[0])
	}
	go func() {
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
		if err != nil {
			ch <- httpAnswer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- httpAnswer{status: resp.StatusCode, body: b, err: err}
	}()
}

// httpwait NAME waits up to 5 minutes for the answer to the request
// httpstart NAME sent and writes it as http does: "STATUS\n" to stderr,
// the body to stdout.
func cmdHTTPWait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: httpwait NAME")
	}
	v, ok := started.LoadAndDelete(startedKey{ts, args[0]})
	if !ok {
		ts.Fatalf("httpwait: no request %s was started (httpstart)", args[0])
	}
	var a httpAnswer
	select {
	case a = <-v.(chan httpAnswer):
	case <-time.After(5 * time.Minute):
		ts.Fatalf("httpwait: %s has no answer after 5 minutes", args[0])
	}
	if a.err != nil {
		ts.Fatalf("httpwait %s: %v", args[0], a.err)
	}
	ts.Stdout().Write(a.body)
	fmt.Fprintf(ts.Stderr(), "%d\n", a.status)
}

// httpuntil REGEXP METHOD URL [BODY] sends the request again (every 20
// ms, for up to 2 minutes) until it answers 200 with a body matching
// REGEXP, then writes that answer as http does: waiting for a state
// rather than for a time.
func cmdHTTPUntil(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: httpuntil REGEXP METHOD URL [BODY]")
	}
	re := regexp.MustCompile(args[0])
	client := &http.Client{Timeout: time.Minute}
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		req, err := http.NewRequest(args[1], args[2], nil)
		if len(args) == 4 {
			req, err = http.NewRequest(args[1], args[2], strings.NewReader(args[3]))
			req.Header.Set("Content-Type", "application/json")
		}
		if err != nil {
			ts.Fatalf("httpuntil: %v", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && re.Match(b) {
				ts.Stdout().Write(b)
				fmt.Fprintf(ts.Stderr(), "%d\n", resp.StatusCode)
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			ts.Fatalf("httpuntil: no 200 matching %s after 2 minutes (last: %s)", args[0], last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
