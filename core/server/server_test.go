package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
)

func fakeConfig(t testing.TB, f *fakeRuntime) server.Config {
	return server.Config{Modes: []string{"fake"}, Open: fakeOpener(t, f, nil), MaxConcurrent: 2, Queue: 4}
}

func TestExecutePython(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})

	// The earlier server's request, unchanged: files in (a subdirectory
	// keeps its path), a file written to $OUTPUT_DIR comes back by name.
	code := `import os, sys
data = open("in/data.txt").read()
print("got", data, sys.argv[1:], os.environ.get("GREETING"), sys.stdin.read())
open(os.path.join(os.environ["OUTPUT_DIR"], "out.txt"), "w").write(data.upper())
os.makedirs(os.path.join(os.environ["OUTPUT_DIR"], "sub"), exist_ok=True)
open(os.path.join(os.environ["OUTPUT_DIR"], "sub", "x.bin"), "wb").write(b"\x00\x01")
`
	r := call(t, "POST", url+"/execute", mustJSON(map[string]any{
		"code": code, "timeout_seconds": 10, "requirements": []string{},
		"files": map[string]string{"in/data.txt": base64.StdEncoding.EncodeToString([]byte("abc"))},
		"args":  []string{"a1"}, "env": map[string]string{"GREETING": "hi"}, "stdin": "from-stdin",
	}))
	if r.status != 200 || r.body["status"] != "success" {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if got := r.body["stdout"]; got != "got abc ['a1'] hi from-stdin\n" {
		t.Errorf("stdout = %q", got)
	}
	files := r.body["files_produced"].(map[string]any)
	if files["out.txt"] != base64.StdEncoding.EncodeToString([]byte("ABC")) || files["sub/x.bin"] != "AAE=" {
		t.Errorf("files_produced = %v", files)
	}
	if _, ok := files["in/data.txt"]; ok {
		t.Errorf("an unchanged input file came back: %v", files)
	}
	for _, k := range []string{"exit_code", "execution_time_ms", "timed_out", "truncated", "stderr"} {
		if _, ok := r.body[k]; !ok {
			t.Errorf("response lacks %q: %s", k, r.raw)
		}
	}

	r = call(t, "POST", url+"/execute", `{"code": "import sys; print('bad', file=sys.stderr); sys.exit(3)"}`)
	if r.status != 200 || r.body["status"] != "error" || r.body["exit_code"] != 3.0 || r.body["stderr"] != "bad\n" {
		t.Errorf("exit 3: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/execute", `{"code": "import time; time.sleep(30)", "timeout_ms": 300}`)
	if r.body["status"] != "timeout" || r.body["exit_code"] != -1.0 || r.body["timed_out"] != true {
		t.Errorf("timeout: %s", r.raw)
	}
	r = call(t, "POST", url+"/execute", `{"code": "print('x' * 3000000)"}`)
	if r.body["truncated"] != true || len(r.body["stdout"].(string)) >= 3000000 {
		t.Errorf("3 MB of output was not truncated: truncated=%v len=%d", r.body["truncated"], len(r.body["stdout"].(string)))
	}
	r = call(t, "POST", url+"/execute", `{"code": "print(1)", "language": "py"}`)
	if r.body["status"] != "success" || r.body["language"] != "python" {
		t.Errorf("language alias: %s", r.raw)
	}
	r = call(t, "POST", url+"/execute", `{"code": "echo 1", "language": "ruby"}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), "language") {
		t.Errorf("unknown language: %d %s", r.status, r.raw)
	}
}

func TestTimeoutIsCappedByMax(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.MaxTimeout = 200 * time.Millisecond
	url, _ := start(t, cfg)
	r := call(t, "POST", url+"/execute", `{"code": "sleep 60000", "timeout_seconds": 3600}`)
	if r.body["status"] != "timeout" {
		t.Fatalf("a one-hour timeout was not capped: %s", r.raw)
	}
}

func TestRequestErrors(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.BodyLimit = 1 << 20
	url, _ := start(t, cfg)
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code, mention            string
	}{
		{"bad json", "POST", "/execute", `{"code": `, nil, 400, "bad_json", "JSON"},
		{"not an object", "POST", "/execute", `[1]`, nil, 400, "bad_json", "object"},
		{"two values", "POST", "/execute", `{"code":"echo"} {}`, nil, 400, "bad_json", "more than one"},
		{"empty body", "POST", "/execute", ``, []string{"Content-Type", "application/json"}, 400, "bad_json", "empty"},
		{"wrong type", "POST", "/execute", `{"code": "echo", "timeout_seconds": "soon"}`, nil, 400, "bad_field", "timeout_seconds"},
		{"unknown field", "POST", "/execute", `{"code": "echo", "timeuot": 1}`, nil, 400, "bad_field", "timeuot"},
		{"missing code", "POST", "/execute", `{"language": "fake"}`, nil, 400, "bad_field", "code"},
		{"both timeouts", "POST", "/execute", `{"code": "echo", "timeout_seconds": 1, "timeout_ms": 1}`, nil, 400, "bad_field", "timeout"},
		{"negative timeout", "POST", "/execute", `{"code": "echo", "timeout_ms": -5}`, nil, 400, "bad_field", "timeout_ms"},
		{"bad base64", "POST", "/execute", `{"code": "echo", "files": {"a.txt": "%%%"}}`, nil, 400, "bad_field", `files["a.txt"]`},
		{"escaping file", "POST", "/execute", `{"code": "echo", "files": {"../etc/x": ""}}`, nil, 400, "bad_field", `../etc/x`},
		{"absolute file", "POST", "/execute", `{"code": "echo", "files": {"/etc/x": ""}}`, nil, 400, "bad_field", `/etc/x`},
		// encoding/json would have written an empty file for null.
		{"null file", "POST", "/execute", `{"code": "echo", "files": {"x": null}}`, nil, 400, "bad_field", `files["x"]: is null`},
		{"null cell file", "POST", "/sessions/abc/execute", `{"code": "", "files": {"x": null}}`, nil, 400, "bad_field", `files["x"]: is null`},
		{"file not a string", "POST", "/execute", `{"code": "echo", "files": {"x": 1}}`, nil, 400, "bad_field", `files["x"]: want a base64 string`},
		{"files not an object", "POST", "/execute", `{"code": "echo", "files": "x"}`, nil, 400, "bad_field", `files`},
		// path.Clean would drop the slash and write a file named sub.
		{"directory file", "POST", "/execute", `{"code": "echo", "files": {"sub/": "eA=="}}`, nil, 400, "bad_field", `files["sub/"]: file name "sub/" ends in a slash`},
		{"directory cell file", "POST", "/sessions/abc/execute", `{"code": "", "files": {"sub/": "eA=="}}`, nil, 400, "bad_field", `ends in a slash`},
		// Python would read it as float('inf').
		{"infinite context", "POST", "/sessions", `{"language": "fake", "context": {"x": [1e999]}}`, nil, 400, "bad_field", "field context holds the number 1e999 (at byte 7), out of range for a 64-bit float"},
		// The runtimes answered 404 variable_not_found for these.
		{"variable not an identifier", "GET", "/sessions/abc/variables/1bad", ``, nil, 400, "bad_request", `variable name "1bad" is not an identifier`},
		{"dotted variable", "GET", "/sessions/abc/variables/a.b", ``, nil, 400, "bad_request", `"a.b"`},
		{"bad env", "POST", "/execute", `{"code": "echo", "env": {"A=B": "x"}}`, nil, 400, "bad_field", `env`},
		// A name the sandbox's /bin/sh start would drop (core.CheckEnv).
		{"env name not an identifier", "POST", "/execute", `{"code": "echo", "env": {"BAD NAME": "x"}}`, nil, 400, "bad_field", `env["BAD NAME"]: the name is not valid`},
		// encoding/json would quietly turn the byte into U+FFFD.
		{"not UTF-8", "POST", "/execute", "{\"code\": \"echo \xff\"}", nil, 400, "bad_json", "byte 15 (0xff, counting from 0) is not valid UTF-8"},
		{"truncated UTF-8", "POST", "/execute", "{\"code\": \"echo\", \"stdin\": \"\xe2\x82\"}", nil, 400, "bad_json", "byte 27 (0xe2"},
		{"not UTF-8 session", "POST", "/sessions", "{\"language\": \"\xff\"}", nil, 400, "bad_json", "base64"},
		{"not UTF-8 cell", "POST", "/sessions/abc/execute", "{\"code\": \"\xc0\xaf\"}", nil, 400, "bad_json", "byte 10 (0xc0"},
		{"lone surrogate", "POST", "/execute", `{"code": "print('\ud800')"}`, nil, 400, "bad_json", `holds \ud800 at byte 17`},
		{"huge arg", "POST", "/execute", `{"code": "echo", "args": ["` + strings.Repeat("a", 200<<10) + `"]}`, nil, 400, "bad_field", `args[0]`},
		{"not json", "POST", "/execute", `code=1`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", "JSON"},
		{"too large", "POST", "/execute", `{"code": "` + strings.Repeat("x", 2<<20) + `"}`, nil, 413, "body_too_large", "1048576"},
		{"no such path", "GET", "/nope", ``, nil, 404, "not_found", "/nope"},
		{"no such session", "DELETE", "/sessions/abc", ``, nil, 404, "session_not_found", "abc"},
		{"wrong method", "GET", "/execute", ``, nil, 405, "method_not_allowed", "POST"},
		{"wrong method health", "POST", "/health", `{}`, nil, 405, "method_not_allowed", "GET"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, c.method, url+c.path, c.body, c.hdr...)
			if r.status != c.status || r.errCode() != c.code || !strings.Contains(r.errMsg(), c.mention) {
				t.Fatalf("got %d %s; want %d %s mentioning %q", r.status, r.raw, c.status, c.code, c.mention)
			}
			if c.status == 405 && r.header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}
	if n := f.runs.Load(); n != 0 {
		t.Errorf("%d bad requests reached the runtime", n)
	}
	// The server still serves after all of them, UTF-8 beyond ASCII too.
	if r := call(t, "POST", url+"/execute", `{"code": "echo café \u00e9"}`); r.status != 200 || r.body["status"] != "success" {
		t.Errorf("a good request after the bad ones: %d %s", r.status, r.raw)
	}
}

func TestToken(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.Token = "s3cret"
	url, _ := start(t, cfg)
	if r := call(t, "GET", url+"/health", ""); r.status != 200 {
		t.Errorf("/health needs no token, got %d", r.status)
	}
	for _, path := range []string{"/metrics", "/openapi.json"} {
		if r := call(t, "GET", url+path, ""); r.status != 401 || r.errCode() != "unauthorized" {
			t.Errorf("%s without a token: %d %s", path, r.status, r.raw)
		}
	}
	body := `{"code": "echo ok"}`
	if r := call(t, "POST", url+"/execute", body); r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d", r.status)
	}
	if r := call(t, "POST", url+"/execute", body, "Authorization", "Bearer s3cre"); r.status != 401 {
		t.Errorf("wrong token: %d", r.status)
	}
	if r := call(t, "POST", url+"/execute", body, "Authorization", "s3cret"); r.status != 401 {
		t.Errorf("token without Bearer: %d", r.status)
	}
	if r := call(t, "POST", url+"/execute", body, "Authorization", "Bearer s3cret"); r.status != 200 || r.body["stdout"] != "ok\n" {
		t.Errorf("right token: %d %s", r.status, r.raw)
	}
	if f.runs.Load() != 1 {
		t.Errorf("runs = %d, want only the authorized one", f.runs.Load())
	}
}

// waitFor polls cond until it holds; the test's own timeout bounds it.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOverloadAnswers429(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.MaxConcurrent, cfg.Queue = 1, 0
	url, srv := start(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	slow := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/execute", strings.NewReader(`{"code": "sleep 60000"}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			slow <- reply{status: resp.StatusCode}
			return
		}
		slow <- reply{status: -1}
	}()
	waitFor(t, "the slow request to run", func() bool { return srv.InFlight() == 1 })
	r := call(t, "POST", url+"/execute", `{"code": "echo hi"}`)
	if r.status != 429 || r.errCode() != "busy" {
		t.Fatalf("second request: %d %s", r.status, r.raw)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	// A full server refuses before reading the body: bodies held in
	// memory are bounded by slots + queue.
	big := &countingBody{prefix: []byte(`{"code": "`), n: 64 << 20}
	req, _ := http.NewRequest("POST", url+"/execute", big)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || big.read.Load() > 16<<20 {
		t.Errorf("a 64 MiB body to a full server: %d after %d bytes sent", resp.StatusCode, big.read.Load())
	}
	h := call(t, "GET", url+"/health", "")
	if h.body["current_load"] != 1.0 || h.body["capacity"] != 1.0 {
		t.Errorf("health under load: %s", h.raw)
	}
	// The client that goes away cancels its run.
	cancel()
	<-slow
	waitFor(t, "the run to be cancelled", func() bool { return f.cancelled.Load() == 1 && srv.InFlight() == 0 })
	if r := call(t, "POST", url+"/execute", `{"code": "echo hi"}`); r.status != 200 {
		t.Errorf("after the slot freed: %d %s", r.status, r.raw)
	}
	m := call(t, "GET", url+"/metrics", "")
	if !strings.Contains(string(m.raw), "rlm_serve_rejected_total 2") {
		t.Errorf("metrics do not count the 429")
	}
}

func TestQueueWaitsForASlot(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.MaxConcurrent, cfg.Queue, cfg.QueueWait = 1, 1, time.Minute
	url, srv := start(t, cfg)
	first := make(chan reply, 1)
	go func() { first <- call(t, "POST", url+"/execute", `{"code": "sleep 300\necho first"}`) }()
	waitFor(t, "the first run", func() bool { return srv.InFlight() == 1 })
	queued := make(chan reply, 1)
	go func() { queued <- call(t, "POST", url+"/execute", `{"code": "echo queued"}`) }()
	waitFor(t, "the queued request", func() bool {
		return call(t, "GET", url+"/health", "").body["queue_depth"] == 1.0
	})
	if r := call(t, "POST", url+"/execute", `{"code": "echo third"}`); r.status != 429 {
		t.Errorf("third request with a full queue: %d", r.status)
	}
	if r := <-first; r.body["stdout"] != "first\n" {
		t.Errorf("first: %s", r.raw)
	}
	if r := <-queued; r.status != 200 || r.body["stdout"] != "queued\n" {
		t.Errorf("queued: %d %s", r.status, r.raw)
	}
}

func TestQueueWaitLimit(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.MaxConcurrent, cfg.Queue, cfg.QueueWait = 1, 1, 50*time.Millisecond
	url, srv := start(t, cfg)
	go call(t, "POST", url+"/execute", `{"code": "sleep 2000"}`)
	waitFor(t, "the first run", func() bool { return srv.InFlight() == 1 })
	if r := call(t, "POST", url+"/execute", `{"code": "echo late"}`); r.status != 429 {
		t.Errorf("a request that waited past queue_wait: %d %s", r.status, r.raw)
	}
}

func TestSessions(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.MaxSessions = 2
	url, _ := start(t, cfg)

	r := call(t, "POST", url+"/sessions", `{"context": "the context"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	r = call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "set x {\"a\": [1, 2]}\necho done", "timeout_ms": 5000}`)
	if r.status != 200 || r.body["status"] != "success" || r.body["stdout"] != "done\n" {
		t.Fatalf("execute: %d %s", r.status, r.raw)
	}
	r = call(t, "GET", url+"/sessions/"+id+"/variables/x", "")
	if r.status != 200 || mustJSON(r.body["value"]) != `{"a":[1,2]}` || r.body["name"] != "x" {
		t.Errorf("variable: %d %s", r.status, r.raw)
	}
	r = call(t, "GET", url+"/sessions/"+id+"/variables/context", "")
	if r.body["value"] != "the context" {
		t.Errorf("context: %s", r.raw)
	}
	r = call(t, "GET", url+"/sessions/"+id+"/variables/nope", "")
	if r.status != 404 || r.errCode() != "variable_not_found" {
		t.Errorf("missing variable: %d %s", r.status, r.raw)
	}
	// No LLM configured: llm_query fails inside the cell with a clear error.
	r = call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "llm hello"}`)
	if r.status != 200 || r.body["status"] != "error" || !strings.Contains(r.body["error"].(string), "no LLM configured") {
		t.Errorf("llm_query without an LLM: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/sessions/"+id+"/execute", `{}`); r.status != 400 || !strings.Contains(r.errMsg(), "code") {
		t.Errorf("cell without code: %d %s", r.status, r.raw)
	}

	r2 := call(t, "POST", url+"/sessions", `{}`)
	if r2.status != 201 {
		t.Fatalf("second session: %d", r2.status)
	}
	if r := call(t, "POST", url+"/sessions", `{}`); r.status != 429 || r.errCode() != "too_many_sessions" || r.header.Get("Retry-After") == "" {
		t.Errorf("third session over the maximum: %d %s", r.status, r.raw)
	}
	// At the cap a bad request still hears what is wrong with it.
	for body, mention := range map[string]string{`{"language": "cobol"}`: "cobol", `{"language": "fake", "extra": 1}`: "extra", `{"context": 1e999}`: "1e999"} {
		if r := call(t, "POST", url+"/sessions", body); r.status != 400 || r.errCode() != "bad_field" || !strings.Contains(r.errMsg(), mention) {
			t.Errorf("bad request %s at the session cap: %d %s", body, r.status, r.raw)
		}
	}
	if h := call(t, "GET", url+"/health", ""); h.body["sessions"] != 2.0 {
		t.Errorf("health sessions: %s", h.raw)
	}
	if r := call(t, "DELETE", url+"/sessions/"+id, ""); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "echo"}`); r.status != 410 || r.errCode() != "session_ended" {
		t.Errorf("deleted session: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/sessions", `{"language": "fake"}`); r.status != 201 {
		t.Errorf("a session after one was deleted: %d %s", r.status, r.raw)
	}
	if m := string(call(t, "GET", url+"/metrics", "").raw); !strings.Contains(m, "rlm_serve_sessions 2") {
		t.Errorf("metrics sessions gauge is not 2")
	}
}

func TestSessionLLMBridge(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.Bridges.LLMQuery = func(_ context.Context, prompt, _ string) (string, error) { return "answer to " + prompt, nil }
	url, _ := start(t, cfg)
	id := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	r := call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "llm hello"}`)
	if r.body["stdout"] != "answer to hello\n" {
		t.Errorf("llm_query with an LLM: %s", r.raw)
	}
}

func TestSessionIdleExpiry(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.SessionIdle = 100 * time.Millisecond
	url, _ := start(t, cfg)
	id := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	// A cell longer than the idle limit does not expire its session.
	if r := call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "sleep 400\necho still"}`); r.body["stdout"] != "still\n" {
		t.Fatalf("long cell: %s", r.raw)
	}
	waitFor(t, "the idle session to expire", func() bool {
		// (Only /health: touching the session would keep it alive.)
		return call(t, "GET", url+"/health", "").body["sessions"] == 0.0
	})
	if r := call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "echo"}`); r.errCode() != "session_ended" || !strings.Contains(r.errMsg(), "idle") {
		t.Errorf("expired session: %s", r.raw)
	}
}

func TestHealth(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.Version = "v9.9.9"
	url, srv := start(t, cfg)
	r := call(t, "GET", url+"/health", "")
	if r.status != 200 || r.body["status"] != "ok" || r.body["mode"] != "fake" || r.body["runtime_version"] != "Fake 1.0" ||
		r.body["capacity"] != 2.0 || r.body["version"] != "v9.9.9" {
		t.Errorf("health: %d %s", r.status, r.raw)
	}
	if _, ok := r.body["uptime_seconds"].(float64); !ok {
		t.Errorf("uptime_seconds missing: %s", r.raw)
	}
	if id := r.header.Get("X-Request-Id"); len(id) != 16 {
		t.Errorf("X-Request-Id = %q, want a generated id", id)
	}
	if r := call(t, "GET", url+"/health", "", "X-Request-Id", "abc-123"); r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("a client's X-Request-Id is not kept: %q", r.header.Get("X-Request-Id"))
	}
	srv.Drain()
	if r := call(t, "GET", url+"/health", ""); r.status != 503 || r.body["status"] != "unavailable" {
		t.Errorf("draining health: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/execute", `{"code": "echo"}`); r.status != 503 || r.errCode() != "shutting_down" {
		t.Errorf("execute while draining: %d %s", r.status, r.raw)
	}
}

// Python sessions through the server.
func TestSessionsPython(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})
	r := call(t, "POST", url+"/sessions", `{"context": {"rows": [1, 2, 3], "big": 123456789012345678901234567890, "tiny": 1e-999}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	exec := func(code string) reply {
		return call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": code, "timeout_ms": 10000}))
	}
	if r := exec("x = sum(context['rows']) * 7\nprint('ok')"); r.body["status"] != "success" || r.body["stdout"] != "ok\n" {
		t.Fatalf("cell: %s", r.raw)
	}
	// Integers beyond a float stay exact (only infinite floats are refused).
	if r := call(t, "GET", url+"/sessions/"+id+"/variables/context", ""); !strings.Contains(string(r.raw), `"big":123456789012345678901234567890`) {
		t.Errorf("context: %s", r.raw)
	}
	if r := call(t, "GET", url+"/sessions/"+id+"/variables/x", ""); r.body["value"] != 42.0 {
		t.Errorf("x: %s", r.raw)
	}
	r = exec("llm_query('hello')")
	if r.body["status"] != "error" || !strings.Contains(mustJSON(r.body), "no LLM configured") {
		t.Errorf("llm_query without an LLM: %s", r.raw)
	}
	if r := exec("print(x)"); r.body["stdout"] != "42\n" {
		t.Errorf("state after an error: %s", r.raw)
	}
	if r := call(t, "DELETE", url+"/sessions/"+id, ""); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
}

