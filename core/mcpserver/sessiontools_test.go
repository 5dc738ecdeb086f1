package mcpserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// TestStdioCancelSessionRun: notifications/cancelled for a session_run
// whose cell loops forever interrupts the cell, gets no reply (MCP: the
// receiver of a cancellation does not answer the request), and keeps the
// session: the next call sees a variable set before.
func TestStdioCancelSessionRun(t *testing.T) {
	t.Parallel()
	send, next := stdio(t)
	call := func(id int, tool, args string) {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	}
	call(2, "session_open", `{}`)
	opened := next()
	m := regexp.MustCompile(`"session_id":"([0-9a-f]+)"`).FindStringSubmatch(opened)
	if !strings.Contains(opened, `"id":2,"result"`) || m == nil {
		t.Fatalf("session_open: %s", opened)
	}
	sid := m[1]
	call(3, "session_run", `{"session_id":"`+sid+`","code":"x = 41"}`)
	if got := next(); !strings.Contains(got, `"id":3,"result"`) || !strings.Contains(got, `"status":"success"`) {
		t.Fatalf("x = 41: %s", got)
	}
	// The cell says it runs by creating a file, then loops.
	started := filepath.Join(t.TempDir(), "started")
	loop := fmt.Sprintf("import time\nopen(%q, 'w').close()\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.01)", started)
	call(4, "session_run", `{"session_id":"`+sid+`","code":`+fmt.Sprintf("%q", loop)+`,"timeout_seconds":600}`)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the looping cell did not start within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"test"}}`)
	// Cells run one at a time, so the answer to 5 comes after whatever
	// 4 would have got: the next line must be 5's.
	call(5, "session_run", `{"session_id":"`+sid+`","code":"x + 1"}`)
	got := next()
	if !strings.Contains(got, `"id":5,"result"`) || !strings.Contains(got, `"result":"42"`) {
		t.Fatalf("after the cancel, want the answer to 5 with x + 1 = 42, got: %s", got)
	}
}

// TestSessionOpenEnv: session_open's env reaches the interpreter; a bad
// name is refused with POST /sessions' message.
func TestSessionOpenEnv(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	c := callTool(t, cs, "session_open", map[string]any{"env": map[string]any{"GREETING": "hi"}})
	id, _ := c.out["session_id"].(string)
	if c.res.IsError || id == "" {
		t.Fatalf("session_open: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "import os\nos.environ['GREETING']"})
	if c.res.IsError || c.out["result"] != "'hi'" {
		t.Fatalf("the session's environment: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_open", map[string]any{"env": map[string]any{"A-B": "x"}})
	if !c.res.IsError || !strings.Contains(c.text, `env["A-B"]`) {
		t.Fatalf("a bad name: %q", c.text)
	}
}
