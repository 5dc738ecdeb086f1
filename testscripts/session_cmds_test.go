package testscripts

import (
	"fmt"
	"io"
	"net/http"
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