// Several modes: the first is the default, a request's language picks
// another, health lists them all.
func TestSeveralModes(t *testing.T) {
	a, b := &fakeRuntime{name: "alpha"}, &fakeRuntime{name: "beta"}
	oa, ob := fakeOpener(t, a, nil), fakeOpener(t, b, nil)
	open := func(ctx context.Context, name string) (*client.Runtime, error) {
		if name == "beta" {
			return ob(ctx, name)
		}
		return oa(ctx, name)
	}
	modes, rts, _, err := server.OpenModes(context.Background(), open, server.ParseModes("alpha, beta,alpha"))
	if err != nil || len(modes) != 2 {
		t.Fatalf("OpenModes: %v %v", modes, err)
	}
	url, _ := start(t, server.Config{Modes: modes, Open: open, Runtimes: rts})
	call(t, "POST", url+"/execute", `{"code": "echo"}`)
	call(t, "POST", url+"/execute", `{"code": "echo", "language": "beta"}`)
	call(t, "POST", url+"/execute", `{"code": "echo", "language": "BETA"}`)
	if a.runs.Load() != 1 || b.runs.Load() != 2 {
		t.Errorf("runs: alpha %d, beta %d; want 1, 2", a.runs.Load(), b.runs.Load())
	}
	h := call(t, "GET", url+"/health", "")
	if h.body["mode"] != "alpha" || mustJSON(h.body["modes"]) != `["alpha","beta"]` || mustJSON(h.body["runtimes"]) != `{"alpha":"Fake 1.0","beta":"Fake 1.0"}` {
		t.Errorf("health: %s", h.raw)
	}
}

