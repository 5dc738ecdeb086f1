package runcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
)

// TaskTool is a task file's [[tool]]: a host-side tool the REPL calls as
// a Python function (engine.HostTool). The operator declares it; the
// model only calls it, with arguments that reach it as JSON.
//
//	[[tool]]
//	name = "lookup"
//	description = "Definition of a word: lookup(word) -> str"
//	params = ["word"]
//	command = ["./lookup.sh"]        # or url = "http://127.0.0.1:8080/lookup"
//	timeout = "10s"
//	max_calls = 50
type TaskTool struct {
	Name        string           `toml:"name"`
	Description string           `toml:"description"`
	Params      []string         `toml:"params"`
	Command     []string         `toml:"command"`
	URL         string           `toml:"url"`
	Timeout     *config.Duration `toml:"timeout"`
	MaxCalls    int              `toml:"max_calls"`
}

// tools reads the Python tool files (the task file's, then --tools), the
// task file's host tools and its MCP servers (connected when the run
// starts, by connectMCP). Relative paths in the task file, and a
// command's program given as a relative path, are relative to its
// directory, where commands also run.
func (o *Options) tools(tf *TaskFile) (engine.Tools, []mcpSource, error) {
	var t engine.Tools
	var paths []string
	for _, p := range tf.Tools {
		paths = append(paths, tf.rel(p))
	}
	paths = append(paths, o.Tools...)
	for _, p := range paths {
		if !strings.HasSuffix(p, ".py") {
			return t, nil, fmt.Errorf("tools: %s is not a Python file (.py): tools files are Python source preloaded into the REPL; commands and URLs are declared as [[tool]] in a task file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return t, nil, fmt.Errorf("tools: %w", err)
		}
		t.Files = append(t.Files, engine.ToolFile{Path: p, Source: string(b)})
	}
	dir := "."
	if tf.path != "" {
		dir = filepath.Dir(tf.path)
	}
	for _, tt := range tf.Tool {
		h := engine.HostTool{
			Name: tt.Name, Description: tt.Description, Params: tt.Params,
			URL: tt.URL, MaxCalls: tt.MaxCalls,
		}
		if tt.Timeout != nil {
			h.Timeout = time.Duration(*tt.Timeout)
		}
		if len(tt.Command) > 0 {
			h.Command = append([]string{}, tt.Command...)
			if prog := h.Command[0]; !filepath.IsAbs(prog) && strings.ContainsAny(prog, `/\`) {
				h.Command[0], _ = filepath.Abs(filepath.Join(dir, prog))
			}
			h.Dir = dir
		}
		t.Host = append(t.Host, h)
	}
	var servers []mcpSource
	for _, m := range tf.MCP {
		s := mcpSource{TaskMCP: m, dir: dir}
		if len(s.Command) > 0 {
			s.Command = append([]string{}, s.Command...)
			if prog := s.Command[0]; !filepath.IsAbs(prog) && strings.ContainsAny(prog, `/\`) {
				s.Command[0], _ = filepath.Abs(filepath.Join(dir, prog))
			}
		}
		servers = append(servers, s)
	}
	return t, servers, nil
}
