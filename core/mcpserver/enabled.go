package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/server"
)

// The tools' language argument and the server's instructions name the
// runtimes this server has enabled (server.Server.Modes), not a fixed
// list: an agent told "shell" that gets "not enabled" wastes a turn.

// instructions is the server's Instructions for the enabled modes, of
// which sessions offer REPL sessions: those it names for session_open, or
// says there are none, rather than promising Python to a server without it.
func instructions(modes, sessions []string) string {
	s := fmt.Sprintf("rlm runs code in sandboxes. Use run_code for a self-contained program in one of the runtimes this server has enabled: %s (default %s); ", strings.Join(modes, ", "), modes[0])
	if len(sessions) > 0 {
		s += fmt.Sprintf("use session_open, then session_run repeatedly, to keep state between calls (sessions: %s), and session_close when done. ", strings.Join(sessions, ", "))
	} else {
		s += "no runtime of this server offers sessions (session_open is refused). "
	}
	return s + "list_runtimes says which runtimes this server has and how they are isolated."
}

// sessionModes are the enabled runtimes whose plugin declares sessions
// (capability repl), default first.
func sessionModes(srv *server.Server) []string {
	var out []string
	for _, r := range srv.Runtimes(context.Background()) {
		if slices.Contains(r.Capabilities, "repl") {
			out = append(out, r.Name)
		}
	}
	return out
}

// inputSchema is T's inferred input schema with the description of its
// language property naming the enabled modes and the default.
func inputSchema[T any](modes []string, what string) (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	if p := s.Properties["language"]; p != nil {
		p.Description = fmt.Sprintf("%s: one of %s (see list_runtimes); %s when omitted", what, strings.Join(modes, ", "), modes[0])
	}
	return s, nil
}

// withLanguages sets t's InputSchema from T (inputSchema); it panics on a
// type the SDK could not infer a schema for either, as mcp.AddTool does.
func withLanguages[T any](t *mcp.Tool, modes []string, what string) *mcp.Tool {
	s, err := inputSchema[T](modes, what)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %s: %v", t.Name, err))
	}
	t.InputSchema = s
	return t
}
