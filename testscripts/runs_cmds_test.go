package testscripts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/core/llm/llmtest"
)

// Commands for the scripts of runs (POST /runs, rlm_run, the Python
// client): a scripted model, and a reader of a streamed answer that shows
// each line as it arrives.

// fakerlm KEY SCRIPT starts a fake OpenAI-compatible server (core/llm/
// llmtest, the real wire format) on 127.0.0.1 accepting only the API key
// KEY, whose replies to a loop's turns (requests with a system prompt) are
// SCRIPT's sections, separated by lines "----": the first turn gets the
// first section, and so on, the last repeated. A request without a system
// prompt (an llm_query) is answered "MODEL says: PROMPT". Each call
// reports 100 input and 50 output tokens; $LLM_URL is its base URL, and
// llmcalls counts its requests.
func cmdFakeRLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: fakerlm KEY SCRIPT")
	}
	var turns []string
	for _, sec := range strings.Split(ts.ReadFile(args[1]), "\n----\n") {
		turns = append(turns, strings.TrimSpace(sec))
	}
	s := llmtest.NewOpenAIServer(scriptTB{ts: ts}, func(r llmtest.ChatRequest) string {
		if r.System == "" {
			return r.Model + " says: " + r.LastUser()
		}
		return turns[min(r.Turn(), len(turns)-1)]
	}, llmtest.WithAPIKey(args[0]), llmtest.WithUsage(100, 50))
	fakes.Store(ts, s)
	ts.Defer(func() { fakes.Delete(ts) })
	ts.Setenv("LLM_URL", s.BaseURL())
}

// httpstream NAME METHOD URL [BODY] sends a request in the background and
// goes on at once; each line of the answer's body is appended to the file
// NAME as soon as it arrives ("STATUS N" first), so waitline can watch a
// stream while it is still going.
func cmdHTTPStream(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: httpstream NAME METHOD URL [BODY]")
	}
	var req *http.Request
	var err error
	if len(args) == 4 {
		req, err = http.NewRequest(args[1], args[2], strings.NewReader(args[3]))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
	} else {
		req, err = http.NewRequest(args[1], args[2], nil)
	}
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	go func() {
		defer f.Close()
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
		if err != nil {
			fmt.Fprintf(f, "ERROR %v\n", err)
			return
		}
		defer resp.Body.Close()
		fmt.Fprintf(f, "STATUS %d\n", resp.StatusCode)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			fmt.Fprintf(f, "%s\n", sc.Bytes())
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(f, "ERROR %v\n", err)
		}
	}()
}

// waitline [-var VAR KEY] FILE REGEXP waits up to 120 s for a line of
// FILE matching REGEXP (a stream httpstream writes); -var sets VAR to KEY
// of that line, a JSON object (a dotted KEY goes into nested objects).
func cmdWaitLine(ts *testscript.TestScript, neg bool, args []string) {
	var varName, key string
	if len(args) >= 3 && args[0] == "-var" {
		varName, key, args = args[1], args[2], args[3:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitline [-var VAR KEY] FILE REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	deadline := time.Now().Add(120 * time.Second)
	for {
		data, _ := os.ReadFile(ts.MkAbs(args[0]))
		for _, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if varName != "" {
				var v any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					ts.Fatalf("waitline: the line matching %s is not JSON: %v", args[1], err)
				}
				for _, k := range strings.Split(key, ".") {
					obj, _ := v.(map[string]any)
					var ok bool
					if v, ok = obj[k]; !ok {
						ts.Fatalf("waitline: no key %q in %s", key, line)
					}
				}
				ts.Setenv(varName, fmt.Sprint(v))
			}
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitline: no line of %s matches %s after 120s; it has:\n%s", args[0], args[1], data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
