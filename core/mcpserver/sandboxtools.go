package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/sandbox"
	"github.com/rlmkit/rlm/core/server"
)

// SessionCommandInput are session_command's arguments.
type SessionCommandInput struct {
	SessionID      string            `json:"session_id" jsonschema:"the id session_open returned (a python session)"`
	Command        string            `json:"command" jsonschema:"a shell command line, run by /bin/sh -c inside the session's sandbox, in its working directory"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"a directory relative to the session's working directory to run in (default: the working directory)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables added for this command"`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"the command is killed when this passes (default: the server's timeout)"`
}

// addSandboxTools adds session_command: POST /sessions/{id}/commands as a
// tool, so an agent runs shell commands beside its session's cells, on
// the same files, inside the same sandbox (core/sandbox).
func addSandboxTools(ms *mcp.Server, t *tools) {
	yes := true
	mcp.AddTool(ms, &mcp.Tool{
		Name: "session_command",
		Description: "Run a shell command inside an open python session's sandbox, in the session's working directory: it sees the files the session's code wrote, and its code sees the files the command writes. " +
			"Returns stdout, stderr and the exit code (a non-zero exit is reported with isError). Use it for pip-free tooling the sandbox has (ls, grep, sort, sqlite3, ...).",
		Annotations: &mcp.ToolAnnotations{Title: "Run a command in a session", OpenWorldHint: &yes},
	}, t.sessionCommand)
}

func (t *tools) sessionCommand(ctx context.Context, _ *mcp.CallToolRequest, in SessionCommandInput) (*mcp.CallToolResult, *server.CommandResult, error) {
	if err := positive("timeout_seconds", in.TimeoutSeconds); err != nil {
		return nil, nil, err
	}
	if in.SessionID == "" {
		return nil, nil, fmt.Errorf("session_id is empty: pass the id session_open returned")
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, fmt.Errorf("command is empty: give a shell command line such as \"ls -la\"")
	}
	timeout := t.srv.DefaultTimeout()
	if in.TimeoutSeconds != nil {
		timeout = min(time.Duration(*in.TimeoutSeconds*float64(time.Second)), t.srv.MaxTimeout())
	}
	box, done, err := t.srv.Sandbox(in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	pid, err := box.Start(ctx, sandbox.Command{Cmd: "/bin/sh", Args: []string{"-c", in.Command}, Cwd: in.Cwd, Env: in.Env})
	if err != nil {
		return nil, nil, err
	}
	res, err := server.RunCommand(ctx, box, pid, timeout, nil)
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "killed after its timeout of %s\n", timeout)
	case res.Signal != "":
		fmt.Fprintf(&b, "ended by signal: %s\n", res.Signal)
	default:
		fmt.Fprintf(&b, "exit code %d\n", *res.ExitCode)
	}
	if res.Stdout != "" {
		b.WriteString("--- stdout ---\n" + res.Stdout)
	}
	if res.Stderr != "" {
		b.WriteString("--- stderr ---\n" + res.Stderr)
	}
	out := text(b.String())
	out.IsError = res.TimedOut || res.Signal != "" || *res.ExitCode != 0
	return out, res, nil
}
