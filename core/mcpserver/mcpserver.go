// Package mcpserver exposes an rlm server (core/server) as Model Context
// Protocol tools, so any MCP client (Claude Code, Claude Desktop, Cursor,
// an agent framework) can run code in rlm's sandboxes: `rlm mcp` serves
// them on stdio and `rlm serve` at /mcp over streamable HTTP.
//
// The tools are thin: each calls the same server.Server method as the
// matching HTTP endpoint (Execute for POST /execute, OpenSession, RunCell,
// Variable and CloseSession for /sessions), so run slots, the queue,
// limits, session expiry and metrics are one set whichever door a request
// came in by.
//
// # Notes
//
//   - The MCP revision of 2026-07-28 is stateless and forbids a server to
//     send requests to its client, so sandboxed code cannot call the model
//     back through MCP. Sessions are therefore explicit (session_open
//     returns an id the model passes back), and llm_query in a session is
//     answered only when the server was given an LLM (server.Config.Bridges or
//     SessionBridges: `rlm mcp --provider ...`);
//     otherwise the call raises an error that says none is configured.
//   - A program that fails, is killed or times out is a tool result with
//     isError set, never a protocol error: the model reads what happened and
//     can fix its code. Requests the server refuses (unknown language or
//     session, bad base64, every slot busy) are tool errors too, with the
//     server's message, which names the argument and the fix.
//   - structuredContent of run_code and session_run is /execute's response
//     object (server.ExecuteResponse); the text content is the same result
//     written for a reader.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/version"
)

// Options configure the MCP server.
type Options struct {
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives the SDK's own log lines (default: discard). `rlm mcp`
	// points it at stderr: stdout carries the protocol.
	Logger *slog.Logger
}

