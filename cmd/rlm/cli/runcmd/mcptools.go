package runcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/version"
)

// TaskMCP is a task file's [[mcp]]: an MCP server whose tools become
// host-side tools of the run (engine.HostTool with Func), so REPL code
// calls them as Python functions. The operator chooses the server; it runs
// outside the sandbox, like a [[tool]] command.
//
//	[[mcp]]
//	name = "docs"                       # for messages
//	command = ["docs-mcp-server"]       # stdio; or url = "http://127.0.0.1:9000/mcp"
//	tools = ["search", "fetch"]         # optional: only these (default: all)
//	prefix = "docs_"                    # optional: prepended to each function's name
//	timeout = "30s"                     # per call, and for connecting
//	max_calls = 100                     # per tool, for the whole run
type TaskMCP struct {
	Name     string           `toml:"name"`
	Command  []string         `toml:"command"`
	URL      string           `toml:"url"`
	Tools    []string         `toml:"tools"`
	Prefix   string           `toml:"prefix"`
	Timeout  *config.Duration `toml:"timeout"`
	MaxCalls int              `toml:"max_calls"`
}

// mcpSource is one [[mcp]] with the directory its command runs in.
type mcpSource struct {
	TaskMCP
	dir string
}

func (s *mcpSource) label() string {
	if s.Name != "" {
		return s.Name
	}
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(s.Command, " ")
}

func (s *mcpSource) timeout() time.Duration {
	if s.Timeout != nil && *s.Timeout > 0 {
		return time.Duration(*s.Timeout)
	}
	return engine.DefaultToolTimeout
}

// notIdent is what a tool's name may hold that a Python name may not.
var notIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// connectMCP starts (or reaches) each MCP server, lists its tools and
// returns them as host tools, with the function that closes the servers.
func connectMCP(ctx context.Context, sources []mcpSource) ([]engine.HostTool, func(), error) {
	var (
		sessions []*mcp.ClientSession
		hosts    []engine.HostTool
	)
	closeAll := func() {
		for _, cs := range sessions {
			_ = cs.Close()
		}
	}
	for i := range sources {
		s := &sources[i]
		cs, tools, err := s.connect(ctx)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		sessions = append(sessions, cs)
		hosts = append(hosts, tools...)
	}
	return hosts, closeAll, nil
}

// lockedBuffer keeps the tail of a server's stderr for messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

func (s *mcpSource) connect(ctx context.Context) (*mcp.ClientSession, []engine.HostTool, error) {
	what := fmt.Sprintf("[[mcp]] %s", s.label())
	var (
		transport mcp.Transport
		stderr    lockedBuffer
	)
	switch {
	case (len(s.Command) == 0) == (s.URL == ""):
		return nil, nil, fmt.Errorf("%s: give it exactly one of command = [\"program\", ...] (a stdio server) and url = \"http://...\" (a streamable HTTP server)", what)
	case s.URL != "":
		transport = &mcp.StreamableClientTransport{Endpoint: s.URL}
	default:
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Dir = s.dir
		cmd.Stderr = &stderr
		// Its own process group, signalled when rlm dies: a server (and
		// what it starts) does not outlive the run.
		proctree.Configure(cmd)
		transport = &mcp.CommandTransport{Command: cmd}
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "rlm-run", Version: version.Version}, nil)
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		if said := stderr.String(); said != "" {
			err = fmt.Errorf("%w; it said: %s", err, said)
		}
		return nil, nil, fmt.Errorf("%s: cannot connect: %v (check its command or url)", what, err)
	}
	var listed []*mcp.Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, nil, fmt.Errorf("%s: listing its tools: %v", what, err)
		}
		listed = append(listed, t)
	}
	var names []string
	for _, t := range listed {
		names = append(names, t.Name)
	}
	for _, want := range s.Tools {
		if !slices.Contains(names, want) {
			_ = cs.Close()
			return nil, nil, fmt.Errorf("%s: the server has no tool %q (it has: %s)", what, want, strings.Join(names, ", "))
		}
	}
	var hosts []engine.HostTool
	for _, t := range listed {
		if len(s.Tools) > 0 && !slices.Contains(s.Tools, t.Name) {
			continue
		}
		hosts = append(hosts, s.hostTool(cs, t))
	}
	return cs, hosts, nil
}

// hostTool makes one MCP tool a host tool: its required arguments are
// the positional parameters, and the description lists every argument.
func (s *mcpSource) hostTool(cs *mcp.ClientSession, t *mcp.Tool) engine.HostTool {
	name := s.Prefix + notIdent.ReplaceAllString(t.Name, "_")
	params, args := schemaArgs(t.InputSchema)
	desc := strings.TrimSpace(t.Description)
	if args != "" {
		desc += "\nArguments: " + args
	}
	label, tool := s.label(), t.Name
	return engine.HostTool{
		Name: name, Description: strings.TrimSpace(desc), Params: params,
		Timeout: s.timeout(), MaxCalls: s.MaxCalls,
		Func: func(ctx context.Context, args json.RawMessage) ([]byte, error) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, fmt.Errorf("tool %s: the MCP server %s failed: %v", name, label, err)
			}
			text := contentText(res.Content)
			if res.IsError {
				return nil, fmt.Errorf("tool %s: the MCP server %s answered an error: %s", name, label, text)
			}
			if res.StructuredContent != nil {
				return json.Marshal(res.StructuredContent)
			}
			return []byte(text), nil
		},
	}
}

// schemaArgs reads a tool's JSON Schema: the required properties (the
// positional parameters, in the schema's order) and a one-line summary of
// every property.
func schemaArgs(schema any) ([]string, string) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, ""
	}
	var sc struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(raw, &sc) != nil {
		return nil, ""
	}
	var params []string
	for _, r := range sc.Required {
		if _, ok := sc.Properties[r]; ok && !notIdent.MatchString(r) && r != "" {
			params = append(params, r)
		}
	}
	keys := make([]string, 0, len(sc.Properties))
	for k := range sc.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		p := sc.Properties[k]
		part := k
		if t, ok := p.Type.(string); ok {
			part += " (" + t
			if slices.Contains(sc.Required, k) {
				part += ", required"
			}
			part += ")"
		} else if slices.Contains(sc.Required, k) {
			part += " (required)"
		}
		if d := strings.TrimSpace(p.Description); d != "" {
			part += ": " + strings.Join(strings.Fields(d), " ")
		}
		parts = append(parts, part)
	}
	return params, strings.Join(parts, "; ")
}

// contentText joins a result's text parts; other kinds are named.
func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		default:
			parts = append(parts, fmt.Sprintf("[%s omitted]", strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp.")))
		}
	}
	return strings.Join(parts, "\n")
}
