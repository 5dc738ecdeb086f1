package testscripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// freeport VAR sets VAR to a TCP port on 127.0.0.1 that was free a moment
// ago, for `rlm serve --addr 127.0.0.1:$VAR &`.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("freeport: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ts.Setenv(args[0], strconv.Itoa(port))
}

// waitfor URL [REGEXP] waits up to 120 s (a loaded machine can take
// over 30 s to start a server's plugins) for URL to answer 200 (with a
// body matching REGEXP): a server started with & getting ready, or a
// gauge reaching a value. ! waitfor URL waits for it to stop answering.
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 && len(args) != 2 {
		ts.Fatalf("usage: waitfor URL [REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(120 * time.Second)
	for {
		resp, err := client.Get(args[0])
		up := err == nil && resp.StatusCode == 200
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if re != nil && !re.Match(b) {
				up = false
			}
		}
		if up != neg {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor %s: still %s after 120s (last: %v)", args[0], map[bool]string{true: "answering", false: "not answering"}[neg], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// http [-bg] [-H K:V]... [-h NAME]... METHOD URL [BODY|@FILE] sends a
// request and writes "STATUS\n" and the response headers named by -h to
// stderr, the body to stdout; -bg sends it in the background and goes on. JSON bodies get Content-Type application/json unless -H sets it.
// The status is checked by `stderr '^200'`.
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("http does not fail: check its status with stderr")
	}
	hdr := http.Header{}
	var show []string
	bg := false
	for len(args) >= 1 && (args[0] == "-H" || args[0] == "-h" || args[0] == "-bg") {
		if args[0] == "-bg" {
			bg = true
			args = args[1:]
			continue
		}
		if args[0] == "-h" {
			show = append(show, args[1])
		} else {
			k, v, _ := strings.Cut(args[1], ":")
			hdr.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		args = args[2:]
	}
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: http [-H K:V] [-h HEADER] METHOD URL [BODY|@FILE]")
	}
	var body io.Reader
	if len(args) == 3 {
		b := args[2]
		if strings.HasPrefix(b, "@") {
			b = ts.ReadFile(b[1:])
		}
		body = strings.NewReader(b)
		if hdr.Get("Content-Type") == "" {
			hdr.Set("Content-Type", "application/json")
		}
	}
	req, err := http.NewRequest(args[0], args[1], body)
	if err != nil {
		ts.Fatalf("http: %v", err)
	}
	req.Header = hdr
	if bg {
		// Fire and forget: the request runs until the server answers or
		// stops; the script goes on at once.
		go func() {
			if resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		return
	}
	// As generous as the slowest answer a server may legitimately take: a
	// session that installs requirements ran past 60 s on a loaded 2-core
	// machine (pip under two busy loops and parallel scripts).
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		ts.Fatalf("http: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var e bytes.Buffer
	fmt.Fprintf(&e, "%d\n", resp.StatusCode)
	for _, h := range show {
		fmt.Fprintf(&e, "%s: %s\n", h, resp.Header.Get(h))
	}
	ts.Stdout().Write(out)
	ts.Stderr().Write(e.Bytes())
}

// signal SIG PATTERN sends SIG (TERM, INT, KILL) to every process whose
// command line contains PATTERN (testscript's kill has no TERM).
func cmdSignal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal TERM|INT|KILL PATTERN")
	}
	sig, ok := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL}[args[0]]
	if !ok {
		ts.Fatalf("signal: unknown signal %q", args[0])
	}
	pids := pidsMatching(args[1])
	if len(pids) == 0 {
		ts.Fatalf("signal: no process matches %q", args[1])
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			ts.Fatalf("signal %d: %v", pid, err)
		}
	}
}

// pidsMatching lists the processes whose command line contains pattern.
func pidsMatching(pattern string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), pattern) {
			out = append(out, pid)
		}
	}
	return out
}

// jsonvar VAR KEY sets VAR to the string (or number) at KEY of the last
// command's stdout, a JSON object: a session id from POST /sessions, say.
// A dotted KEY (result.structuredContent.session_id) goes into nested
// objects.
func cmdJSONVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonvar VAR KEY")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &v); err != nil {
		ts.Fatalf("jsonvar: stdout is not a JSON object: %v", err)
	}
	for _, k := range strings.Split(args[1], ".") {
		obj, _ := v.(map[string]any)
		var ok bool
		if v, ok = obj[k]; !ok {
			ts.Fatalf("jsonvar: no key %q in stdout", args[1])
		}
	}
	ts.Setenv(args[0], fmt.Sprint(v))
}
