package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/sandboxfusion"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/testutil"
)

// countingBody streams n bytes of a JSON request and counts how many the
// transport took from it.
type countingBody struct {
	prefix   []byte
	n, taken int64
	read     atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.taken >= b.n {
		return 0, io.EOF
	}
	k := int64(len(p))
	if k > b.n-b.taken {
		k = b.n - b.taken
	}
	for i := int64(0); i < k; i++ {
		off := b.taken + i
		if off < int64(len(b.prefix)) {
			p[i] = b.prefix[off]
		} else {
			p[i] = 'x'
		}
	}
	b.taken += k
	b.read.Add(k)
	return int(k), nil
}

// A 64 MiB body is refused with 413 once the limit is passed; the server
// does not read the rest. The body is streamed (no Content-Length) from a
// real client over 127.0.0.1, so the server cannot know its size up front.
func TestHugeBodyRefusedEarly(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	cfg := fakeConfig(t, f)
	cfg.BodyLimit = 1 << 20
	url, _ := start(t, cfg)
	const size = 64 << 20
	for _, declared := range []bool{false, true} {
		body := &countingBody{prefix: []byte(`{"code": "`), n: size}
		req, err := http.NewRequest("POST", url+"/execute", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if declared {
			req.ContentLength = size
		} else {
			req.ContentLength = -1 // chunked: the size is unknown
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("declared=%v: %v (after sending %d bytes)", declared, err, body.read.Load())
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !bytes.Contains(raw, []byte("body_too_large")) {
			t.Fatalf("declared=%v: %d %s", declared, resp.StatusCode, raw)
		}
		// What was consumed is the limit plus what socket and transport
		// buffers hold, far from the 64 MiB offered.
		if got := body.read.Load(); got > cfg.BodyLimit+16<<20 {
			t.Errorf("declared=%v: the client sent %d of %d bytes before the 413", declared, got, size)
		}
		t.Logf("declared=%v: client sent %.1f MiB of 64 MiB", declared, float64(body.read.Load())/(1<<20))
	}
	if f.runs.Load() != 0 {
		t.Errorf("an over-size request ran")
	}
}

// A client that disconnects cancels its run: the program's processes are
// killed and its slot freed.
func TestDisconnectKillsTheProgram(t *testing.T) {
	// process: the program reports its pids in a host file, which the
	// default (auto, namespace where bubblewrap works) would not show it.
	url, srv := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxConcurrent: 1,
		Limits: core.Limits{Isolation: "process"}})
	pidFile := filepath.Join(t.TempDir(), "pid")
	code := `import os, subprocess, time
child = subprocess.Popen(["sleep", "312"])
open(` + strconv.Quote(pidFile) + `, "w").write("%d %d" % (os.getpid(), child.pid))
time.sleep(60)`
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/execute", strings.NewReader(mustJSON(map[string]any{"code": code})))
		_, err := http.DefaultClient.Do(req)
		done <- err
	}()
	var pids []int
	waitFor(t, "the program to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !bytes.Contains(b, []byte(" ")) {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
		return true
	})
	cancel()
	<-done
	waitFor(t, "the program and its child to die", func() bool {
		for _, p := range pids {
			if proctree.Alive(p) {
				return false
			}
		}
		return srv.InFlight() == 0
	})
	if r := call(t, "POST", url+"/execute", `{"code": "print(2)"}`); r.body["stdout"] != "2\n" {
		t.Errorf("after a cancelled run: %s", r.raw)
	}
}

// noPlugins waits until earlier tests' plugins have exited (their
// teardown after SIGKILL is asynchronous), so counts start from zero.
func noPlugins(t *testing.T) {
	t.Helper()
	waitFor(t, "earlier plugins to exit", func() bool { return len(childPlugins()) == 0 })
}

