package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/server"
)

// POST /sessions/{id}/interrupt stops a python cell that loops forever:
// the cell's own call answers with what it printed so far and
// ended_by cancelled, and the session goes on with its variables.
func TestInterruptSessionCell(t *testing.T) {
	// At isolation process, so that the cell can say it has printed by
	// creating a file here.
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxTimeout: 5 * time.Minute,
		Limits: core.Limits{Isolation: "process"}})
	printed := filepath.Join(t.TempDir(), "printed")
	r := call(t, "POST", url+"/sessions", `{}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	cell := func(code string) reply {
		return call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": code, "timeout_seconds": 120}))
	}
	if r := cell("x = 41"); r.body["status"] != "success" {
		t.Fatalf("x = 41: %s", r.raw)
	}
	// Idle: nothing to interrupt, and that is not an error.
	if r := call(t, "POST", url+"/sessions/"+id+"/interrupt", ""); r.status != 200 || r.body["interrupted"] != false {
		t.Fatalf("interrupt while idle: %d %s", r.status, r.raw)
	}
	replies := make(chan reply, 1)
	go func() {
		replies <- cell(fmt.Sprintf("import time\ni = 0\nwhile True:\n    print('tick', i, flush=True)\n    i += 1\n    open(%q, 'w').close()\n    time.sleep(0.01)", printed))
	}()
	waitFor(t, "the cell to print", func() bool {
		_, err := os.Stat(printed)
		return err == nil
	})
	ir := call(t, "POST", url+"/sessions/"+id+"/interrupt", "")
	if ir.status != 200 || ir.body["id"] != id || ir.body["interrupted"] != true {
		t.Fatalf("interrupt: %d %s", ir.status, ir.raw)
	}
	got := <-replies
	if got.status != 200 || got.body["status"] != "cancelled" || got.body["ended_by"] != "cancelled" ||
		!strings.HasPrefix(got.body["stdout"].(string), "tick 0\n") || got.body["state_lost"] == true ||
		!strings.Contains(got.body["error"].(string), "KeyboardInterrupt") {
		t.Fatalf("the interrupted cell: %d %s", got.status, got.raw)
	}
	if r := cell("x + 1, i > 0"); r.body["status"] != "success" || r.body["result"] != "(42, True)" {
		t.Fatalf("after the interrupt, x is gone: %s", r.raw)
	}
	if r := call(t, "POST", url+"/sessions/nope/interrupt", ""); r.status != 404 || r.errCode() != "session_not_found" {
		t.Errorf("interrupt of an unknown session: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", url+"/sessions/"+id+"/interrupt", ""); r.status != 405 {
		t.Errorf("GET interrupt: %d %s", r.status, r.raw)
	}
}

// A cell that swallows KeyboardInterrupt (as one stuck in C code ignores
// it) is killed after the runtime's grace and its interpreter restarted:
// the interrupt still ends it, its answer says state_lost, and the session
// id stays valid, with its variables gone.
func TestInterruptStubbornCell(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxTimeout: 5 * time.Minute,
		Limits: core.Limits{Isolation: "process"}})
	id := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	cell := func(code string) reply {
		return call(t, "POST", url+"/sessions/"+id+"/execute", mustJSON(map[string]any{"code": code, "timeout_seconds": 120}))
	}
	if r := cell("x = 41"); r.body["status"] != "success" {
		t.Fatalf("x = 41: %s", r.raw)
	}
	started := filepath.Join(t.TempDir(), "started")
	replies := make(chan reply, 1)
	go func() {
		replies <- cell(fmt.Sprintf("import time\nopen(%q, 'w').close()\nwhile True:\n    try:\n        time.sleep(0.01)\n    except KeyboardInterrupt:\n        print('ignored', flush=True)", started))
	}()
	waitFor(t, "the cell to start", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if r := call(t, "POST", url+"/sessions/"+id+"/interrupt", ""); r.status != 200 || r.body["interrupted"] != true {
		t.Fatalf("interrupt: %d %s", r.status, r.raw)
	}
	got := <-replies
	if got.status != 200 || got.body["ended_by"] != "cancelled" || got.body["state_lost"] != true ||
		!strings.Contains(got.body["stdout"].(string), "ignored") || !strings.Contains(got.body["error"].(string), "session state lost") {
		t.Fatalf("the stubborn cell: %d %s", got.status, got.raw)
	}
	if r := cell("'x' in globals()"); r.body["status"] != "success" || r.body["result"] != "False" {
		t.Fatalf("after the restart: %s", r.raw)
	}
}
