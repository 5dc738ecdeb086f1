package sandboxfusion_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/sandboxfusion"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/golang"
	"github.com/rlmkit/rlm/plugins/python"
	"github.com/rlmkit/rlm/plugins/shell"
)

// TestMain doubles as the python and shell plugins, launched by the name
// rlm launches the real ones by.
func TestMain(m *testing.M) {
	plugintest.Main(m, map[string]func(){"python": python.Main, "shell": shell.Main, "golang": golang.Main})
}

// serve starts rlm's server with python and shell over real plugins and
// SandboxFusion's routes mounted, on 127.0.0.1.
func serve(t *testing.T, slots int, modes ...string) string {
	t.Helper()
	if modes == nil {
		modes = []string{"python", "shell"}
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	plugintest.LinkPlugins(t, dir, "python", "shell", "golang")
	open := func(ctx context.Context, name string) (*client.Runtime, error) {
		p, err := launch.Launch(filepath.Join(dir, runtimepb.Prefix+name))
		if err != nil {
			return nil, err
		}
		return client.NewRuntime(name, "native", p.Client, p.Kill, isolate.Available), nil
	}
	s, err := server.New(server.Config{Modes: modes, Open: open, MaxConcurrent: slots,
		Queue: 4, QueueWait: time.Second, MaxOutput: 32 << 20, MaxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sandboxfusion.Mount(s)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return ts.URL
}

// post sends body to /run_code and decodes the answer.
func post(t *testing.T, c *http.Client, url, body string) (int, map[string]any, error) {
	resp, err := c.Post(url+"/run_code", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer %q: %v", raw, err)
	}
	return resp.StatusCode, m, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestPing(t *testing.T) {
	url := serve(t, 1)
	resp, err := http.Get(url + "/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.TrimSpace(string(raw)) != `"pong"` {
		t.Fatalf("GET /v1/ping: %d %s, want 200 \"pong\"", resp.StatusCode, raw)
	}
}

// TestRunCode checks every field and status of the protocol and how each
// of rlm's endings maps onto it.
func TestRunCode(t *testing.T) {
	url := serve(t, 2)
	nul := any(nil)
	for _, tc := range []struct {
		name, body string
		http       int
		status     string         // the response's status
		run        map[string]any // run_result fields that must match
		endedBy    string
		stdout     string // run_result.stdout contains
		message    string // message contains
		files      map[string]any
	}{
		{name: "success", body: `{"code": "print('hello')"}`, http: 200, status: "Success",
			run: map[string]any{"status": "Finished", "return_code": 0.0, "stdout": "hello\n", "stderr": ""}, endedBy: "exit"},
		{name: "stdin", body: `{"code": "import sys; print(sys.stdin.read().upper())", "stdin": "abc", "language": "python"}`, http: 200, status: "Success",
			run: map[string]any{"stdout": "ABC\n"}},
		{name: "stdin null", body: `{"code": "import sys; print(repr(sys.stdin.read()))", "stdin": null}`, http: 200, status: "Success",
			run: map[string]any{"stdout": "''\n"}},
		{name: "exit status", body: `{"code": "import sys; print('out'); sys.exit(3)"}`, http: 200, status: "Failed",
			run: map[string]any{"status": "Finished", "return_code": 3.0, "stdout": "out\n"}, endedBy: "exit", message: "3"},
		{name: "exception", body: `{"code": "raise ValueError('boom')"}`, http: 200, status: "Failed",
			run: map[string]any{"status": "Finished", "return_code": 1.0}, endedBy: "exit"},
		{name: "signal", body: `{"code": "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"}`, http: 200, status: "Failed",
			run: map[string]any{"status": "Finished", "return_code": -11.0}, endedBy: "signal"},
		{name: "timeout", body: `{"code": "print('partial', flush=True)\nwhile True: pass", "run_timeout": 1}`, http: 200, status: "Failed",
			run: map[string]any{"status": "TimeLimitExceeded", "return_code": nul, "stdout": "partial\n"}, endedBy: "timeout"},
		{name: "float timeout", body: `{"code": "import time; time.sleep(30)", "run_timeout": 0.5, "compile_timeout": 2.5}`, http: 200, status: "Failed",
			run: map[string]any{"status": "TimeLimitExceeded", "return_code": nul}, endedBy: "timeout"},
		{name: "memory bomb", body: `{"code": "x = []\nwhile True: x.append(bytearray(16 << 20))", "memory_limit_MB": 256, "run_timeout": 30}`, http: 200, status: "Failed",
			run: map[string]any{"status": "Finished"}},
		{name: "files", body: `{"code": "open('out.txt', 'w').write(open('in/data.txt').read() * 2)", "files": {"in/data.txt": "` + b64("ab") + `", "skip": null}, "fetch_files": ["out.txt", "missing.txt"]}`,
			http: 200, status: "Success", files: map[string]any{"out.txt": b64("abab")}},
		{name: "bash", body: `{"code": "echo hi; exit 2", "language": "bash"}`, http: 200, status: "Failed",
			run: map[string]any{"status": "Finished", "return_code": 2.0, "stdout": "hi\n"}},
		{name: "not enabled", body: `{"code": "int main(){}", "language": "cpp"}`, http: 200, status: "SandboxError", message: "g++"},
		{name: "known unsupported", body: `{"code": "<?php", "language": "php"}`, http: 200, status: "SandboxError", message: "php"},
		{name: "unknown language", body: `{"code": "x", "language": "cobol"}`, http: 422},
		{name: "no code", body: `{"language": "python"}`, http: 422},
		{name: "bad memory", body: `{"code": "x", "memory_limit_MB": 0}`, http: 422},
		{name: "bad timeout", body: `{"code": "x", "run_timeout": -1}`, http: 422},
		{name: "bad file name", body: `{"code": "x", "files": {"../etc": "YQ=="}}`, http: 422},
		{name: "garbage", body: `{"code": `, http: 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m, err := post(t, http.DefaultClient, url, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.http {
				t.Fatalf("HTTP %d, want %d: %v", code, tc.http, m)
			}
			if code != 200 {
				if _, ok := m["detail"]; !ok {
					t.Fatalf("a %d without FastAPI's detail: %v", code, m)
				}
				return
			}
			for _, f := range []string{"status", "message", "compile_result", "run_result", "files", "executor_pod_name"} {
				if _, ok := m[f]; !ok {
					t.Errorf("field %s missing: %v", f, m)
				}
			}
			if _, ok := m["message"].(string); !ok {
				t.Errorf("message %v is not a string", m["message"])
			}
			if _, ok := m["files"].(map[string]any); !ok {
				t.Errorf("files %v is not an object", m["files"])
			}
			if m["status"] != tc.status {
				t.Errorf("status %v, want %s: %v", m["status"], tc.status, m)
			}
			if m["compile_result"] != nil {
				t.Errorf("compile_result %v, want null for an interpreted language", m["compile_result"])
			}
			if tc.message != "" && !strings.Contains(m["message"].(string), tc.message) {
				t.Errorf("message %q does not mention %q", m["message"], tc.message)
			}
			if tc.status == "Success" && m["message"] != "" {
				t.Errorf("message %q on success", m["message"])
			}
			if tc.endedBy != "" && m["ended_by"] != tc.endedBy {
				t.Errorf("ended_by %v, want %s", m["ended_by"], tc.endedBy)
			}
			if tc.files != nil {
				got, _ := json.Marshal(m["files"])
				want, _ := json.Marshal(tc.files)
				if !bytes.Equal(got, want) {
					t.Errorf("files %s, want %s", got, want)
				}
			}
			rr, _ := m["run_result"].(map[string]any)
			if tc.status == "SandboxError" {
				return
			}
			if rr == nil {
				t.Fatalf("run_result null: %v", m)
			}
			for _, f := range []string{"stdout", "stderr"} {
				if _, ok := rr[f].(string); !ok {
					t.Errorf("run_result.%s %v is not a string", f, rr[f])
				}
			}
			if _, ok := rr["execution_time"].(float64); !ok {
				t.Errorf("run_result.execution_time %v is not a number", rr["execution_time"])
			}
			for k, want := range tc.run {
				if got := rr[k]; got != want {
					t.Errorf("run_result.%s = %#v, want %#v", k, got, want)
				}
			}
			if tc.name == "memory bomb" {
				if rc, _ := rr["return_code"].(float64); rc == 0 {
					t.Errorf("memory bomb: return_code %v, want non-zero", rr["return_code"])
				}
				if m["ended_by"] != "memory_limit" {
					t.Errorf("memory bomb ended by %v", m["ended_by"])
				}
			}
		})
	}
}

// TestBigOutput: 10 MB of output comes back whole within its timeout (a
// SandboxFusion server cuts it near 160 KB).
func TestBigOutput(t *testing.T) {
	url := serve(t, 1)
	start := time.Now()
	code, m, err := post(t, http.DefaultClient, url, `{"code": "import sys; sys.stdout.write('x' * 10_000_000)", "run_timeout": 20}`)
	if err != nil || code != 200 {
		t.Fatalf("HTTP %d, %v", code, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("answered after %s, over its 20 s timeout", d)
	}
	rr := m["run_result"].(map[string]any)
	if n := len(rr["stdout"].(string)); n != 10_000_000 || m["status"] != "Success" {
		t.Fatalf("status %v, %d bytes of stdout, want Success and 10000000", m["status"], n)
	}
}

// overloadErr says what is wrong with an answer under load: verl counts a
// transport error (reset, timeout), a 429 or a 503 as a failed test; it
// retries a 504.
func overloadErr(code int, m map[string]any, err error) error {
	switch {
	case err != nil:
		return err
	case code == 504:
		return nil
	case code != 200:
		return fmt.Errorf("HTTP %d: %v", code, m)
	case m["status"] != "Success":
		return fmt.Errorf("status %v: %v", m["status"], m)
	}
	return nil
}

// TestBurst opens 200 connections at once on 2 slots: none is reset or
// refused, every one is answered 200 (or 504, which clients retry).
func TestBurst(t *testing.T) {
	url := serve(t, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	gate := make(chan struct{})
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // a new connection each
			<-gate
			code, m, err := post(t, c, url, `{"code": "print(1)"}`)
			if e := overloadErr(code, m, err); e != nil {
				errs <- e
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(errs)
	var all []error
	for e := range errs {
		all = append(all, e)
	}
	if len(all) > 0 {
		t.Fatalf("%d of 200 requests failed; first: %v", len(all), errors.Join(all[:min(3, len(all))]...))
	}
}

// TestSustained runs 64 clients of 1-second programs on 2 slots for 20 s:
// never a 429, 503 or dropped connection; a request that waited past its
// deadline is a 504.
func TestSustained(t *testing.T) {
	url := serve(t, 2)
	deadline := time.Now().Add(20 * time.Second)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		ok, retry int
		failures  []error
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 2 * time.Minute}
			for time.Now().Before(deadline) {
				code, m, err := post(t, c, url, `{"code": "import time; time.sleep(1)", "run_timeout": 10}`)
				e := overloadErr(code, m, err)
				mu.Lock()
				switch {
				case e != nil:
					failures = append(failures, e)
				case code == 504:
					retry++
				default:
					ok++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d answered, %d told to retry (504)", ok, retry)
	if len(failures) > 0 {
		t.Fatalf("%d failures; first: %v", len(failures), failures[0])
	}
	if ok == 0 {
		t.Fatal("no program ran")
	}
}

// TestGoCompile: Go compiles and runs in one rlm run; a compile error
// answers in compile_result (Finished, non-zero return_code, the
// compiler's stderr) with run_result null, so verl scores it as a compile
// error (-4), not a runtime error.
func TestGoCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	url := serve(t, 2, "python", "golang")
	code, m, err := post(t, http.DefaultClient, url, `{"language": "go", "code": "package main\nimport \"fmt\"\nfunc main() { var s string; fmt.Scan(&s); fmt.Println(s + s) }", "stdin": "ab", "compile_timeout": 120, "run_timeout": 20}`)
	if err != nil || code != 200 {
		t.Fatalf("HTTP %d, %v", code, err)
	}
	rr, _ := m["run_result"].(map[string]any)
	if m["status"] != "Success" || m["compile_result"] != nil || rr == nil || rr["stdout"] != "abab\n" {
		t.Fatalf("a Go program: %v", m)
	}
	code, m, err = post(t, http.DefaultClient, url, `{"language": "go", "code": "package main\nfunc main() { undefined() }", "compile_timeout": 120, "run_timeout": 20}`)
	if err != nil || code != 200 {
		t.Fatalf("HTTP %d, %v", code, err)
	}
	cr, _ := m["compile_result"].(map[string]any)
	if m["status"] != "Failed" || m["run_result"] != nil || cr == nil || cr["status"] != "Finished" || cr["return_code"] == 0.0 ||
		!strings.Contains(cr["stderr"].(string), "undefined") {
		t.Fatalf("a Go compile error: %v", m)
	}
	// compile_timeout is the compiler's own clock: past it, compile_result
	// is TimeLimitExceeded and nothing ran. The pid keeps the build cache
	// from answering.
	body := fmt.Sprintf(`{"language": "go", "code": "package main\nimport \"fmt\"\nfunc main() { fmt.Println(%d) }", "compile_timeout": 0.01, "run_timeout": 20}`, os.Getpid())
	code, m, err = post(t, http.DefaultClient, url, body)
	if err != nil || code != 200 {
		t.Fatalf("HTTP %d, %v", code, err)
	}
	cr, _ = m["compile_result"].(map[string]any)
	if m["status"] != "Failed" || m["run_result"] != nil || cr == nil || cr["status"] != "TimeLimitExceeded" || cr["return_code"] != nil {
		t.Fatalf("a Go compile past compile_timeout: %v", m)
	}
}