// killPlugin kills this process's one plugin child and waits until it died.
func killPlugin(t *testing.T) {
	t.Helper()
	plugins := childPlugins()
	if len(plugins) != 1 {
		t.Fatalf("%d plugin processes, want 1", len(plugins))
	}
	if err := syscall.Kill(plugins[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin to die", func() bool { return !proctree.Alive(plugins[0]) })
}

// childPlugins lists this process's plugin children.
func childPlugins() []int { return testutil.Children("rlm-plugin-python") }

// One plugin serves every request; when it dies it is launched again. A
// request that found it dead (idle) still gets its answer; a request whose
// program was running ends crashed and is never run twice.
func TestPluginRelaunchedAfterDeath(t *testing.T) {
	noPlugins(t)
	var launches atomic.Int64
	// Level process: the program's mark file must be visible to the test.
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, &launches), Limits: core.Limits{Isolation: "process"}})
	for i := 0; i < 5; i++ {
		if r := call(t, "POST", url+"/execute", `{"code": "print(1)"}`); r.body["status"] != "success" {
			t.Fatalf("run %d: %s", i, r.raw)
		}
	}
	if n := launches.Load(); n != 1 {
		t.Fatalf("%d plugin launches for 5 requests, want 1", n)
	}
	// Killed in the middle of a run: the program had started (it says so
	// in a file), so it may have partly run. It must not run a second
	// time: its client is told it crashed.
	mark := filepath.Join(t.TempDir(), "runs")
	slow := make(chan reply, 1)
	go func() {
		slow <- call(t, "POST", url+"/execute", fmt.Sprintf(`{"code": "import time; open('%s', 'a').write('run\\n'); time.sleep(30); print(2)"}`, mark))
	}()
	// Its line, not just the file: open() creates the file before the
	// write reaches it, and a kill in between leaves it empty.
	waitFor(t, "the slow run to start", func() bool { b, _ := os.ReadFile(mark); return string(b) == "run\n" })
	killPlugin(t)
	if r := <-slow; r.status != 200 || r.body["status"] != "error" || r.body["ended_by"] != "crashed" ||
		!strings.Contains(fmt.Sprint(r.body["error"]), "may have partly run") {
		t.Errorf("the run whose plugin died: %d %s", r.status, r.raw)
	}
	if b, _ := os.ReadFile(mark); string(b) != "run\n" {
		t.Errorf("the program whose plugin died ran %q, want once", b)
	}
	if r := call(t, "POST", url+"/execute", `{"code": "print(3)"}`); r.body["stdout"] != "3\n" {
		t.Errorf("after the plugin died: %d %s", r.status, r.raw)
	}
	// Killed while idle: the next request relaunches it and succeeds.
	killPlugin(t)
	if r := call(t, "POST", url+"/execute", `{"code": "print(4)"}`); r.body["stdout"] != "4\n" {
		t.Errorf("after the idle plugin was killed: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", url+"/health", ""); r.status != 200 {
		t.Errorf("health after the relaunches: %d %s", r.status, r.raw)
	}
	if n := launches.Load(); n != 3 {
		t.Errorf("%d launches, want 3 (first, after each kill)", n)
	}
	m := string(call(t, "GET", url+"/metrics", "").raw)
	if !strings.Contains(m, `rlm_serve_runtime_restarts_total{language="python"} 2`) {
		t.Errorf("metrics do not count restarts")
	}
}

