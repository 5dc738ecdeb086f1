package runcmd

import (
	"encoding/json"
	"testing"
)

// An MCP tool's required arguments become its positional parameters, in
// the schema's order, and the prompt lists every argument.
func TestSchemaArgs(t *testing.T) {
	var schema any
	json.Unmarshal([]byte(`{"type":"object","properties":{
		"query":{"type":"string","description":"what to look for\n in the docs"},
		"k":{"type":"integer"},
		"not-python":{"type":"string"},
		"any":{}},
		"required":["query","not-python","any"]}`), &schema)
	params, desc := schemaArgs(schema)
	if len(params) != 2 || params[0] != "query" || params[1] != "any" {
		t.Errorf("params %q, want [query any] (not-python is no Python name: keyword only)", params)
	}
	want := "any (required); k (integer); not-python (string, required); query (string, required): what to look for in the docs"
	if desc != want {
		t.Errorf("description\n%s\nwant\n%s", desc, want)
	}
	if p, d := schemaArgs(nil); p != nil || d != "" {
		t.Errorf("no schema: %q %q", p, d)
	}
}
