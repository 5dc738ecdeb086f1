package runcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
)

// TaskFile is a task described in TOML:
//
//	task = "Which city is the secret meeting in?"
//	context_file = "haystack.txt"     # or context_glob = "docs/*.md", or context = "..."
//	provider = "anthropic"            # optional, like model, subcall_model, transcript
//	[budget]
//	max_iterations = 10
//
// Relative paths are relative to the task file's directory. Unknown keys
// are errors that name the key and the file.
type TaskFile struct {
	Task         string  `toml:"task"`
	Context      *string `toml:"context"`
	ContextFile  string  `toml:"context_file"`
	ContextGlob  string  `toml:"context_glob"`
	Provider     string  `toml:"provider"`
	Model        string  `toml:"model"`
	SubcallModel string  `toml:"subcall_model"`
	Transcript   string  `toml:"transcript"`
	// Protocol is "rlm" or "reference" (engine/protocol.go).
	Protocol string     `toml:"protocol"`
	Budget   TaskBudget `toml:"budget"`
	// Tools are Python files preloaded into every loop's REPL, and Tool
	// the host-side tools (tools.go).
	Tools []string   `toml:"tools"`
	Tool  []TaskTool `toml:"tool"`
	MCP   []TaskMCP  `toml:"mcp"`

	path string
}

// TaskBudget is a task file's [budget]; absent keys keep the configured
// values.
type TaskBudget struct {
	MaxIterations *int             `toml:"max_iterations"`
	MaxDepth      *int             `toml:"max_depth"`
	MaxTokens     *int64           `toml:"max_tokens"`
	MaxCostUSD    *float64         `toml:"max_cost_usd"`
	MaxTime       *config.Duration `toml:"max_time"`
	MaxErrors     *int             `toml:"max_errors"`
	MaxSubcalls   *int             `toml:"max_subcalls"`
}

// LoadTaskFile reads and checks a task file.
func LoadTaskFile(path string) (*TaskFile, error) {
	var t TaskFile
	md, err := toml.DecodeFile(path, &t)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, fmt.Errorf("%s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("task file %s: no such file", path)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: %s: unknown key (task files accept task, context, context_file, context_glob, provider, model, subcall_model, transcript, tools, [budget] max_iterations, max_depth, max_tokens, max_cost_usd, max_time, max_errors [[tool]] name, description, params, command, url, timeout, max_calls and [[mcp]] name, command, url, tools, prefix, timeout, max_calls)%s",
			path, keys[0], also(keys))
	}
	t.path = path
	n := 0
	for _, set := range []bool{t.Context != nil, t.ContextFile != "", t.ContextGlob != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("%s: give at most one of context, context_file and context_glob", path)
	}
	return &t, nil
}

func also(keys []string) string {
	if len(keys) < 2 {
		return ""
	}
	return "; also unknown: " + strings.Join(keys[1:], ", ")
}

// rel resolves p against the task file's directory.
func (t *TaskFile) rel(p string) string {
	if p == "" || filepath.IsAbs(p) || t.path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(t.path), p)
}

// LoadContext builds the task file's context; nil when it has none.
func (t *TaskFile) LoadContext() (*core.Context, error) {
	switch {
	case t.Context != nil:
		return &core.Context{Data: []byte(*t.Context), Kind: "text"}, nil
	case t.ContextFile != "":
		p := t.rel(t.ContextFile)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: context_file: %w", t.path, err)
		}
		return &core.Context{Data: b, Kind: "text"}, nil
	case t.ContextGlob != "":
		base := "."
		if t.path != "" {
			base = filepath.Dir(t.path)
		}
		return globContext(base, t.rel(t.ContextGlob), t.path)
	}
	return nil, nil
}

// globContext makes a dict {path: text} of the files matching pattern, as
// JSON (so `context` is a dict in Python); paths are relative to base.
func globContext(base, pattern, source string) (*core.Context, error) {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: context_glob %q: %v", source, pattern, err)
	}
	files := map[string]string{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: context_glob: %w", source, err)
		}
		name := p
		if r, err := filepath.Rel(base, p); err == nil {
			name = r
		}
		name = filepath.ToSlash(name)
		files[name] = string(b)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: context_glob %q matches no files", source, pattern)
	}
	data, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	return &core.Context{Data: data, Kind: "json"}, nil
}