func TestOpenModesErrors(t *testing.T) {
	open := func(ctx context.Context, name string) (*client.Runtime, error) {
		return nil, fmt.Errorf("no plugin for %s", name)
	}
	if _, _, _, err := server.OpenModes(context.Background(), open, []string{"golang"}); err == nil || err.Error() != "mode=golang but no plugin for golang" {
		t.Errorf("explicit mode: %v", err)
	}
	_, _, _, err := server.OpenModes(context.Background(), open, nil)
	if err == nil || !strings.Contains(err.Error(), "tried python, golang, node, shell") || !strings.Contains(err.Error(), "shell: no plugin for shell") {
		t.Errorf("auto-detect: %v", err)
	}
	// Detection enables every available runtime, in order.
	f := &fakeRuntime{name: "x"}
	var tried []string
	good := fakeOpener(t, f, nil)
	open2 := func(ctx context.Context, name string) (*client.Runtime, error) {
		tried = append(tried, name)
		if name == "node" || name == "shell" {
			return good(ctx, name)
		}
		return nil, fmt.Errorf("absent")
	}
	modes, rts, _, err := server.OpenModes(context.Background(), open2, nil)
	if err != nil || mustJSON(modes) != `["node","shell"]` || mustJSON(tried) != `["python","golang","node","shell"]` {
		t.Errorf("detected %v after trying %v: %v", modes, tried, err)
	}
	for _, rt := range rts {
		rt.Close()
	}
}

