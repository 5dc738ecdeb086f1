package server_test

import (
	"strings"
	"testing"
)

// TestSessionListAndCellTimeoutSeconds: GET /sessions lists the open
// sessions, and a cell takes timeout_seconds as /execute does (validated
// the same way).
func TestSessionListAndCellTimeoutSeconds(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	url, _ := start(t, fakeConfig(t, f))
	sessions := func() []any {
		t.Helper()
		r := call(t, "GET", url+"/sessions", "")
		list, ok := r.body["sessions"].([]any)
		if r.status != 200 || !ok {
			t.Fatalf("GET /sessions: %d %s", r.status, r.raw)
		}
		return list
	}
	if n := len(sessions()); n != 0 {
		t.Fatalf("%d sessions before any was opened", n)
	}
	sid := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	list := sessions()
	if len(list) != 1 || list[0].(map[string]any)["id"] != sid || list[0].(map[string]any)["language"] == "" {
		t.Fatalf("GET /sessions after opening %s: %v", sid, list)
	}

	r := call(t, "POST", url+"/sessions/"+sid+"/execute", `{"code": "echo hi", "timeout_seconds": 5}`)
	if r.status != 200 {
		t.Fatalf("cell with timeout_seconds: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions/"+sid+"/execute", `{"code": "echo hi", "timeout_seconds": -1}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), "timeout_seconds") {
		t.Fatalf("negative timeout_seconds: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions/"+sid+"/execute", `{"code": "echo hi", "timeout_seconds": 1, "timeout_ms": 1000}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), "not both") {
		t.Fatalf("both timeouts: %d %s", r.status, r.raw)
	}

	call(t, "DELETE", url+"/sessions/"+sid, "")
	if n := len(sessions()); n != 0 {
		t.Fatalf("%d sessions after the only one was deleted", n)
	}
}
