package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/plugins/pyodide"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"-c", "x", "file.py"}, {"-nope"}, {"/does/not/exist.py"}} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

func TestRun(t *testing.T) {
	if !pyodide.HasEmbeddedAssets() {
		if os.Getenv("RLM_REQUIRE_WASM") != "" {
			t.Fatal("RLM_REQUIRE_WASM is set but python.wasm was not embedded: run make wasm")
		}
		t.Skip("python.wasm not built (make wasm)")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-c", "import sys; print('hi'); sys.exit(7)"}, nil, &out, &errb); code != 7 || out.String() != "hi\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"-json", "-timeout", "1s", "-"}, strings.NewReader("while True: pass"), &out, &errb); code != 124 {
		t.Fatalf("timeout exit %d", code)
	}
	var res struct {
		EndedBy string `json:"ended_by"`
		Stderr  string `json:"stderr"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.EndedBy != "timeout" || !strings.Contains(res.Stderr, "TimeoutError") {
		t.Fatalf("json %q: %v", out.String(), err)
	}
	if code := run([]string{"-check", "-c", "x = ("}, nil, &out, &errb); code != 1 {
		t.Fatalf("check of bad code exit %d", code)
	}
}