// RunCodeInput are run_code's arguments.
type RunCodeInput struct {
	Language       string            `json:"language,omitempty" jsonschema:"the runtime (see list_runtimes); the server's default runtime when omitted"`
	Code           string            `json:"code" jsonschema:"the whole program, run as a file (main.py, main.go with package main, main.js, main.sh)"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text given to the program on standard input"`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit in seconds (default: the server's, usually 30); the program and its children are killed when it passes"`
	Files          map[string]string `json:"files,omitempty" jsonschema:"input files placed in the working directory before the run: relative path to base64 content"`
}

// SessionOpenInput are session_open's arguments.
type SessionOpenInput struct {
	Language string `json:"language,omitempty" jsonschema:"the runtime of the session (a runtime whose capabilities include repl, e.g. python); the server's default runtime when omitted"`
	Context  string `json:"context,omitempty" jsonschema:"text made available to the session's code as the variable context"`
	// Env is POST /sessions' env, under the same rules.
	Env map[string]string `json:"env,omitempty" jsonschema:"environment variables the session's interpreter sees (os.environ); names are letters, digits and _"`
	// Model is POST /sessions' model.
	Model string `json:"model,omitempty" jsonschema:"the model answering llm_query in the session, among those the server allows (default: the server's)"`
}

// SessionOpened is session_open's result.
type SessionOpened struct {
	SessionID          string  `json:"session_id" jsonschema:"pass it to session_run, session_get_variable and session_close"`
	Language           string  `json:"language"`
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds" jsonschema:"the session is closed after this long without a call"`
}

// SessionRunInput are session_run's arguments.
type SessionRunInput struct {
	SessionID      string            `json:"session_id" jsonschema:"the id session_open returned"`
	Code           string            `json:"code" jsonschema:"code to run in the session; variables, imports and functions from earlier calls are still defined"`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit of this call in seconds (default: the server's)"`
	Files          map[string]string `json:"files,omitempty" jsonschema:"files written into the session's working directory before the code runs, replacing files of the same name: relative path to base64 content"`
}

// SessionVariableInput are session_get_variable's arguments.
type SessionVariableInput struct {
	SessionID string `json:"session_id" jsonschema:"the id session_open returned"`
	Name      string `json:"name" jsonschema:"the variable's name"`
}

// SessionVariable is session_get_variable's result.
type SessionVariable struct {
	Name  string `json:"name"`
	Value any    `json:"value" jsonschema:"the variable's value as JSON (its repr when it is not JSON-serializable)"`
}

// SessionCloseInput are session_close's arguments.
type SessionCloseInput struct {
	SessionID string `json:"session_id" jsonschema:"the id session_open returned"`
}

// SessionClosed is session_close's result.
type SessionClosed struct {
	SessionID string `json:"session_id"`
	Closed    bool   `json:"closed"`
}

// Runtimes is list_runtimes' result.
type Runtimes struct {
	Runtimes []server.RuntimeInfo `json:"runtimes"`
}

// New returns an MCP server whose tools run code on srv. It can serve any
// number of connections (stdio, or one per HTTP request).
func New(srv *server.Server, o Options) *mcp.Server {
	if o.Version == "" {
		o.Version = version.String()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: "rlm", Title: "rlm code sandbox", Version: o.Version}, &mcp.ServerOptions{
		Logger:       o.Logger,
		Instructions: instructions(srv.Modes(), sessionModes(srv)) + runInstructions(srv),
	})
	t := &tools{srv: srv}
	yes := true
	mcp.AddTool(ms, withLanguages[RunCodeInput](&mcp.Tool{
		Name: "run_code",
		Description: "Run a program in a fresh sandbox and return its stdout, stderr and how it ended (exit code, signal or timeout). " +
			"Each call starts from nothing: nothing is kept between calls (use session_open for that). " +
			"Files the program writes under its working directory ($OUTPUT_DIR) come back base64-encoded in files_produced. " +
			"A failing program is reported with isError and its output, so you can fix the code and call again.",
		Annotations: &mcp.ToolAnnotations{Title: "Run code", OpenWorldHint: &yes},
	}, srv.Modes(), "the runtime"), t.runCode)
	mcp.AddTool(ms, &mcp.Tool{
		Name:        "list_runtimes",
		Description: "List the runtimes this server can run (the values of language), which is the default, their versions, whether they support sessions (capability repl) and the sandbox isolation level programs and sessions actually run under on this host (none, process, namespace, wasm).",
		Annotations: &mcp.ToolAnnotations{Title: "List runtimes", ReadOnlyHint: true},
	}, t.listRuntimes)
	mcp.AddTool(ms, withLanguages[SessionOpenInput](&mcp.Tool{
		Name: "session_open",
		Description: "Open a stateful REPL session and return its session_id. Code run with session_run keeps its variables, imports and functions between calls. " +
			"An optional context string is available to the code as the variable context. Sessions unused for idle_timeout_seconds are closed; close it with session_close when done.",
		Annotations: &mcp.ToolAnnotations{Title: "Open a session", OpenWorldHint: &yes},
	}, srv.Modes(), "the runtime of the session (one whose capabilities include repl)"), t.sessionOpen)
	mcp.AddTool(ms, &mcp.Tool{
		Name: "session_run",
		Description: "Run code in an open session; state from earlier calls is kept. Returns stdout, stderr and errors (a raised exception is reported with isError), " +
			"and in result the repr of the code's final expression, as a notebook shows it (null when the code ends in a statement). " +
			"files are written into the session's working directory first; files the code creates or changes there come back base64-encoded in files_produced. " +
			"If the result says state_lost, the session was restarted after a timeout and its variables are gone.",
		Annotations: &mcp.ToolAnnotations{Title: "Run code in a session", OpenWorldHint: &yes},
	}, t.sessionRun)
	addSandboxTools(ms, t)
	mcp.AddTool(ms, &mcp.Tool{
		Name:        "session_get_variable",
		Description: "Read a variable of an open session as JSON, without printing it.",
		Annotations: &mcp.ToolAnnotations{Title: "Read a session variable", ReadOnlyHint: true},
	}, t.sessionGetVariable)
	mcp.AddTool(ms, &mcp.Tool{
		Name:        "session_close",
		Description: "Close a session and free its interpreter. Its session_id is refused afterwards.",
		Annotations: &mcp.ToolAnnotations{Title: "Close a session", IdempotentHint: false},
	}, t.sessionClose)
	if srv.RunsEnabled() {
		addRunTool(ms, t)
	}
	return ms
}

// HTTPHandler serves New's tools over streamable HTTP, stateless: every
// POST is a whole exchange, so no MCP session state lives in the server
// and any replica can answer. Mount it with srv.Handle("/mcp", ...) so it
// sits behind the server's token, body limit, log and metrics. A body that
// is not UTF-8 is answered 400 with a JSON-RPC parse error (see utf8Only).
func HTTPHandler(srv *server.Server, o Options) http.Handler {
	ms := New(srv, o)
	return utf8Only(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// One JSON body per call, as /execute answers: no tool streams.
		JSONResponse: true,
		Logger:       o.Logger,
		// The server's mount already bounds the body (its --body-limit).
		MaxRequestBodyBytes: srv.BodyLimit(),
		// A client that hangs up cancels its run, as on /execute.
		PropagateRequestCancellation: true,
	}))
}

