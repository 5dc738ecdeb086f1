package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/python"
	"github.com/rlmkit/rlm/plugins/shell"
)

// TestMain doubles as the python and shell plugins: the tests launch this
// binary under their names, as rlm launches the real ones, so every tool
// call goes over real gRPC to a real interpreter.
func TestMain(m *testing.M) {
	plugintest.Main(m, map[string]func(){"python": python.Main, "shell": shell.Main})
}

// opener launches this test binary as the named plugin.
func opener(t testing.TB) server.Opener {
	t.Helper()
	for _, tool := range []string{"python3", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	plugintest.LinkPlugins(t, dir, "python", "shell")
	return func(ctx context.Context, name string) (*client.Runtime, error) {
		p, err := launch.Launch(filepath.Join(dir, runtimepb.Prefix+name))
		if err != nil {
			return nil, err
		}
		return client.NewRuntime(name, "native", p.Client, p.Kill, isolate.Available), nil
	}
}

func newServer(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Modes == nil {
		cfg.Modes = []string{"python", "shell"}
	}
	cfg.Open = opener(t)
	cfg.Limits.Isolation = "process"
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// connect is a Go SDK client session on srv's tools, in memory.
func connect(t testing.TB, srv *server.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := mcpserver.New(srv, mcpserver.Options{}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type called struct {
	res  *mcp.CallToolResult
	text string
	out  map[string]any
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) called {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	c := called{res: res}
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			c.text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &c.out)
	}
	return c
}

func TestListTools(t *testing.T) {
	cs := connect(t, newServer(t, server.Config{}))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"run_code":             {"language", "code", "stdin", "timeout_seconds", "files"},
		"list_runtimes":        nil,
		"session_open":         {"language", "context", "env", "model"},
		"session_run":          {"session_id", "code", "timeout_seconds", "files"},
		"session_command":      {"session_id", "command", "cwd", "env", "timeout_seconds"},
		"session_get_variable": {"session_id", "name"},
		"session_close":        {"session_id"},
	}
	got := map[string]bool{}
	for _, tool := range res.Tools {
		got[tool.Name] = true
		args, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		_ = json.Unmarshal(b, &schema)
		if len(schema.Properties) != len(args) {
			t.Errorf("%s arguments %s, want %v", tool.Name, b, args)
		}
		for _, a := range args {
			if p, ok := schema.Properties[a]; !ok || p.Description == "" {
				t.Errorf("%s: argument %s missing or undescribed in %s", tool.Name, a, b)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", tool.Name)
		}
		if tool.Name == "run_code" && strings.Join(schema.Required, ",") != "code" {
			t.Errorf("run_code requires %v, want only code", schema.Required)
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("tool %s missing", n)
		}
	}
}

func TestRunCode(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))

	c := callTool(t, cs, "run_code", map[string]any{"code": "print(40 + 2)"})
	if c.res.IsError || c.out["status"] != "success" || c.out["stdout"] != "42\n" || c.out["language"] != "python" {
		t.Errorf("print: isError=%v out=%v", c.res.IsError, c.out)
	}
	if !strings.Contains(c.text, "exit code 0") || !strings.Contains(c.text, "--- stdout ---\n42\n") {
		t.Errorf("print: text %q", c.text)
	}

	c = callTool(t, cs, "run_code", map[string]any{"language": "shell", "code": "echo out; echo err >&2; exit 3"})
	if !c.res.IsError || c.out["exit_code"] != 3.0 || c.out["status"] != "error" || c.out["stderr"] != "err\n" {
		t.Errorf("exit 3: isError=%v out=%v", c.res.IsError, c.out)
	}
	if !strings.Contains(c.text, "exit code 3") || !strings.Contains(c.text, "--- stderr ---\nerr\n") {
		t.Errorf("exit 3: text %q", c.text)
	}

	c = callTool(t, cs, "run_code", map[string]any{"code": "import sys; print(sys.stdin.read().upper())", "stdin": "abc"})
	if c.res.IsError || c.out["stdout"] != "ABC\n" {
		t.Errorf("stdin: %v", c.out)
	}

	c = callTool(t, cs, "run_code", map[string]any{
		"code":  "import os\nd = open('in/a.txt').read()\nopen(os.environ['OUTPUT_DIR'] + '/out.txt', 'w').write(d * 2)",
		"files": map[string]string{"in/a.txt": base64.StdEncoding.EncodeToString([]byte("hi"))},
	})
	files, _ := c.out["files_produced"].(map[string]any)
	if c.res.IsError || files["out.txt"] != base64.StdEncoding.EncodeToString([]byte("hihi")) || !strings.Contains(c.text, "out.txt") {
		t.Errorf("files: isError=%v out=%v text=%q", c.res.IsError, c.out, c.text)
	}
}