// Every path and method the OpenAPI document lists answers (not 404 or
// 405), every path `rlm serve` answers (MCP's /mcp included) is listed,
// and the response fields it marks required appear in real answers.
func TestOpenAPIMatchesHandler(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	// Served as `rlm serve` serves it, with MCP mounted at /mcp.
	srv, err := server.New(fakeConfig(t, f))
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/mcp", mcpserver.HTTPHandler(srv, mcpserver.Options{}))
	sandboxfusion.Mount(srv)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	url := ts.URL
	r := call(t, "GET", url+"/openapi.json", "")
	disk, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 || !bytes.Equal(r.raw, disk) {
		t.Fatalf("GET /openapi.json is not docs/openapi.json (%d)", r.status)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(disk, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q", doc.OpenAPI)
	}
	// The paths rlm serve answers (core/server's routes and the MCP
	// mount servecmd adds), each documented.
	for _, path := range []string{"/execute", "/health", "/sessions", "/sessions/{id}/execute", "/sessions/{id}/interrupt", "/sessions/{id}/variables/{name}",
		"/sessions/{id}", "/metrics", "/openapi.json", "/mcp", "/run_code", "/v1/ping", "/judge",
		"/runs", "/runs/{id}", "/runs/{id}/events", "/runs/{id}/cancel"} {
		if _, ok := doc.Paths[path]; !ok {
			t.Errorf("%s is served but not in docs/openapi.json", path)
		}
	}
	// The sandbox endpoints of sessions (sandboxapi.go).
	for _, path := range []string{"/sessions/{id}/commands", "/sessions/{id}/commands/{pid}/signal", "/sessions/{id}/files"} {
		if _, ok := doc.Paths[path]; !ok {
			t.Errorf("%s is served but not in docs/openapi.json", path)
		}
	}
	// A session to address; bodies that are valid for each request schema.
	sid := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	call(t, "POST", url+"/sessions/"+sid+"/execute", `{"code": "set v 1"}`)
	bodies := map[string]string{
		"#/components/schemas/ExecuteRequest": `{"code": "echo hi"}`,
		"#/components/schemas/SessionRequest": `{}`,
		"#/components/schemas/CommandRequest": `{"command": "echo hi"}`,
		"#/components/schemas/SignalRequest":  `{"signal": "TERM"}`,
		"#/components/schemas/CellRequest":    `{"code": "echo hi"}`,
		"#/components/schemas/MCPRequest":     `{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`,
		"#/components/schemas/RunCodeRequest": `{"code": "echo hi", "language": "bash"}`,
		"#/components/schemas/JudgeRequest":   `{"code": "echo hi", "language": "bash", "cases": [{"expected_stdout": "hi"}]}`,
		"#/components/schemas/RunRequest":     `{"task": "t"}`,
	}
	order := []string{"get", "post", "delete"} // delete the session last
	checked := 0
	for _, method := range order {
		for path, ops := range doc.Paths {
			op, ok := ops[method]
			if !ok {
				continue
			}
			p := strings.NewReplacer("{id}", sid, "{name}", "v").Replace(path)
			body := ""
			if op.RequestBody != nil {
				body = bodies[op.RequestBody.Content["application/json"].Schema.Ref]
				if body == "" {
					t.Fatalf("%s %s: no sample body for its schema", method, path)
				}
			}
			// (MCP's streamable HTTP wants both types accepted.)
			r := call(t, strings.ToUpper(method), url+p, body, "Accept", "application/json, text/event-stream")
			if r.status == 404 || r.status == 405 {
				t.Errorf("%s %s is documented but answers %d %s", method, path, r.status, r.raw)
				continue
			}
			resp, documented := op.Responses[strconv.Itoa(r.status)]
			if !documented {
				t.Errorf("%s %s answered %d, which is not documented", method, path, r.status)
				continue
			}
			checked++
			ref := resp.Content["application/json"].Schema.Ref
			if ref == "" {
				continue
			}
			schema := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			for _, field := range schema.Required {
				if _, ok := r.body[field]; !ok {
					t.Errorf("%s %s: documented field %q missing from %s", method, path, field, r.raw)
				}
			}
			for field := range r.body {
				if _, ok := schema.Properties[field]; !ok {
					t.Errorf("%s %s: field %q is not documented", method, path, field)
				}
			}
		}
	}
	if checked < 8 {
		t.Errorf("only %d operations checked", checked)
	}
	// The response carries every field of core.Result (what exec --json
	// prints) under its own name, and the document lists each: a Result
	// with every field set shows the omitempty ones too.
	full := &core.Result{}
	fill(reflect.ValueOf(full).Elem())
	resultKeys, respKeys := jsonKeys(t, full), jsonKeys(t, server.Response("fake", full))
	documented := doc.Components.Schemas["ExecuteResponse"].Properties
	for k := range resultKeys {
		if !respKeys[k] {
			t.Errorf("core.Result's %q is missing from ExecuteResponse", k)
		}
	}
	for k := range respKeys {
		if _, ok := documented[k]; !ok {
			t.Errorf("ExecuteResponse's %q is not documented", k)
		}
	}
	// The error schema matches real errors too.
	e := call(t, "POST", url+"/execute", `{`)
	if e.errCode() == "" || e.errMsg() == "" {
		t.Errorf("error shape: %s", e.raw)
	}
}

// fill sets every exported field reachable from v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// jsonKeys is the set of top-level keys of v's JSON object.
func jsonKeys(t *testing.T, v any) map[string]bool {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k := range m {
		keys[k] = true
	}
	return keys
}
