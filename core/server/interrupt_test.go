package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// POST /sessions/{id}/interrupt stops a python cell that loops forever:
// the cell's own call answers with what it printed so far and
// ended_by cancelled, and the session goes on with its variables.
func TestInterruptSessionCell(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), MaxTimeout: 5 * time.Minute})
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
		replies <- cell("import time\ni = 0\nwhile True:\n    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.01)")
	}()
	var ir reply
	waitFor(t, "an interrupt to find the cell running", func() bool {
		ir = call(t, "POST", url+"/sessions/"+id+"/interrupt", "")
		return ir.status != 200 || ir.body["interrupted"] == true
	})
	if ir.status != 200 || ir.body["id"] != id {
		t.Fatalf("interrupt: %d %s", ir.status, ir.raw)
	}
	got := <-replies
	if got.status != 200 || got.body["status"] != "cancelled" || got.body["ended_by"] != "cancelled" ||
		!strings.HasPrefix(got.body["stdout"].(string), "tick 0\n") || got.body["state_lost"] == true ||
		!strings.Contains(got.body["error"].(string), "KeyboardInterrupt") {
		t.Fatalf("the interrupted cell: %d %s", got.status, got.raw)
	}
	if r := cell("x + 1"); r.body["status"] != "success" || r.body["result"] != "42" {
		t.Fatalf("after the interrupt, x is gone: %s", r.raw)
	}
	if r := call(t, "POST", url+"/sessions/nope/interrupt", ""); r.status != 404 || r.errCode() != "session_not_found" {
		t.Errorf("interrupt of an unknown session: %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", url+"/sessions/"+id+"/interrupt", ""); r.status != 405 {
		t.Errorf("GET interrupt: %d %s", r.status, r.raw)
	}
}