type tools struct{ srv *server.Server }

func (t *tools) runCode(ctx context.Context, _ *mcp.CallToolRequest, in RunCodeInput) (*mcp.CallToolResult, *server.ExecuteResponse, error) {
	if err := positive("timeout_seconds", in.TimeoutSeconds); err != nil {
		return nil, nil, err
	}
	code := in.Code
	resp, err := t.srv.Execute(ctx, &server.ExecuteRequest{
		Code: &code, Language: in.Language, Stdin: in.Stdin, TimeoutSeconds: in.TimeoutSeconds, Files: in.Files,
	})
	if err != nil {
		return nil, nil, err
	}
	return result(resp), resp, nil
}

func (t *tools) listRuntimes(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Runtimes, error) {
	rts := t.srv.Runtimes(ctx)
	var b strings.Builder
	for _, r := range rts {
		fmt.Fprintf(&b, "%s", r.Name)
		if r.Default {
			b.WriteString(" (default)")
		}
		if r.Available {
			fmt.Fprintf(&b, ": %s, programs %s, sessions %s, capabilities %s\n", r.RuntimeVersion,
				level(r.Isolation, r.IsolationError), level(r.SessionIsolation, r.SessionIsolationError), strings.Join(r.Capabilities, " "))
		} else {
			fmt.Fprintf(&b, ": unavailable: %s\n", r.Error)
		}
	}
	return text(b.String()), Runtimes{Runtimes: rts}, nil
}

