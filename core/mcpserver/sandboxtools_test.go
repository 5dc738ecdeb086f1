package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/server"
)

// session_command runs a shell command in the session's own sandbox: it
// reads what the session's code wrote and the code reads what it writes;
// a non-zero exit is a tool error with the output; bad arguments are
// errors that name them.
func TestSessionCommand(t *testing.T) {
	t.Parallel()
	cs := connect(t, newServer(t, server.Config{}))
	id, _ := callTool(t, cs, "session_open", map[string]any{}).out["session_id"].(string)
	callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "import os\nos.makedirs('d', exist_ok=True)\nopen('d/a.txt', 'w').write('from code\\n')"})
	c := callTool(t, cs, "session_command", map[string]any{"session_id": id, "command": "cat a.txt; echo $GREETING > b.txt", "cwd": "d", "env": map[string]any{"GREETING": "from shell"}})
	if c.res.IsError || c.out["stdout"] != "from code\n" || c.out["exit_code"] != 0.0 || !strings.Contains(c.text, "exit code 0") {
		t.Fatalf("command: %v %q", c.out, c.text)
	}
	if c := callTool(t, cs, "session_run", map[string]any{"session_id": id, "code": "open('d/b.txt').read()"}); c.out["result"] != `'from shell\n'` {
		t.Fatalf("the code reads the command's file: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_command", map[string]any{"session_id": id, "command": "echo oops >&2; exit 5"})
	if !c.res.IsError || c.out["exit_code"] != 5.0 || !strings.Contains(c.text, "exit code 5\n--- stderr ---\noops") {
		t.Fatalf("failing command: %v %q", c.out, c.text)
	}
	c = callTool(t, cs, "session_command", map[string]any{"session_id": id, "command": "sleep 60", "timeout_seconds": 0.3})
	if !c.res.IsError || c.out["timed_out"] != true || !strings.Contains(c.text, "killed after its timeout") {
		t.Fatalf("timeout: %v %q", c.out, c.text)
	}
	for args, want := range map[string]map[string]any{
		"command is empty":    {"session_id": id, "command": " "},
		"session_id is empty": {"session_id": "", "command": "true"},
		"no session":          {"session_id": "nope", "command": "true"},
		"contains '..'":       {"session_id": id, "command": "true", "cwd": "../x"},
		"positive number":     {"session_id": id, "command": "true", "timeout_seconds": -1},
	} {
		if c := callTool(t, cs, "session_command", want); !c.res.IsError || !strings.Contains(c.text, args) {
			t.Errorf("%v: %q, want an error saying %q", want, c.text, args)
		}
	}
}
