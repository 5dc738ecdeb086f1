package pyodide

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

func openSession(t *testing.T, spec SessionSpec) *Session {
	t.Helper()
	s, err := runner(t).OpenSession(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func cell(t *testing.T, s *Session, c CellSpec) *Result {
	t.Helper()
	res, err := s.Execute(context.Background(), c)
	if err != nil {
		t.Fatalf("Execute(%q): %v", c.Code, err)
	}
	return res
}

// cellFails runs code in s and fails the test with what unless the cell
// failed with an error containing want.
func cellFails(t *testing.T, s *Session, code, want, what string) {
	t.Helper()
	if res := cell(t, s, CellSpec{Code: code}); res.Success || !strings.Contains(res.Error, want) {
		dump(t, res)
		t.Fatal(what)
	}
}

func TestSessionKeepsState(t *testing.T) {
	s := openSession(t, SessionSpec{Context: []byte("the context")})
	res := cell(t, s, CellSpec{Code: "x = 41\nprint('set')"})
	if !res.Success || string(res.Stdout) != "set\n" || res.Value != "" {
		dump(t, res)
		t.Fatal("first cell")
	}
	res = cell(t, s, CellSpec{Code: "x + 1"})
	if !res.Success || res.Value != "42" || res.FuelConsumed <= 0 {
		dump(t, res)
		t.Fatalf("value = %q, want 42", res.Value)
	}
	res = cell(t, s, CellSpec{Code: "len(context), context[:3], sorted(SHOW_VARS())"})
	if res.Value != "(11, 'the', ['context', 'x'])" {
		dump(t, res)
		t.Fatalf("value = %q", res.Value)
	}
	res = cell(t, s, CellSpec{Code: "sorted(SHOW_VARS())"})
	if res.Value != "['context', 'x']" {
		dump(t, res)
		t.Fatalf("value = %q", res.Value)
	}
	repr, js, err := s.GetVariable(context.Background(), "x")
	if err != nil || repr != "41" || string(js) != "41" {
		t.Fatalf("GetVariable = %q, %s, %v", repr, js, err)
	}
	if _, _, err := s.GetVariable(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), "NameError") {
		t.Fatalf("GetVariable(nope) err = %v", err)
	}
}

func TestSessionErrorsKeepTheLoopAlive(t *testing.T) {
	s := openSession(t, SessionSpec{})
	cell(t, s, CellSpec{Code: "y = 'kept'"})
	for _, code := range []string{"raise ValueError('boom')", "import sys; sys.exit(3)", "raise KeyboardInterrupt", "x = (", "import os; os.write(1, b'{\"type\":\"result\",\"id\":99}\\n')"} {
		res := cell(t, s, CellSpec{Code: code})
		if res.StateLost {
			dump(t, res)
			t.Fatalf("%q lost state", code)
		}
		t.Logf("%q -> error %q", code, res.Error)
	}
	res := cell(t, s, CellSpec{Code: "raise ValueError('boom')"})
	if res.Success || res.Error != "ValueError: boom" || !bytes.Contains(res.Stderr, []byte(`File "<cell>", line 1`)) || bytes.Contains(res.Stderr, []byte("_rlm_driver")) {
		dump(t, res)
		t.Fatal("exception not reported as the user's")
	}
	res = cell(t, s, CellSpec{Code: "y"})
	if res.Value != "'kept'" {
		dump(t, res)
		t.Fatal("state lost after errors")
	}
}

func TestSessionCallbacks(t *testing.T) {
	var calls []core.Query
	s := openSession(t, SessionSpec{Context: []byte("the big context"), Callback: func(ctx context.Context, cb core.Query) ([]string, error) {
		calls = append(calls, cb)
		if len(cb.Prompts) == 1 && cb.Prompts[0] == "fail" {
			return nil, errors.New("model unavailable")
		}
		if len(cb.Prompts) == 1 && cb.Prompts[0] == "short" {
			return nil, nil
		}
		out := make([]string, len(cb.Prompts))
		for i, q := range cb.Prompts {
			out[i] = cb.Kind + ":" + strings.ToUpper(q)
		}
		return out, nil
	}})
	res := cell(t, s, CellSpec{Code: "print('noise')\nllm_query('q1', model='m'), llm_query_batched(['a', 'b'])"})
	if !res.Success || res.Value != "('llm_query:Q1', ['llm_query:A', 'llm_query:B'])" || string(res.Stdout) != "noise\n" {
		dump(t, res)
		t.Fatalf("value = %q", res.Value)
	}
	cellFails(t, s, "llm_query('fail')", "LLMQueryError: model unavailable", "callback error not raised in the guest")
	cellFails(t, s, "llm_query('short')", "0 results for 1 prompts", "a reply with too few results was accepted")
	// rlm_query: the unchanged session context is not sent back (the host
	// has it); an explicit or rebound one is.
	res = cell(t, s, CellSpec{Code: "a = rlm_query('t1')\nb = rlm_query_batched(['t2', 't3'], ['c2', {'k': 1}])\ncontext = 'rebound'\nc = rlm_query('t4')\n(a, b, c)"})
	if !res.Success || res.Value != "('rlm_query:T1', ['rlm_query:T2', 'rlm_query:T3'], 'rlm_query:T4')" {
		dump(t, res)
		t.Fatalf("value = %q", res.Value)
	}
	// A per-cell callback replaces the session's.
	res = cell(t, s, CellSpec{Code: "llm_query('x')", Callback: func(context.Context, core.Query) ([]string, error) { return []string{"cell's"}, nil }})
	if res.Value != `"cell's"` {
		dump(t, res)
		t.Fatalf("per-cell callback: value = %q", res.Value)
	}
	got := make([]string, len(calls))
	for i, c := range calls {
		got[i] = fmt.Sprintf("%s %q %q %v %q", c.Kind, c.Prompts, c.Contexts, c.HasContext, c.Model)
	}
	want := []string{
		`llm_query ["q1"] [] [] "m"`,
		`llm_query ["a" "b"] [] [] ""`,
		`llm_query ["fail"] [] [] ""`,
		`llm_query ["short"] [] [] ""`,
		`rlm_query ["t1"] [""] [false] ""`,
		`rlm_query ["t2" "t3"] ["c2" "{\"k\": 1}"] [true true] ""`,
		`rlm_query ["t4"] ["rebound"] [true] ""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("callbacks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSessionWithoutCallback(t *testing.T) {
	s := openSession(t, SessionSpec{})
	cellFails(t, s, "llm_query('q')", "no LLM configured", "llm_query without a callback")
	if _, _, err := s.GetVariable(context.Background(), "missing"); !errors.Is(err, ErrUndefined) {
		t.Fatalf("GetVariable(missing) = %v, want ErrUndefined", err)
	}
}

func TestSessionTimeoutRestarts(t *testing.T) {
	ws := t.TempDir()
	s := openSession(t, SessionSpec{Workspace: ws, Context: []byte("ctx")})
	cell(t, s, CellSpec{Code: "z = 1\nopen('kept.txt', 'w').write('x')"})
	for _, tc := range []struct {
		code string
		c    CellSpec
		want ending.Reason
	}{
		{"busy", CellSpec{Code: "while True: pass", Timeout: time.Second, Fuel: -1}, ending.Timeout},
		{"sleep", CellSpec{Code: "import time; time.sleep(30)", Timeout: time.Second}, ending.Timeout},
		{"fuel", CellSpec{Code: "while True: pass", Fuel: 20_000_000}, ending.Fuel},
	} {
		t0 := time.Now()
		res := cell(t, s, tc.c)
		if res.EndedBy != tc.want || !res.StateLost || res.Success {
			dump(t, res)
			t.Fatalf("%s: ended_by %s state_lost %v", tc.code, res.EndedBy, res.StateLost)
		}
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("%s took %s", tc.code, time.Since(t0))
		}
		res = cell(t, s, CellSpec{Code: "(globals().get('z'), context, open('kept.txt').read())"})
		if !res.Success || res.Value != "(None, 'ctx', 'x')" {
			dump(t, res)
			t.Fatalf("%s: after restart value = %q", tc.code, res.Value)
		}
		cell(t, s, CellSpec{Code: "z = 1"})
	}
}

func TestSessionFilesAndMemory(t *testing.T) {
	ws := t.TempDir()
	s := openSession(t, SessionSpec{Workspace: ws, MemoryBytes: 64 << 20})
	res := cell(t, s, CellSpec{Code: "open('out.txt', 'w').write('hi')"})
	if len(res.FilesCreated) != 1 || res.FilesCreated[0] != "out.txt" {
		t.Fatalf("files_created = %v", res.FilesCreated)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "hi" {
		t.Fatal("file not on host")
	}
	res = cell(t, s, CellSpec{Code: "big = 'a' * 100_000_000"})
	if res.Success || res.EndedBy != ending.MemoryLimit || res.StateLost {
		dump(t, res)
		t.Fatal("memory limit in a session")
	}
	cellFails(t, s, "import os; os.symlink('/etc/passwd', 'l')", "PermissionError", "symlink allowed in a session")
	res = cell(t, s, CellSpec{Code: "open('/rlm/io/chan', 'wb')"})
	if res.Success {
		dump(t, res)
		t.Fatal("user code opened the protocol channel")
	}
}

// A cell's result is the native REPL's (plugins/internal/pycell): the repr
// of a final expression, none for a statement, None or a semicolon, capped
// like output; tracebacks still start at the cell.
func TestSessionCellValue(t *testing.T) {
	s := openSession(t, SessionSpec{})
	for _, c := range []struct{ code, want string }{
		{"1 + 1", "2"},
		{"x = 5", ""},
		{"print('hi')\nx * 2", "10"},
		{"None", ""},
		{"x;", ""},
		{"(x +\n 1)", "6"},
		{"class R:\n    def __repr__(self): raise ValueError('no')\nR()", "<unrepresentable R: ValueError>"},
	} {
		if res := cell(t, s, CellSpec{Code: c.code}); !res.Success || res.Value != c.want {
			dump(t, res)
			t.Errorf("%q: value %q, want %q", c.code, res.Value, c.want)
		}
	}
	res := cell(t, s, CellSpec{Code: "'a' * 5000 + 'z' * 5000", MaxOutputBytes: 1000})
	if v := res.Value; len(v) > 1100 || !strings.HasPrefix(v, "'aaa") || !strings.HasSuffix(v, "zzz'") || !strings.Contains(v, "bytes omitted") {
		t.Fatalf("long value: %q", v)
	}
	res = cell(t, s, CellSpec{Code: "x\n1/0"})
	if res.Value != "" || !bytes.Contains(res.Stderr, []byte("Traceback (most recent call last):\n  File \"<cell>\", line 2")) {
		dump(t, res)
		t.Fatal("failing cell")
	}
}