func (t *tools) sessionOpen(ctx context.Context, _ *mcp.CallToolRequest, in SessionOpenInput) (*mcp.CallToolResult, *SessionOpened, error) {
	req := &server.SessionRequest{Language: in.Language, Env: in.Env, Model: in.Model}
	if in.Context != "" {
		b, _ := json.Marshal(in.Context) // a JSON string: given to the code as text
		req.Context = b
	}
	c, err := t.srv.OpenSession(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	out := &SessionOpened{SessionID: c.ID, Language: c.Language, IdleTimeoutSeconds: c.IdleTimeoutSeconds}
	return text(fmt.Sprintf("session %s opened (%s); it closes after %gs unused", c.ID, c.Language, c.IdleTimeoutSeconds)), out, nil
}

func (t *tools) sessionRun(ctx context.Context, _ *mcp.CallToolRequest, in SessionRunInput) (*mcp.CallToolResult, *server.ExecuteResponse, error) {
	if err := positive("timeout_seconds", in.TimeoutSeconds); err != nil {
		return nil, nil, err
	}
	if in.SessionID == "" {
		return nil, nil, fmt.Errorf("session_id is empty: pass the id session_open returned")
	}
	code := in.Code
	req := &server.CellRequest{Code: &code, Files: in.Files}
	if in.TimeoutSeconds != nil {
		ms := int64(math.Ceil(*in.TimeoutSeconds * 1000))
		req.TimeoutMs = &ms
	}
	resp, err := t.srv.RunCell(ctx, in.SessionID, req)
	if err != nil {
		return nil, nil, err
	}
	return result(resp), resp, nil
}

func (t *tools) sessionGetVariable(ctx context.Context, _ *mcp.CallToolRequest, in SessionVariableInput) (*mcp.CallToolResult, *SessionVariable, error) {
	if in.SessionID == "" {
		return nil, nil, fmt.Errorf("session_id is empty: pass the id session_open returned")
	}
	v, err := t.srv.Variable(ctx, in.SessionID, in.Name)
	if err != nil {
		return nil, nil, err
	}
	var value any
	if err := json.Unmarshal(v.Value, &value); err != nil {
		value = string(v.Value)
	}
	return text(fmt.Sprintf("%s = %s", in.Name, v.Value)), &SessionVariable{Name: in.Name, Value: value}, nil
}

func (t *tools) sessionClose(_ context.Context, _ *mcp.CallToolRequest, in SessionCloseInput) (*mcp.CallToolResult, *SessionClosed, error) {
	if in.SessionID == "" {
		return nil, nil, fmt.Errorf("session_id is empty: pass the id session_open returned")
	}
	if err := t.srv.CloseSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	return text("session " + in.SessionID + " closed"), &SessionClosed{SessionID: in.SessionID, Closed: true}, nil
}

// level says how list_runtimes' runs are isolated: the level enforced, or
// why none can be, or that there are none (a runtime without sessions).
func level(l, refused string) string {
	switch {
	case l != "":
		return "at isolation " + l
	case refused != "":
		return "refused: " + refused
	}
	return "not offered"
}

// positive refuses a zero or negative timeout, naming the MCP argument
// (the server's own message would name its HTTP field).
func positive(name string, v *float64) error {
	if v != nil && (*v <= 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
		return fmt.Errorf("%s must be a positive number of seconds, got %v: omit it for the server's default", name, *v)
	}
	return nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// result writes a run's result for a reader and marks anything but
// success as a tool error.
func result(r *server.ExecuteResponse) *mcp.CallToolResult {
	res := text(Summary(r))
	res.IsError = r.Status != server.StatusSuccess
	return res
}

// Summary is a run's result as text: how it ended first, then the output.
func Summary(r *server.ExecuteResponse) string {
	var b strings.Builder
	switch {
	case r.TimedOut || r.Status == server.StatusTimeout:
		// The hint (which request field raises it) comes with the
		// result's error, worded by the server once for every door.
		fmt.Fprintf(&b, "%s: the program was killed", ending.Timeout.Message(int64(time.Duration(r.ExecutionTimeMs)*time.Millisecond)))
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by %s (exit code %d) after %d ms", r.Signal, r.ExitCode, r.ExecutionTimeMs)
	default:
		fmt.Fprintf(&b, "exit code %d after %d ms", r.ExitCode, r.ExecutionTimeMs)
	}
	fmt.Fprintf(&b, " [status %s, ended by %s, %s", r.Status, r.EndedBy, r.Language)
	if r.Isolation != "" {
		fmt.Fprintf(&b, ", isolation %s", r.Isolation)
	}
	b.WriteString("]\n")
	if r.StateLost {
		b.WriteString("state lost: the session was restarted and its variables are gone\n")
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", strings.TrimRight(r.Error, "\n"))
	}
	section := func(name, s string, omitted int64) {
		if s == "" && omitted == 0 {
			return
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", name, s)
		if s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
		if omitted > 0 {
			fmt.Fprintf(&b, "(%d bytes omitted from the middle)\n", omitted)
		}
	}
	section("stdout", r.Stdout, r.StdoutOmitted)
	section("stderr", r.Stderr, r.StderrOmitted)
	if r.Repr != nil {
		section("result", *r.Repr, 0)
	}
	if len(r.FilesProduced) > 0 {
		names := make([]string, 0, len(r.FilesProduced))
		for n := range r.FilesProduced {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "files produced (base64 in files_produced): %s\n", strings.Join(names, ", "))
	}
	if r.FilesOmitted {
		b.WriteString("some produced files were left out (over the count or size limit)\n")
	}
	return b.String()
}
