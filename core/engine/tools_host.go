package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// EventToolCall is a trace event: one call of a host-side tool. Kind is
// the tool's name, Prompt its arguments (JSON), Answer what it returned
// (JSON text) or Error why it failed.
const EventToolCall = "tool_call"

// toolCall is the tool_call bridge of a loop: call is {"name", "args"}
// from the cell's stub. Its errors reach the cell as ToolError.
func (n *node) toolCall(_ context.Context, call string) (string, error) {
	var req struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(call), &req); err != nil {
		return "", fmt.Errorf("tool_call: malformed request: %v", err)
	}
	t := n.r.o.Tools.host(req.Name)
	if t == nil {
		return "", fmt.Errorf("tool_call: there is no host tool named %q", req.Name)
	}
	args := req.Args
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	ev := Event{Type: EventToolCall, Kind: t.Name, Prompt: string(args)}
	if err := n.r.tools.reserve(t); err != nil {
		ev.Error = err.Error()
		n.emit(ev)
		return "", err
	}
	start := time.Now()
	out, err := n.runTool(t, args)
	ev.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		ev.Error = err.Error()
	} else {
		ev.Answer = Truncate(out, DefaultMaxOutputChars)
	}
	n.emit(ev)
	return out, err
}

// runTool makes one call within the tool's timeout and turns its answer
// into JSON text: the answer itself when it is JSON, else a JSON string.
func (n *node) runTool(t *HostTool, args []byte) (string, error) {
	ctx, cancel := context.WithTimeout(n.ctx, t.Timeout)
	defer cancel()
	var (
		out []byte
		err error
	)
	switch {
	case t.Func != nil:
		out, err = t.Func(ctx, args)
	case t.URL != "":
		out, err = postTool(ctx, t, args)
	default:
		out, err = commandTool(ctx, t, args)
	}
	if err != nil {
		switch {
		case n.ctx.Err() != nil:
			return "", fmt.Errorf("tool %s: the run was stopped", t.Name)
		case ctx.Err() != nil:
			return "", fmt.Errorf("tool %s timed out after %s (its timeout in the task file's [[tool]]): ask it for less, or the operator for a longer timeout", t.Name, t.Timeout)
		}
		return "", err
	}
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) > 0 && json.Valid(trimmed) {
		return string(trimmed), nil
	}
	s, _ := json.Marshal(strings.TrimRight(string(out), "\r\n"))
	return string(s), nil
}

// limited collects at most MaxToolOutput bytes and remembers whether
// there were more.
type limited struct {
	buf  bytes.Buffer
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if room := MaxToolOutput - l.buf.Len(); len(p) > room {
		l.buf.Write(p[:max(room, 0)])
		l.over = true
		return len(p), nil
	}
	return l.buf.Write(p)
}

// commandTool runs t's command with args on stdin.
func commandTool(ctx context.Context, t *HostTool, args []byte) ([]byte, error) {
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	cmd.Dir = t.Dir
	cmd.Stdin = bytes.NewReader(args)
	var stdout, stderr limited
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The command and whatever it starts are one process group, killed
	// whole at the timeout (and when rlm dies), so no child outlives the
	// call or keeps its output open; WaitDelay bounds the wait where there
	// are no groups.
	proctree.Configure(cmd)
	cmd.Cancel = func() error {
		proctree.KillGroup(cmd.Process.Pid)
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return nil, fmt.Errorf("tool %s: its command exited with status %d%s", t.Name, exit.ExitCode(), said(stderr.buf.String()))
	case err != nil:
		return nil, fmt.Errorf("tool %s: cannot run its command %q: %v (fix command in the task file's [[tool]])", t.Name, t.Command[0], err)
	case stdout.over:
		return nil, fmt.Errorf("tool %s: its command printed more than %d bytes: make it answer less", t.Name, MaxToolOutput)
	}
	return stdout.buf.Bytes(), nil
}

// postTool POSTs args to t's URL.
func postTool(ctx context.Context, t *HostTool, args []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("tool %s: url %q: %v", t.Name, t.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("tool %s: POST %s failed: %v", t.Name, t.URL, err)
	}
	defer resp.Body.Close()
	var body limited
	if _, err := io.Copy(&body, resp.Body); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("tool %s: reading the answer of %s: %v", t.Name, t.URL, err)
	}
	switch {
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("tool %s: POST %s answered %s%s", t.Name, t.URL, resp.Status, said(body.buf.String()))
	case body.over:
		return nil, fmt.Errorf("tool %s: %s answered more than %d bytes: make it answer less", t.Name, t.URL, MaxToolOutput)
	}
	return body.buf.Bytes(), nil
}

// said renders the tail of what a failed tool wrote.
func said(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	const keep = 2000
	if r := []rune(s); len(r) > keep {
		s = "…" + string(r[len(r)-keep:])
	}
	return ": " + s
}

// toolBridge is the session's tool_call bridge: nil without host tools,
// so a call says the session has none.
func (n *node) toolBridge() func(context.Context, string) (string, error) {
	if len(n.r.o.Tools.Host) == 0 {
		return nil
	}
	return n.toolCall
}