// A request the runtime itself refuses (a file clashing with the program
// file) is the client's mistake: 400, not 500.
func TestRuntimeRefusalIs400(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})
	r := call(t, "POST", url+"/execute", `{"code": "print(1)", "files": {"main.py": "eA=="}}`)
	if r.status != 400 || r.errCode() != "bad_request" || !strings.Contains(r.errMsg(), "main.py") {
		t.Errorf("got %d %s", r.status, r.raw)
	}
}

// A runtime whose plugin starts but is unavailable here, or does not
// answer Info, is not a mode: OpenModes says why, with the plugin's reason
// (or a default when it gives none), and closes it.
func TestOpenModesUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		info func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error)
		want string
	}{
		{"reason", func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "x", UnavailableReason: "'x' not found in PATH"}, nil
		}, "mode=x but 'x' not found in PATH"},
		{"no reason", func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "x"}, nil
		}, "mode=x but its plugin says it is unavailable"},
		{"no answer", func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return nil, status.Error(codes.Internal, "probe failed")
		}, "mode=x but probe failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := server.OpenModes(context.Background(), mockOpener(t, &plugintest.Runtime{InfoF: tc.info}, nil), []string{"x"})
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A DELETE while a cell runs and another waits behind it: both answer
// that the session was deleted, not that an interrupt kept the state, nor
// the closed stream's gRPC error.
func TestDeleteWhileCellRuns(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	url, srv := start(t, fakeConfig(t, f))
	id := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	replies := make(chan reply, 2)
	cell := func(code string) {
		replies <- call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": code}))
	}
	go cell("sleep 5000")
	waitFor(t, "the first cell to run", func() bool { return srv.InFlight() == 1 })
	time.Sleep(50 * time.Millisecond)
	go cell("echo b")
	waitFor(t, "the second cell to queue", func() bool { return srv.InFlight() == 2 })
	time.Sleep(50 * time.Millisecond)
	if r := call(t, "DELETE", url+"/sessions/"+id, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	for range 2 {
		r := <-replies
		if r.status != 410 || r.errCode() != "session_ended" || !strings.Contains(r.errMsg(), "was deleted (DELETE /sessions/"+id+") while this request") ||
			strings.Contains(r.errMsg(), "kept") || strings.Contains(r.errMsg(), "CloseSend") {
			t.Errorf("a cell of the deleted session: %d %s", r.status, r.raw)
		}
	}
	if r := call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "echo"}`); r.status != 410 || r.errCode() != "session_ended" {
		t.Errorf("after the delete: %d %s", r.status, r.raw)
	}
}
