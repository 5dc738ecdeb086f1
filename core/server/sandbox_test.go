package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// A session is a sandbox: commands run inside it (its working directory,
// its environment, exit codes, a background one listed and signalled, a
// timeout that kills), and files written over HTTP, by a cell and by a
// command are the same files.
func TestSessionCommandsAndFiles(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})
	id := call(t, "POST", url+"/sessions", `{"env": {"FROM_SESSION": "yes"}}`).body["id"].(string)
	base := url + "/sessions/" + id
	run := func(body string) reply {
		t.Helper()
		return call(t, "POST", base+"/commands", body)
	}
	r := run(`{"command": "echo out; echo err >&2; echo $FROM_SESSION $EXTRA; exit 7", "env": {"EXTRA": "more"}}`)
	if r.status != 200 || r.body["stdout"] != "out\nyes more\n" || r.body["stderr"] != "err\n" || r.body["exit_code"] != 7.0 {
		t.Fatalf("foreground command: %d %s", r.status, r.raw)
	}
	if r := call(t, "PUT", base+"/files?path=in/a.txt", "from http"); r.status != 200 || r.body["size"] != 9.0 {
		t.Fatalf("PUT file: %d %s", r.status, r.raw)
	}
	if r := run(`{"command": "pwd; cat a.txt; echo by-command > b.txt", "cwd": "in"}`); r.status != 200 || !strings.HasSuffix(r.body["stdout"].(string), "/in\nfrom http") {
		t.Fatalf("cwd, and the file PUT: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", base+"/execute", `{"code": "open('in/b.txt').read()"}`); r.body["result"] != `'by-command\n'` {
		t.Fatalf("a cell reads the command's file: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", base+"/files?path=in", ""); r.status != 200 || !strings.Contains(string(r.raw), `"path":"in/b.txt","type":"file"`) {
		t.Fatalf("GET directory: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", base+"/files?path=in/b.txt", ""); r.status != 200 || string(r.raw) != "by-command\n" {
		t.Fatalf("GET file: %d %s", r.status, r.raw)
	}
	for path, want := range map[string]string{"../x": "contains '..'", "/etc/passwd": "is absolute", "nope": "No such file"} {
		if r := call(t, "GET", base+"/files?path="+path, ""); r.status/100 != 4 || !strings.Contains(r.errMsg(), want) {
			t.Errorf("GET %s: %d %s, want 4xx naming %q", path, r.status, r.raw, want)
		}
	}
	run(`{"command": "ln -s / root-link"}`)
	if r := call(t, "GET", base+"/files?path=root-link/etc/passwd", ""); r.status != 400 || !strings.Contains(r.errMsg(), "leads out of the workspace") {
		t.Fatalf("a symlink out: %d %s", r.status, r.raw)
	}
	if r := call(t, "DELETE", base+"/files?path=in", ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
	if r := run(`{"command": "test -e in || echo gone"}`); r.body["stdout"] != "gone\n" {
		t.Fatalf("after DELETE: %s", r.raw)
	}

	bg := run(`{"command": "sleep 600", "background": true}`)
	if bg.status != 201 {
		t.Fatalf("background: %d %s", bg.status, bg.raw)
	}
	pid := mustJSON(bg.body["pid"])
	if r := call(t, "GET", base+"/commands", ""); !strings.Contains(string(r.raw), `"pid":`+pid) {
		t.Fatalf("list: %s", r.raw)
	}
	if r := call(t, "POST", base+"/commands/"+pid+"/signal", `{"signal": "SIGTERM"}`); r.status != 204 {
		t.Fatalf("signal: %d %s", r.status, r.raw)
	}
	for r := call(t, "GET", base+"/commands", ""); strings.Contains(string(r.raw), `"pid":`+pid); r = call(t, "GET", base+"/commands", "") {
		time.Sleep(20 * time.Millisecond) // until the signal has ended it
	}
	if r := call(t, "POST", base+"/commands/"+pid+"/signal", `{"signal": "bogus"}`); r.status != 400 || !strings.Contains(r.errMsg(), "not a signal") {
		t.Fatalf("bad signal: %d %s", r.status, r.raw)
	}
	if r := run(`{"command": "sleep 600", "timeout_seconds": 0.2}`); r.body["timed_out"] != true || r.body["signal"] != "killed" {
		t.Fatalf("timeout: %d %s", r.status, r.raw)
	}
	if r := run(`{}`); r.status != 400 || !strings.Contains(r.errMsg(), "command") {
		t.Fatalf("no command: %d %s", r.status, r.raw)
	}
	if r := call(t, "POST", url+"/sessions/0123/commands", `{"command": "true"}`); r.status != 404 || r.errCode() != "session_not_found" {
		t.Fatalf("unknown session: %d %s", r.status, r.raw)
	}
}

// Commands keep working after the session's interpreter was restarted
// (its helper went with it and is installed again), and what they started
// before ended with the old interpreter's sandbox.
func TestSessionCommandsAfterRestart(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil)})
	id := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	base := url + "/sessions/" + id
	if r := call(t, "POST", base+"/commands", `{"command": "echo before"}`); r.body["stdout"] != "before\n" {
		t.Fatalf("before: %s", r.raw)
	}
	r := call(t, "POST", base+"/execute", `{"code": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"}`)
	if r.body["state_lost"] != true {
		t.Fatalf("the interpreter should have been restarted: %s", r.raw)
	}
	if r := call(t, "POST", base+"/commands", `{"command": "echo after"}`); r.status != 200 || r.body["stdout"] != "after\n" {
		t.Fatalf("after the restart: %d %s", r.status, r.raw)
	}
}

// A deadline (E2B's timeout) ends a session when it passes, whether used
// or not, and replaces the idle limit: a session with one outlives its
// idle time.
func TestSessionDeadline(t *testing.T) {
	url, s := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), SessionIdle: 100 * time.Millisecond})
	keep := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	if _, err := s.SetDeadline(keep, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	idle := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	// (the list does not count as a use, as a call on the session would)
	for strings.Contains(string(call(t, "GET", url+"/sessions", "").raw), idle) {
		time.Sleep(50 * time.Millisecond) // until the idle one has expired
	}
	if r := call(t, "GET", url+"/sessions/"+keep+"/files", ""); r.status != 200 {
		t.Fatalf("a session with a deadline expired idle: %d %s", r.status, r.raw)
	}
	if _, err := s.SetDeadline(keep, time.Now().Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var r reply
	for r = call(t, "GET", url+"/sessions/"+keep+"/files", ""); r.status == 200; r = call(t, "GET", url+"/sessions/"+keep+"/files", "") {
		time.Sleep(50 * time.Millisecond)
	}
	if r.status != 410 || !strings.Contains(r.errMsg(), "reached its timeout") {
		t.Fatalf("after the deadline: %d %s", r.status, r.raw)
	}
}
