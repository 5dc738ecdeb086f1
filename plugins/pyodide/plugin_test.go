package pyodide_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/pyodide"
)

// These tests run the real rlm-plugin-pyodide binary over go-plugin RPC,
// as rlm exec and rlm run do.

var (
	buildOnce  sync.Once
	pluginPath string
	buildErr   error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlm-pyodide-test-")
	if err != nil {
		panic(err)
	}
	pluginPath = filepath.Join(dir, "rlm-plugin-pyodide")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func startRuntime(t *testing.T) *client.Runtime {
	t.Helper()
	if !pyodide.HasEmbeddedAssets() {
		if os.Getenv("RLM_REQUIRE_WASM") != "" {
			t.Fatalf("RLM_REQUIRE_WASM is set but python.wasm was not embedded: run %s", pyodide.BuildCommand)
		}
		t.Skipf("python.wasm not built; run %s", pyodide.BuildCommand)
	}
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", pluginPath, "./cmd/rlm-plugin-pyodide").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building the plugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p, err := launch.Launch(pluginPath)
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime("python", "pyodide", p.Client, p.Kill, isolate.Available)
	t.Cleanup(rt.Close)
	return rt
}

// cell executes code in s, failing the test if the call fails.
var cell = plugintest.Execute

// A session through the plugin keeps state, receives context and answers
// llm_query / rlm_query through the Go bridges, like the native REPL.
func TestPluginSession(t *testing.T) {
	rt := startRuntime(t)
	info, err := rt.Info(context.Background())
	if err != nil || !strings.Contains(strings.Join(info.Capabilities, ","), "repl") {
		t.Fatalf("info: %v %v", info, err)
	}
	var rec plugintest.Recorder
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{
		Context: &core.Context{Data: []byte(plugintest.BridgeContext), Kind: "text"},
		Bridges: rec.Bridges(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	r := cell(t, s, "import sys\nx = 41\nprint(sys.platform, len(context))")
	if r.Stdout != "wasi 17\n" || r.Error != "" || r.Backend != "pyodide" || r.Isolation != "wasm" || r.FuelConsumed <= 0 {
		t.Fatalf("first cell: %+v", r)
	}
	if r = cell(t, s, "x += 1\nprint(x)"); r.Stdout != "42\n" {
		t.Fatalf("state not kept: %+v", r)
	}
	plugintest.CheckBridges(t, s, &rec)
	if r = cell(t, s, `print(llm_query_batched(["a", "b"]))`); r.Stdout != "['answer to a', 'answer to b']\n" {
		t.Fatalf("batched: %+v", r)
	}

	v, found, err := s.Variable(context.Background(), "x")
	if err != nil || !found || string(v) != "42" {
		t.Fatalf("Variable(x) = %s %v %v", v, found, err)
	}
	if _, found, err := s.Variable(context.Background(), "missing"); err != nil || found {
		t.Fatalf("Variable(missing): found=%v err=%v", found, err)
	}
	cell(t, s, "obj = object()")
	if v, found, err := s.Variable(context.Background(), "obj"); err != nil || !found || !strings.Contains(string(v), "object object") {
		t.Fatalf("Variable(obj) = %s %v %v", v, found, err)
	}

	// A Python exception is the cell's error; the session goes on.
	r = cell(t, s, "raise ValueError('test')")
	if r.Error == "" || !strings.Contains(r.Stderr, "ValueError: test") || r.StateLost {
		t.Fatalf("exception: %+v", r)
	}
	if r = cell(t, s, "print(x)"); r.Stdout != "42\n" {
		t.Fatalf("after exception: %+v", r)
	}
}

// A session environment no program could receive is refused at open, as
// on the native Python.
func TestPluginSessionEnvRefused(t *testing.T) {
	plugintest.CheckEnvRefused(t, startRuntime(t).OpenSession)
}

// The helpers a cell sees behave as plugintest holds every Python to,
// the native one included.
func TestPluginHelpers(t *testing.T) {
	s, err := startRuntime(t).OpenSession(context.Background(), core.SessionOptions{
		Context: &core.Context{Data: []byte(plugintest.HelperContext), Kind: "text"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plugintest.CheckHelpers(t, s)
}

// Fuel, time and cancel stop a cell; the next cell runs in a fresh
// interpreter with the same context, and the result says state was lost.
func TestPluginSessionLimits(t *testing.T) {
	rt := startRuntime(t)
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{
		Context: &core.Context{Data: []byte(`{"k": [1, "two"]}`), Kind: "json"},
		Limits:  core.Limits{Fuel: 50_000_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cell(t, s, "y = 1")
	r := cell(t, s, "while True: pass")
	if r.EndedBy != "fuel" || !r.StateLost || !strings.Contains(r.Stderr, "OutOfFuel") {
		t.Fatalf("fuel: %+v", r)
	}
	if r = cell(t, s, "print(globals().get('y'), context['k'][1])"); r.Stdout != "None two\n" {
		t.Fatalf("after fuel: %+v", r)
	}

	r, err = s.Execute(context.Background(), "import time; time.sleep(30)", time.Second)
	if err != nil || r.EndedBy != "timeout" || !r.StateLost {
		t.Fatalf("timeout: %+v %v", r, err)
	}

	done := make(chan *core.Result, 1)
	go func() {
		r, _ := s.Execute(context.Background(), "import time; time.sleep(30)", 0)
		done <- r
	}()
	time.Sleep(500 * time.Millisecond)
	if err := s.Cancel(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.EndedBy != "cancelled" {
			t.Fatalf("cancel: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not stop the cell")
	}
	if r = cell(t, s, "print('alive')"); r.Stdout != "alive\n" {
		t.Fatalf("after cancel: %+v", r)
	}
}

// A context that is not JSON, given as json, fails the open with the reason.
func TestPluginSessionBadContext(t *testing.T) {
	rt := startRuntime(t)
	_, err := rt.OpenSession(context.Background(), core.SessionOptions{Context: &core.Context{Data: []byte("{nope"), Kind: "json"}})
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("a bad JSON context: err = %v", err)
	}
}

// --memory 0 means no limit for every backend (the protocol's 0); the
// pyodide plugin used to read it as its 256 MiB default. A 300 MiB
// bytearray fits only without that default, and a 64 MiB cap still holds.
func TestPluginMemoryZeroIsNoLimit(t *testing.T) {
	rt := startRuntime(t)
	code := "b = bytearray(300 << 20)\nprint(len(b) >> 20)"
	r, err := rt.Run(context.Background(), core.Program{Code: code, Limits: core.Limits{MemoryBytes: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if r.EndedBy != "exit" || r.ExitCode != 0 || r.Stdout != "300\n" {
		t.Fatalf("memory 0: %+v", r)
	}
	if r.MemoryUsedBytes <= 256<<20 {
		t.Errorf("memory_used_bytes = %d, want above 256 MiB", r.MemoryUsedBytes)
	}
	r, err = rt.Run(context.Background(), core.Program{Code: code, Limits: core.Limits{MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if r.EndedBy != "memory_limit" {
		t.Fatalf("memory 64 MiB: %+v", r)
	}
}

// A memory limit below what the interpreter starts with is the request's
// fault: a refusal (rlm exec exits 2), for programs and sessions alike, not
// a runtime failure.
func TestPluginMemoryBelowMinimumRefused(t *testing.T) {
	rt := startRuntime(t)
	l := core.Limits{MemoryBytes: 1 << 10}
	_, err := rt.Run(context.Background(), core.Program{Code: "pass", Limits: l})
	var refused *core.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "below the interpreter's initial memory") || !strings.Contains(err.Error(), "--memory") {
		t.Errorf("program: err = %v (%T), want a refusal naming --memory", err, err)
	}
	_, err = rt.OpenSession(context.Background(), core.SessionOptions{Limits: l})
	if !errors.As(err, &refused) {
		t.Errorf("session: err = %v (%T), want a refusal", err, err)
	}
}

// Through the plugin a WebAssembly cell gives its final expression's value,
// takes files into /app and reports the files it produces, as a native
// Python session does.
func TestPluginSessionValueAndFiles(t *testing.T) {
	rt := startRuntime(t)
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{ReturnFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := cell(t, s, "x = 20\nprint('hi')\nx * 2 + 2"); r.Value == nil || *r.Value != "42" || r.Stdout != "hi\n" {
		t.Fatalf("value %v stdout %q", r.Value, r.Stdout)
	}
	if r := cell(t, s, "y = 1"); r.Value != nil {
		t.Fatalf("a statement has value %q", *r.Value)
	}
	cr := s.(core.CellRunner)
	r, err := cr.RunCell(context.Background(), core.Cell{
		Code:  "import os\nos.makedirs('out', exist_ok=True)\nopen('out/b.txt', 'w').write(open('in/a.txt').read().upper())",
		Files: []core.File{{Path: "in/a.txt", Data: []byte("up")}},
	})
	if err != nil || r.Error != "" {
		t.Fatalf("cell with files: %v %+v", err, r)
	}
	if len(r.Files) != 1 || r.Files[0].Path != "out/b.txt" || string(r.Files[0].Data) != "UP" || r.Files[0].Change != "created" {
		t.Fatalf("files %+v", r.Files)
	}
	var refused *core.RefusedError
	if _, err := cr.RunCell(context.Background(), core.Cell{Code: "1", Files: []core.File{{Path: "../x", Data: []byte("x")}}}); !errors.As(err, &refused) {
		t.Fatalf("../x: %v", err)
	}
}
