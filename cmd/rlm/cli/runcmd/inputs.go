package runcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/engine"
)

// Named and JSON inputs (issue 30 item 4). --context-json FILE makes
// `context` the decoded value (a list or dict in Python, as context_glob's
// dict is). --var NAME=FILE, repeatable, makes `context` a dict of the
// named inputs and binds each NAME as a REPL variable of the root loop:
// a .json file decoded, any other file as text. They replace --context,
// which they cannot be mixed with: a run has one `context`.

// inputContext resolves --context-json and --var; nil when neither is set.
func (o *Options) inputContext() (*core.Context, error) {
	if o.ContextJSON == "" && len(o.Vars) == 0 {
		return nil, nil
	}
	if o.Context != "" {
		return nil, fmt.Errorf("--context cannot be mixed with --context-json or --var: a run has one `context` (with --var it is the dict of the named inputs)")
	}
	if o.ContextJSON != "" && len(o.Vars) > 0 {
		return nil, fmt.Errorf("--context-json and --var cannot be mixed: with --var, `context` is the dict of the named inputs (a .json one is decoded)")
	}
	if o.ContextJSON != "" {
		b, err := o.readInput(o.ContextJSON)
		if err != nil {
			return nil, fmt.Errorf("--context-json: %w", err)
		}
		if err := checkJSON(b); err != nil {
			return nil, fmt.Errorf("--context-json %s: %w", o.ContextJSON, err)
		}
		return &core.Context{Data: b, Kind: "json"}, nil
	}
	vars := map[string]json.RawMessage{}
	for _, v := range o.Vars {
		name, file, ok := strings.Cut(v, "=")
		if !ok || !engine.IsPythonName(name) || file == "" {
			return nil, fmt.Errorf("--var %q: want NAME=FILE, NAME a Python identifier (letters, digits, _; not starting with a digit; not a keyword)", v)
		}
		if _, dup := vars[name]; dup {
			return nil, fmt.Errorf("--var %s is given twice", name)
		}
		if slices.Contains(engine.ReservedNames, name) {
			return nil, fmt.Errorf("--var %s: %s is one of the REPL's own names; choose another", name, name)
		}
		b, err := o.readInput(file)
		if err != nil {
			return nil, fmt.Errorf("--var %s: %w", name, err)
		}
		if strings.EqualFold(filepath.Ext(file), ".json") {
			if err := checkJSON(b); err != nil {
				return nil, fmt.Errorf("--var %s=%s: %w", name, file, err)
			}
			vars[name] = b
			continue
		}
		text, _ := json.Marshal(string(b))
		vars[name] = text
	}
	data, err := json.Marshal(vars)
	if err != nil {
		return nil, err
	}
	return &core.Context{Data: data, Kind: "json"}, nil
}

func (o *Options) readInput(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(o.F.IO.In)
	}
	return os.ReadFile(file)
}

func checkJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("not one JSON value: more follows the first (JSON Lines? make it a list)")
	}
	return nil
}