func TestRunCodeTimeout(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	c := callTool(t, cs, "run_code", map[string]any{"code": "import time; time.sleep(600)", "timeout_seconds": 1})
	if !c.res.IsError || c.out["status"] != "timeout" || c.out["timed_out"] != true || c.out["exit_code"] != -1.0 {
		t.Errorf("timeout: isError=%v out=%v", c.res.IsError, c.out)
	}
	if !strings.Contains(c.text, "timed out") {
		t.Errorf("timeout: text %q", c.text)
	}
}

// Requests the server refuses are tool errors whose text names the problem.
func TestRunCodeRefused(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"code": "print(1)", "language": "cobol"}, `"cobol" is not enabled on this server (enabled: python, shell)`},
		{map[string]any{"code": "  "}, "code: is empty"},
		{map[string]any{"code": "print(1)", "timeout_seconds": -2}, "timeout_seconds must be a positive number"},
		{map[string]any{"code": "print(1)", "files": map[string]string{"../x": ""}}, `files["../x"]`},
		{map[string]any{"code": "print(1)", "files": map[string]string{"x": "!!"}}, "not valid base64"},
		{map[string]any{}, "code"},
	} {
		c := callTool(t, cs, "run_code", tc.args)
		if !c.res.IsError || !strings.Contains(c.text, tc.want) {
			t.Errorf("%v: isError=%v text %q, want it to contain %q", tc.args, c.res.IsError, c.text, tc.want)
		}
	}
}

func TestListRuntimes(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	c := callTool(t, cs, "list_runtimes", nil)
	rts, _ := c.out["runtimes"].([]any)
	if c.res.IsError || len(rts) != 2 {
		t.Fatalf("list_runtimes: %v", c.out)
	}
	py := rts[0].(map[string]any)
	if py["name"] != "python" || py["default"] != true || py["available"] != true || py["isolation"] != "process" ||
		!strings.HasPrefix(py["runtime_version"].(string), "Python 3.") {
		t.Errorf("python: %v", py)
	}
	if sh := rts[1].(map[string]any); sh["name"] != "shell" || sh["default"] != false || !strings.Contains(sh["runtime_version"].(string), "bash") {
		t.Errorf("shell: %v", sh)
	}
	if !strings.Contains(c.text, "python (default): Python 3.") {
		t.Errorf("text %q", c.text)
	}
}

