package server_test

import (
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/server"
)

// POST /sessions takes env as /execute does: the interpreter sees it (also
// with warm sessions on, which hold interpreters started without it), and
// a name the sandbox's shell would drop is refused with 400 naming it.
func TestSessionEnv(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), WarmSessions: 1})
	r := call(t, "POST", url+"/sessions", `{"env": {"GREETING": "hello there", "EMPTY": ""}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	r = call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "import os\nos.environ['GREETING'], os.environ['EMPTY']"}`)
	if r.body["status"] != "success" || r.body["result"] != "('hello there', '')" {
		t.Fatalf("the session's environment: %s", r.raw)
	}
	// a session without env does not see another's
	id2 := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	if r := call(t, "POST", url+"/sessions/"+id2+"/execute", `{"code": "import os\n'GREETING' in os.environ"}`); r.body["result"] != "False" {
		t.Fatalf("a session without env: %s", r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"env": {"BAD-NAME": "x"}}`)
	if r.status != 400 || r.errCode() != "bad_field" || !strings.Contains(r.errMsg(), `env["BAD-NAME"]`) || !strings.Contains(r.errMsg(), "not valid") {
		t.Fatalf("a bad env name: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"env": {"OK": "a\u0000b"}}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), `env["OK"]`) || !strings.Contains(r.errMsg(), "NUL") {
		t.Fatalf("a NUL in a value: %d %s", r.status, r.raw)
	}
}
