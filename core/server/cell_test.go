package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// A cell's response has result (the runtime's value, else null), takes
// files as /execute does and reports the files it produced; a file the
// runtime refuses is a 400 and the session goes on.
func TestCellResultAndFiles(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	url, _ := start(t, fakeConfig(t, f))
	sid := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	cell := func(body string) reply {
		t.Helper()
		return call(t, "POST", url+"/sessions/"+sid+"/execute", body)
	}
	if r := cell(`{"code": "value 2"}`); r.status != 200 || r.body["result"] != "2" {
		t.Fatalf("value: %d %s", r.status, r.raw)
	}
	if r := cell(`{"code": "echo hi"}`); r.status != 200 || !strings.Contains(string(r.raw), `"result":null`) {
		t.Fatalf("no value: %d %s", r.status, r.raw)
	}
	if r := cell(`{"code": "cat in/a.txt", "files": {"in/a.txt": "aGk="}}`); r.status != 200 || r.body["stdout"] != "hi\n" {
		t.Fatalf("upload: %d %s", r.status, r.raw)
	}
	if r := cell(`{"code": "", "files": {"b.txt": "eW8"}}`); r.status != 200 || r.body["status"] != "success" {
		t.Fatalf("upload only, unpadded base64: %d %s", r.status, r.raw)
	}
	if r := cell(`{"code": "cat b.txt\nwrite out.txt made"}`); r.status != 200 || r.body["stdout"] != "yo\n" || mustJSON(r.body["files_produced"]) != `{"out.txt":"bWFkZQ=="}` {
		t.Fatalf("files_produced: %d %s", r.status, r.raw)
	}
	for body, want := range map[string]string{
		`{"code": "echo", "files": {"../x": ""}}`:         `files["../x"]`,
		`{"code": "echo", "files": {"/etc/x": ""}}`:       "absolute",
		`{"code": "echo", "files": {"a": "!!"}}`:          "not valid base64",
		`{"code": "echo", "files": {"a": "", "./a": ""}}`: "names the same file",
		`{"code": "echo", "files": {"bad/x": ""}}`:        "symlink",
	} {
		if r := cell(body); r.status != 400 || !strings.Contains(r.errMsg(), want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, r.status, r.raw, want)
		}
	}
	if r := cell(`{"code": "echo still here"}`); r.status != 200 || r.body["stdout"] != "still here\n" {
		t.Fatalf("the session after refused files: %d %s", r.status, r.raw)
	}
	// a program has no result
	if r := call(t, "POST", url+"/execute", `{"code": "echo hi"}`); r.status != 200 || !strings.Contains(string(r.raw), `"result":null`) {
		t.Fatalf("/execute: %d %s", r.status, r.raw)
	}
}

// The same through the real python plugin: `1+1` gives "2", a statement
// null, an expression after prints its value; files go where the cell
// reads them (the session runs at the server's default isolation, auto)
// and come back; a path through a symlink the cell made is a 400.
func TestSessionsPythonResultAndFiles(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})
	r := call(t, "POST", url+"/sessions", `{}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	cell := func(code string, files map[string]string) reply {
		t.Helper()
		return call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": code, "files": files, "timeout_ms": 10000}))
	}
	if r := cell("1+1", nil); r.body["result"] != "2" {
		t.Fatalf("1+1: %s", r.raw)
	}
	if r := cell("x = 1", nil); r.status != 200 || r.body["result"] != nil {
		t.Fatalf("statement: %s", r.raw)
	}
	if r := cell("print('a')\nprint('b')\nx + 41", nil); r.body["result"] != "42" || r.body["stdout"] != "a\nb\n" {
		t.Fatalf("after prints: %s", r.raw)
	}
	r = cell("import os\ndata = open('in/a.txt').read()\nopen('out.txt', 'w').write(data.upper())\nos.symlink('/etc', 'etc')\ndata", map[string]string{"in/a.txt": "aGk="})
	if r.body["status"] != "success" || r.body["result"] != "'hi'" || mustJSON(r.body["files_produced"]) != `{"out.txt":"SEk="}` {
		t.Fatalf("files: %s", r.raw)
	}
	if r := cell("print('ran')", map[string]string{"etc/passwd": "eA=="}); r.status != 400 || !strings.Contains(r.errMsg(), "symlink") {
		t.Fatalf("through a symlink: %d %s", r.status, r.raw)
	}
	if r := cell("len(os.listdir('/etc'))", nil); r.status != 200 || r.body["status"] != "success" {
		t.Fatalf("the session after a refused upload: %s", r.raw)
	}
}

// With WarmSessions, a session without a context is one the server opened
// ahead of demand: its interpreter is older than the request that took it
// (the positive control is the first, cold one, opened by its request). A
// warm session is handed out once: nothing of an earlier client's is in it.
func TestWarmSessions(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), WarmSessions: 1})
	// The interpreter's age in seconds, from /proc (valid in a pid namespace too).
	const age = "import os\nt = float(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK')\nprint(round(float(open('/proc/uptime').read().split()[0]) - t, 2))"
	open := func() (string, float64) {
		t.Helper()
		r := call(t, "POST", url+"/sessions", `{}`)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		id := r.body["id"].(string)
		r = call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": age, "timeout_ms": 30000}))
		a, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(r.body["stdout"])), 64)
		if err != nil {
			t.Fatalf("age: %s", r.raw)
		}
		return id, a
	}
	first, cold := open()
	if r := call(t, "POST", url+"/sessions/"+first+"/execute", `{"code": "secret = 42"}`); r.body["status"] != "success" {
		t.Fatalf("cell: %s", r.raw)
	}
	// Wait for the pool to hold one, then let it age.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h := call(t, "GET", url+"/health", "")
		if w, _ := h.body["warm_sessions"].(map[string]any); w != nil && w["python"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warm session after 2 minutes: %s", h.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	second, warm := open()
	if warm < 1.4 || warm <= cold {
		t.Fatalf("the second session's interpreter is %.2f s old (the cold one's %.2f s): not the warm one", warm, cold)
	}
	if r := call(t, "POST", url+"/sessions/"+second+"/execute", `{"code": "print('secret' in globals())"}`); r.body["stdout"] != "False\n" {
		t.Fatalf("a warm session saw another client's state: %s", r.raw)
	}
}