// TestListRuntimesSaysTheLevelEnforced: with the default isolation (auto,
// what `rlm mcp` and `rlm serve` run with), list_runtimes reports the
// level each runtime's programs and sessions really get, the same as
// /health's runtime_isolation, never the word auto; a runtime without
// sessions (shell) reports no session level.
func TestListRuntimesSaysTheLevelEnforced(t *testing.T) {
	t.Parallel()
	s, err := server.New(server.Config{Modes: []string{"python", "shell"}, Open: opener(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := callTool(t, connect(t, s), "list_runtimes", nil)
	rts, _ := c.out["runtimes"].([]any)
	if c.res.IsError || len(rts) != 2 {
		t.Fatalf("list_runtimes: %v", c.out)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	var h server.Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatalf("/health: %v: %s", err, rec.Body)
	}
	py, sh := rts[0].(map[string]any), rts[1].(map[string]any)
	want := h.RuntimeIsolation["python"]
	if want.Programs == "" || want.Programs == "auto" || py["isolation"] != want.Programs || py["session_isolation"] != want.Sessions {
		t.Errorf("python: list_runtimes says isolation %v, sessions %v; /health says %+v", py["isolation"], py["session_isolation"], want)
	}
	if sh["isolation"] != h.RuntimeIsolation["shell"].Programs || sh["session_isolation"] != "" {
		t.Errorf("shell: list_runtimes says isolation %v, sessions %q; /health says %+v", sh["isolation"], sh["session_isolation"], h.RuntimeIsolation["shell"])
	}
	if line := "programs at isolation " + want.Programs + ", sessions at isolation " + want.Sessions; !strings.Contains(c.text, line) || strings.Contains(c.text, "auto") {
		t.Errorf("text %q, want %q", c.text, line)
	}
}

func TestSession(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	c := callTool(t, cs, "session_open", map[string]any{"context": "needle in a haystack"})
	id, _ := c.out["session_id"].(string)
	if c.res.IsError || id == "" || c.out["language"] != "python" {
		t.Fatalf("session_open: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "n = context.count('a')\nwords = context.split()"})
	if c.res.IsError || c.out["status"] != "success" {
		t.Fatalf("first cell: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "print(n, words[-1])"})
	if c.res.IsError || c.out["stdout"] != "3 haystack\n" || c.out["result"] != nil {
		t.Errorf("second cell: %v %q", c.out, c.text)
	}
	// the final expression's value, files in and produced files out
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "files": map[string]any{"in.txt": "aGk="},
		"code": "open('out.txt', 'w').write(open('in.txt').read() * 2)\nn * 14"})
	if c.res.IsError || c.out["result"] != "42" || mustJSON(c.out["files_produced"]) != `{"out.txt":"aGloaQ=="}` ||
		!strings.Contains(c.text, "--- result ---\n42\n") || !strings.Contains(c.text, "files produced (base64 in files_produced): out.txt") {
		t.Errorf("value and files: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "1", "files": map[string]any{"../x": ""}})
	if !c.res.IsError || !strings.Contains(c.text, "..") {
		t.Errorf("escaping file: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_get_variable", map[string]any{"session_id": id, "name": "words"})
	if v, _ := c.out["value"].([]any); c.res.IsError || len(v) != 4 || v[0] != "needle" {
		t.Errorf("get words: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_get_variable", map[string]any{"session_id": id, "name": "nope"})
	if !c.res.IsError || !strings.Contains(c.text, `no variable "nope"`) {
		t.Errorf("missing variable: %q", c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "1/0"})
	if !c.res.IsError || !strings.Contains(c.text, "ZeroDivisionError") {
		t.Errorf("raising cell: %q", c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "print('llm', llm_query('hi'))"})
	if !c.res.IsError || !strings.Contains(strings.ToLower(c.text), "llm") || c.out["stdout"] == "llm" {
		t.Errorf("llm_query without a provider: %q", c.text)
	}
	c = callTool(t, cs, "session_close", map[string]any{"session_id": id})
	if c.res.IsError || c.out["closed"] != true {
		t.Errorf("close: %v %q", c.out, c.text)
	}
	for tool, args := range map[string]map[string]any{
		"session_run":          {"session_id": id, "code": "print(n)"},
		"session_get_variable": {"session_id": id, "name": "n"},
		"session_close":        {"session_id": id},
	} {
		c = callTool(t, cs, tool, args)
		if !c.res.IsError || !strings.Contains(c.text, "session \""+id+"\" has ended: it was deleted") {
			t.Errorf("%s after close: %q", tool, c.text)
		}
	}
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{SessionIdle: 200 * time.Millisecond}))
	c := callTool(t, cs, "session_open", nil)
	id, _ := c.out["session_id"].(string)
	if c.res.IsError || id == "" {
		t.Fatalf("session_open: %q", c.text)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c = callTool(t, cs, "session_get_variable", map[string]any{"session_id": id, "name": "x"})
		if strings.Contains(c.text, "has ended") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still open after a minute idle: %q", c.text)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !c.res.IsError || !strings.Contains(c.text, "expired after 200ms idle") {
		t.Errorf("expired: %q", c.text)
	}
}

// Over HTTP, /mcp sits behind the server's token and counts in its
// metrics like /execute.
func TestHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer(t, server.Config{Token: "sekrit"})
	srv.Handle("/mcp", mcpserver.HTTPHandler(srv, mcpserver.Options{}))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	resp, err := http.Post(ts.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}

	client := &http.Client{Transport: bearer{"sekrit"}}
	// A body that is not UTF-8 is a parse error naming the byte, not code
	// run with U+FFFD in place of it; the calls below show /mcp serves on.
	bad := "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"print('\xff')\"}}}"
	req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(bad))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"id":5`) || !strings.Contains(string(raw), `-32700`) ||
		!strings.Contains(string(raw), "the body is not UTF-8: byte 102 (0xff") {
		t.Errorf("a body that is not UTF-8: %d %s", resp.StatusCode, raw)
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c := callTool(t, cs, "run_code", map[string]any{"code": "print('over http')"})
	if c.res.IsError || c.out["stdout"] != "over http\n" {
		t.Fatalf("run_code over HTTP: %v %q", c.out, c.text)
	}

	req, _ = http.NewRequest("GET", ts.URL+"/metrics", nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`rlm_serve_executions_total{language="python",status="success"} 1`, `route="/mcp"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestStdioNotUTF8 drives StdioTransport as `rlm mcp` uses it: a line that
// is not UTF-8 gets a parse error naming the byte (the SDK alone would run
// the code with U+FFFD in place of it), and the session goes on.
func TestStdioNotUTF8(t *testing.T) {
	t.Parallel()
	send, next := stdio(t)
	send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"print('\xff')\"}}}")
	if got := next(); !strings.Contains(got, `"id":2,"error":{"code":-32700,"message":"the message is not UTF-8: byte 102 (0xff`) {
		t.Fatalf("a line that is not UTF-8: %s", got)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print('after')"}}}`)
	if got := next(); !strings.Contains(got, `"id":3,"result"`) || !strings.Contains(got, `after\n`) {
		t.Fatalf("the call after it: %s", got)
	}
}
