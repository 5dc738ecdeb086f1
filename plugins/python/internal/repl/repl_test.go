package repl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

var pythonPath string

func TestMain(m *testing.M) {
	// Resolve the real interpreter once: a pyenv shim costs ~170 ms a start.
	// RLM_TEST_PYTHON runs the suite against another interpreter.
	py := "python3"
	if v := os.Getenv("RLM_TEST_PYTHON"); v != "" {
		py = v
	}
	if out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output(); err == nil {
		pythonPath = strings.TrimSpace(string(out))
	}
	if err := proctree.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "BecomeSubreaper:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func needPython(tb testing.TB) {
	tb.Helper()
	if pythonPath == "" {
		tb.Skip("python3 not found")
	}
}

func start(tb testing.TB, cfg Config) *Process {
	tb.Helper()
	needPython(tb)
	cfg.Python = pythonPath
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	p, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

func run(tb testing.TB, p *Process, code string) *core.Result {
	tb.Helper()
	return runT(tb, p, code, 30*time.Second, nil)
}

func runT(tb testing.TB, p *Process, code string, timeout time.Duration, cb CallbackFunc) *core.Result {
	tb.Helper()
	res, err := p.Execute(context.Background(), code, timeout, cb)
	if err != nil {
		tb.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

func ok(tb testing.TB, p *Process, code string) *core.Result {
	tb.Helper()
	res := run(tb, p, code)
	if res.ExitCode != 0 || res.Error != "" || res.EndedBy != ending.Exit {
		tb.Fatalf("cell %q failed: exit %d ended_by %v error %q\nstderr: %s", code, res.ExitCode, res.EndedBy, res.Error, res.Stderr)
	}
	return res
}

func variable(tb testing.TB, p *Process, name string) (bool, string) {
	tb.Helper()
	found, js, err := p.Variable(context.Background(), name)
	if err != nil {
		tb.Fatalf("Variable(%q): %v", name, err)
	}
	return found, js
}

func TestStatePersistsAndVariables(t *testing.T) {
	p := start(t, Config{})
	ok(t, p, "x = 41\nd = {'a': [1, 2], 'b': None}\nn = None\nclass Foo:\n    def __repr__(self): return 'Foo<1>'\nfoo = Foo()")
	res := ok(t, p, "x += 1\nprint(x)")
	if string(res.Stdout) != "42\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	cases := []struct {
		name  string
		found bool
		js    string
	}{
		{"x", true, "42"},
		{"n", true, "null"},
		{"missing", false, ""},
		{"foo", true, `"Foo<1>"`},
	}
	for _, c := range cases {
		found, js := variable(t, p, c.name)
		if found != c.found || js != c.js {
			t.Errorf("Variable(%s) = %v %q, want %v %q", c.name, found, js, c.found, c.js)
		}
	}
	_, js := variable(t, p, "d")
	var d map[string]any
	if err := json.Unmarshal([]byte(js), &d); err != nil || fmt.Sprint(d) != "map[a:[1 2] b:<nil>]" {
		t.Errorf("d = %s (%v)", js, err)
	}
	if _, js := variable(t, p, "__name__"); js != `"__main__"` {
		t.Errorf("__name__ = %s", js)
	}
	// non-finite floats are not JSON: repr instead
	ok(t, p, "f = float('nan')")
	if _, js := variable(t, p, "f"); js != `"nan"` {
		t.Errorf("nan = %s", js)
	}
}

func TestMarshalledDriverCache(t *testing.T) {
	needPython(t)
	key, keyOK := interpreterKey(pythonPath)
	if !keyOK {
		t.Fatal("no key")
	}
	codeCache.Delete(key)
	p := start(t, Config{})
	v, cached := codeCache.Load(key)
	if !cached || len(v.([]byte)) == 0 {
		t.Fatal("the first start did not cache the driver")
	}
	// a later start runs the cached code
	p2 := start(t, Config{Context: &core.Context{Data: []byte("c")}})
	if res := ok(t, p2, "print(context)"); string(res.Stdout) != "c\n" {
		t.Fatalf("%q", res.Stdout)
	}
	// a stale cache entry falls back to compiling the source
	codeCache.Store(key, []byte("not marshal data"))
	p3 := start(t, Config{})
	ok(t, p3, "x = 1")
	if v, _ := codeCache.Load(key); string(v.([]byte)) == "not marshal data" {
		t.Fatal("stale cache entry kept")
	}
	ok(t, p, "y = 2")
}

func TestContextText(t *testing.T) {
	p := start(t, Config{Context: &core.Context{Data: []byte("héllo wörld"), Kind: "text"}})
	res := ok(t, p, "print(type(context).__name__, len(context), context)")
	if got := string(res.Stdout); got != "str 11 héllo wörld\n" {
		t.Fatalf("stdout %q", got)
	}
}

func TestContextNone(t *testing.T) {
	p := start(t, Config{})
	if res := ok(t, p, "print(context is None)"); string(res.Stdout) != "True\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestContextJSON(t *testing.T) {
	p := start(t, Config{Context: &core.Context{Data: []byte(`{"docs": [1, "two", {"x": null}]}`), Kind: "json"}})
	res := ok(t, p, "print(type(context).__name__, context['docs'][1], context['docs'][2])")
	if got := string(res.Stdout); got != "dict two {'x': None}\n" {
		t.Fatalf("stdout %q", got)
	}
	p2 := start(t, Config{Context: &core.Context{Data: []byte(`[1,2,3]`), Kind: "json"}})
	if res := ok(t, p2, "print(sum(context))"); string(res.Stdout) != "6\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestContextBadJSONAndKind(t *testing.T) {
	needPython(t)
	_, err := Start(context.Background(), Config{Python: pythonPath, Context: &core.Context{Data: []byte("{nope"), Kind: "json"}})
	if err == nil || !strings.Contains(err.Error(), "JSONDecodeError") {
		t.Fatalf("bad JSON: err = %v", err)
	}
	_, err = Start(context.Background(), Config{Python: pythonPath, Context: &core.Context{Kind: "yaml"}})
	if err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Fatalf("bad kind: err = %v", err)
	}
}

func TestContext50MB(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz\n"), 50<<20/37+1)[:50<<20]
	sum := sha256.Sum256(data)
	p := start(t, Config{Context: &core.Context{Data: data, Kind: "text"}})
	res := ok(t, p, "import hashlib\nprint(len(context), hashlib.sha256(context.encode()).hexdigest())")
	want := fmt.Sprintf("%d %s\n", len(data), hex.EncodeToString(sum[:]))
	if string(res.Stdout) != want {
		t.Fatalf("got %q want %q", res.Stdout, want)
	}
}

func TestContextMultibyteAcrossChunks(t *testing.T) {
	// 3 MiB+ of 1-, 2-, 3- and 4-byte characters: pieces split characters
	unit := "xé€😀"
	text := strings.Repeat(unit, 3<<20/len(unit)+7)
	sum := sha256.Sum256([]byte(text))
	p := start(t, Config{Context: &core.Context{Data: []byte(text), Kind: "text"}})
	res := ok(t, p, "import hashlib\nprint(len(context), hashlib.sha256(context.encode()).hexdigest())")
	want := fmt.Sprintf("%d %s\n", utf8.RuneCountInString(text), hex.EncodeToString(sum[:]))
	if string(res.Stdout) != want {
		t.Fatalf("got %q want %q", res.Stdout, want)
	}
}

func TestStdoutStderrCapture(t *testing.T) {
	p := start(t, Config{})
	res := ok(t, p, `import os, sys
print("out1", flush=True)  # stdout is block-buffered, as in a script
print("err1", file=sys.stderr)
os.write(1, b"raw-out\n")
os.write(2, b"raw-err\n")
sys.stdout.flush()
os.system("echo hi; echo err >&2")
print("out2")`)
	if got := string(res.Stdout); got != "out1\nraw-out\nhi\nout2\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(res.Stderr); got != "err1\nraw-err\nerr\n" {
		t.Errorf("stderr %q", got)
	}
	// the next cell starts clean
	if res := ok(t, p, "pass"); len(res.Stdout)+len(res.Stderr) != 0 {
		t.Errorf("leftover output %q %q", res.Stdout, res.Stderr)
	}
}

func TestOutputBetweenCellsGoesToNextCell(t *testing.T) {
	dir := t.TempDir()
	p := start(t, Config{Dir: dir})
	res := ok(t, p, `import subprocess
subprocess.Popen(["sh", "-c", "while [ ! -e go ]; do sleep 0.01; done; echo late; touch done"])
print("first")`)
	if string(res.Stdout) != "first\n" {
		t.Fatalf("first cell %q", res.Stdout)
	}
	if err := os.WriteFile(dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := os.Stat(dir + "/done"); return err == nil })
	if res := ok(t, p, "print('second')"); string(res.Stdout) != "late\nsecond\n" {
		t.Fatalf("second cell %q", res.Stdout)
	}
}

func TestForgedProtocolOutputIsInert(t *testing.T) {
	p := start(t, Config{})
	// Anything a cell writes to fd 1/2 or its children inherit is output,
	// however much it looks like a frame, and fds 3/4 are not there.
	res := run(t, p, `import os, json, struct
msg = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"exit_code": 0, "error": "", "marker_out": False, "marker_err": False}}).encode()
os.write(1, struct.pack(">I", len(msg)) + msg)
for fd in (3, 4):
    try:
        os.write(fd, struct.pack(">I", len(msg)) + msg)
        print("fd", fd, "writable")
    except OSError as e:
        print("fd", fd, "closed")
print("done")`)
	if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "fd 3 closed\nfd 4 closed\ndone\n") {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, `"exit_code": 0`) {
		t.Fatalf("the forged frame should be plain output: %q", res.Stdout)
	}
	res = ok(t, p, "print('after')")
	if string(res.Stdout) != "after\n" {
		t.Fatalf("next cell stdout %q", res.Stdout)
	}
}

func TestException(t *testing.T) {
	p := start(t, Config{})
	res := run(t, p, "x = 1\ndef f():\n    raise ValueError('test')\nf()")
	if res.ExitCode != 1 || res.Error != "ValueError: test" || res.EndedBy != ending.Exit {
		t.Fatalf("exit %d error %q ended %v", res.ExitCode, res.Error, res.EndedBy)
	}
	se := string(res.Stderr)
	for _, want := range []string{"Traceback (most recent call last):", `File "<cell 1>", line 4, in <module>`, `File "<cell 1>", line 3, in f`, "raise ValueError('test')", "ValueError: test"} {
		if !strings.Contains(se, want) {
			t.Errorf("stderr lacks %q:\n%s", want, se)
		}
	}
	if strings.Contains(se, "rlm-driver") {
		t.Errorf("driver frames in the traceback:\n%s", se)
	}
	// syntax errors too, and state survives
	res = run(t, p, "def (:")
	if res.ExitCode != 1 || !strings.HasPrefix(res.Error, "SyntaxError:") || !strings.Contains(string(res.Stderr), "<cell 2>") {
		t.Fatalf("syntax error: exit %d error %q stderr %q", res.ExitCode, res.Error, res.Stderr)
	}
	if found, js := variable(t, p, "x"); !found || js != "1" {
		t.Fatalf("x = %v %s", found, js)
	}
}

func TestSystemExit(t *testing.T) {
	p := start(t, Config{})
	ok(t, p, "keep = 'yes'")
	for _, c := range []struct {
		code   string
		exit   int
		stderr string
	}{
		{"import sys; sys.exit(3)", 3, ""},
		{"import sys; sys.exit()", 0, ""},
		{"import sys; sys.exit(0)", 0, ""},
		{"import sys; sys.exit('bye now')", 1, "bye now\n"},
		{"raise SystemExit(7)", 7, ""},
		{"exit(4)", 4, ""},
		{"import sys; sys.exit(True)", 1, ""},
		{"import sys; sys.exit(-1)", 255, ""},
	} {
		res := run(t, p, c.code)
		if res.ExitCode != c.exit || string(res.Stderr) != c.stderr || res.EndedBy != ending.Exit || res.StateLost {
			t.Errorf("%s: exit %d stderr %q ended %v lost %v", c.code, res.ExitCode, res.Stderr, res.EndedBy, res.StateLost)
		}
	}
	if res := ok(t, p, "print(keep)"); string(res.Stdout) != "yes\n" {
		t.Fatalf("state after exits: %q", res.Stdout)
	}
}

func TestCallbacks(t *testing.T) {
	p := start(t, Config{Context: &core.Context{Data: []byte("the big context"), Kind: "text"}})
	var mu sync.Mutex
	var got []core.Query
	cb := func(ctx context.Context, c core.Query) ([]string, error) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
		if len(c.Prompts) > 0 && c.Prompts[0] == "fail" {
			return nil, errors.New("model exploded")
		}
		out := make([]string, len(c.Prompts))
		for i, pr := range c.Prompts {
			out[i] = c.Kind + ":" + strings.ToUpper(pr)
		}
		return out, nil
	}
	res := runT(t, p, `a = llm_query("hello", model="small")
b = llm_query_batched(["p1", "p2", "p3"])
c = rlm_query("task one")
d = rlm_query("task two", ctx={"k": [1]})
e = rlm_query_batched(["t1", "t2"], ["c1", None])
print(a, b, c, d, e)
try:
    llm_query("fail")
except LLMQueryError as ex:
    print("caught", isinstance(ex, RuntimeError), ex)`, 30*time.Second, cb)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s\n%s", res.ExitCode, res.Error, res.Stderr)
	}
	want := "llm_query:HELLO ['llm_query:P1', 'llm_query:P2', 'llm_query:P3'] rlm_query:TASK ONE rlm_query:TASK TWO ['rlm_query:T1', 'rlm_query:T2']\ncaught True model exploded\n"
	if string(res.Stdout) != want {
		t.Fatalf("stdout %q\nwant   %q", res.Stdout, want)
	}
	if len(got) != 6 {
		t.Fatalf("%d callbacks, want 6", len(got))
	}
	check := func(i int, kind string, prompts, contexts []string, has []bool, model string) {
		t.Helper()
		c := got[i]
		if c.Kind != kind || fmt.Sprint(c.Prompts) != fmt.Sprint(prompts) || fmt.Sprint(c.Contexts) != fmt.Sprint(contexts) ||
			fmt.Sprint(c.HasContext) != fmt.Sprint(has) || c.Model != model {
			t.Errorf("callback %d = %v", i, c)
		}
	}
	check(0, "llm_query", []string{"hello"}, nil, nil, "small")
	check(1, "llm_query", []string{"p1", "p2", "p3"}, nil, nil, "")
	// The unchanged session context is not sent back: has_context=false
	// tells the host to use its own copy.
	check(2, "rlm_query", []string{"task one"}, []string{""}, []bool{false}, "")
	check(3, "rlm_query", []string{"task two"}, []string{`{"k": [1]}`}, []bool{true}, "")
	check(4, "rlm_query", []string{"t1", "t2"}, []string{"c1", ""}, []bool{true, false}, "")
}

func TestNoCallbackConfigured(t *testing.T) {
	p := start(t, Config{})
	res := run(t, p, "llm_query('x')")
	if res.ExitCode != 1 || res.Error != "LLMQueryError: llm_query is not available: this session has no LLM configured" {
		t.Fatalf("exit %d error %q", res.ExitCode, res.Error)
	}
	// rlm_query without any context: has_context false
	var c *core.Query
	runT(t, p, "rlm_query('t')", 10*time.Second, func(_ context.Context, cb core.Query) ([]string, error) {
		c = &cb
		return []string{"r"}, nil
	})
	if c == nil || len(c.HasContext) != 1 || c.HasContext[0] {
		t.Fatalf("callback %v", c)
	}
}

func TestCallbackFromThreadsAndWrongCount(t *testing.T) {
	p := start(t, Config{})
	var n sync.Mutex
	calls := 0
	cb := func(_ context.Context, c core.Query) ([]string, error) {
		n.Lock()
		calls++
		n.Unlock()
		if c.Prompts[0] == "short" {
			return nil, nil
		}
		return []string{"r-" + c.Prompts[0]}, nil
	}
	res := runT(t, p, `import threading
out = {}
def w(i):
    out[i] = llm_query(str(i))
ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print(sorted(out.values()))
try:
    llm_query("short")
except LLMQueryError as e:
    print("E", e)`, 30*time.Second, cb)
	want := "['r-0', 'r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6', 'r-7']\nE llm_query: the host returned 0 results for 1 prompts\n"
	if string(res.Stdout) != want || calls != 9 {
		t.Fatalf("calls %d stdout %q stderr %q", calls, res.Stdout, res.Stderr)
	}
}

func TestTimeoutInterruptKeepsState(t *testing.T) {
	p := start(t, Config{})
	ok(t, p, "before = 'kept'")
	pid := p.Pid()
	res := runT(t, p, "import time\ntime.sleep(30)", 300*time.Millisecond, nil)
	if res.EndedBy != ending.Timeout || res.StateLost || !strings.Contains(res.Error, "timed out after") {
		t.Fatalf("ended %v lost %v error %q", res.EndedBy, res.StateLost, res.Error)
	}
	if !strings.Contains(string(res.Stderr), "KeyboardInterrupt") {
		t.Errorf("stderr %q", res.Stderr)
	}
	if p.Pid() != pid {
		t.Fatal("the interpreter was restarted")
	}
	if res := ok(t, p, "print(before)"); string(res.Stdout) != "kept\n" {
		t.Fatalf("state: %q", res.Stdout)
	}
}

func TestImmediateTimeoutNeverLosesState(t *testing.T) {
	// The SIGINT may land before the driver has started the cell: it must
	// still interrupt that cell, not be ignored as an idle signal (which
	// would end in a hard kill after the grace period).
	p := start(t, Config{Grace: 5 * time.Second})
	ok(t, p, "keep = 1")
	for i := range 20 {
		res := runT(t, p, "import time\ntime.sleep(30)", time.Microsecond, nil)
		if res.EndedBy != ending.Timeout || res.StateLost {
			t.Fatalf("run %d: ended %v lost %v error %q", i, res.EndedBy, res.StateLost, res.Error)
		}
	}
	if found, _ := variable(t, p, "keep"); !found {
		t.Fatal("state lost")
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	p := start(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := p.Execute(ctx, "ran = True", 0, nil)
	if err != nil || res.EndedBy != ending.Cancelled {
		t.Fatalf("%v %v", res, err)
	}
	if found, _ := variable(t, p, "ran"); found {
		t.Fatal("the cell ran")
	}
}

func TestTimeoutHardKillRestarts(t *testing.T) {
	p := start(t, Config{Grace: 300 * time.Millisecond, Context: &core.Context{Data: []byte("ctx survives")}})
	ok(t, p, "before = 1")
	pid := p.Pid()
	res := runT(t, p, `import time
print("looping", flush=True)
while True:
    try:
        time.sleep(1)
    except KeyboardInterrupt:
        pass`, 200*time.Millisecond, nil)
	if res.EndedBy != ending.Timeout || !res.StateLost || res.Signal != "SIGKILL" {
		t.Fatalf("ended %v lost %v signal %q error %q", res.EndedBy, res.StateLost, res.Signal, res.Error)
	}
	if string(res.Stdout) != "looping\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if p.Pid() == pid || proctree.Alive(pid) {
		t.Fatalf("old driver %d still there (new %d)", pid, p.Pid())
	}
	if found, _ := variable(t, p, "before"); found {
		t.Error("state should be lost")
	}
	if res := ok(t, p, "print(context)"); string(res.Stdout) != "ctx survives\n" {
		t.Fatalf("context after restart %q", res.Stdout)
	}
}

func TestTimeoutIgnoringSIGINT(t *testing.T) {
	p := start(t, Config{Grace: 200 * time.Millisecond})
	res := runT(t, p, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)", 200*time.Millisecond, nil)
	if res.EndedBy != ending.Timeout || !res.StateLost {
		t.Fatalf("ended %v lost %v error %q", res.EndedBy, res.StateLost, res.Error)
	}
	ok(t, p, "pass")
}

func TestDriverKilledExternally(t *testing.T) {
	p := start(t, Config{})
	pid := p.Pid()
	type out struct {
		res *core.Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		r, err := p.Execute(context.Background(), "import time\nprint('started', flush=True)\ntime.sleep(60)", 0, nil)
		ch <- out{r, err}
	}()
	waitFor(t, hasChildThreadsSleeping(pid))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var o out
	select {
	case o = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("Execute hangs after the driver was killed")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	r := o.res
	if r.EndedBy != ending.Crashed || !r.StateLost || r.Signal != "SIGKILL" || !strings.Contains(r.Error, "died") {
		t.Fatalf("ended %v lost %v signal %q error %q", r.EndedBy, r.StateLost, r.Signal, r.Error)
	}
	if res := ok(t, p, "print(2+2)"); string(res.Stdout) != "4\n" {
		t.Fatalf("after crash: %q", res.Stdout)
	}
}

func TestOsExitCrash(t *testing.T) {
	p := start(t, Config{})
	res := run(t, p, "import os\nprint('bye', flush=True)\nos._exit(5)")
	if res.EndedBy != ending.Crashed || res.ExitCode != 5 || !res.StateLost || string(res.Stdout) != "bye\n" {
		t.Fatalf("ended %v exit %d lost %v stdout %q error %q", res.EndedBy, res.ExitCode, res.StateLost, res.Stdout, res.Error)
	}
	ok(t, p, "pass")
}

func TestIdleSIGINTIgnored(t *testing.T) {
	p := start(t, Config{})
	ok(t, p, "v = 3")
	for range 5 {
		if err := syscall.Kill(p.Pid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	// the signals are handled (and ignored) before the next request is read
	res := ok(t, p, "print(v)")
	if string(res.Stdout) != "3\n" {
		t.Fatalf("%q", res.Stdout)
	}
}

func TestSegfaultCrash(t *testing.T) {
	p := start(t, Config{Context: &core.Context{Data: []byte("still here")}})
	res := run(t, p, "import ctypes\nctypes.string_at(0)")
	if res.EndedBy != ending.Crashed || res.Signal != "SIGSEGV" || !res.StateLost {
		t.Fatalf("ended %v signal %q lost %v error %q", res.EndedBy, res.Signal, res.StateLost, res.Error)
	}
	if res := ok(t, p, "print(context)"); string(res.Stdout) != "still here\n" {
		t.Fatalf("%q", res.Stdout)
	}
}

func TestForkedChildDoesNotSpeak(t *testing.T) {
	p := start(t, Config{})
	res := ok(t, p, "import os\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n    print('parent')")
	if got := string(res.Stdout); got != "child\nparent\n" {
		t.Fatalf("stdout %q", got)
	}
	// a forked child must not use the host channel
	res = runT(t, p, `import os
pid = os.fork()
if pid == 0:
    try:
        llm_query("x")
    except LLMQueryError as e:
        print("child:", e, flush=True)
    os._exit(0)
os.waitpid(pid, 0)`, 30*time.Second, func(context.Context, core.Query) ([]string, error) { return []string{"r"}, nil })
	if got := string(res.Stdout); got != "child: llm_query is not available in a forked child process\n" {
		t.Fatalf("fork callback: %q %q", got, res.Stderr)
	}
	if res := ok(t, p, "print('next')"); string(res.Stdout) != "next\n" {
		t.Fatalf("next %q", res.Stdout)
	}
}

func TestBackgroundChildrenKilledAtClose(t *testing.T) {
	p := start(t, Config{})
	res := ok(t, p, `import subprocess, os
a = subprocess.Popen(['sleep', '300'])
b = subprocess.Popen(['sleep', '301'], start_new_session=True)
os.system('sleep 302 &')
os.system('setsid sleep 303 &')
print(a.pid, b.pid)`)
	var pa, pb int
	if _, err := fmt.Sscan(string(res.Stdout), &pa, &pb); err != nil {
		t.Fatal(err)
	}
	others := sleepers(t, "302", "303")
	pids := append([]int{pa, pb}, others...)
	for _, pid := range pids {
		if !proctree.Alive(pid) {
			t.Fatalf("sleeper %d not running", pid)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			t.Errorf("process %d survived Close: %s", pid, st)
		}
	}
	if _, err := p.Execute(context.Background(), "pass", 0, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestBackgroundChildrenKilledAtHardKill(t *testing.T) {
	p := start(t, Config{Grace: 100 * time.Millisecond})
	res := runT(t, p, `import subprocess, signal, time
a = subprocess.Popen(['sleep', '300'], start_new_session=True)
print(a.pid, flush=True)
signal.signal(signal.SIGINT, signal.SIG_IGN)
time.sleep(30)`, 300*time.Millisecond, nil)
	var pa int
	if _, err := fmt.Sscan(string(res.Stdout), &pa); err != nil {
		t.Fatalf("%v: %q", err, res.Stdout)
	}
	if !res.StateLost {
		t.Fatal("no hard kill")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pa)); err == nil {
		t.Errorf("setsid child %d survived the hard kill", pa)
	}
}

func TestRlimits(t *testing.T) {
	p := start(t, Config{Rlimits: []Rlimit{{Resource: unix.RLIMIT_AS, Cur: 1 << 30}}})
	res := run(t, p, "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS))\nx = bytearray(2 << 30)")
	if res.ExitCode != 1 || res.Error != "MemoryError" || string(res.Stdout) != "(1073741824, 1073741824)\n" {
		t.Fatalf("exit %d error %q stdout %q", res.ExitCode, res.Error, res.Stdout)
	}
	ok(t, p, "y = 1")
}

func TestOutputCap(t *testing.T) {
	p := start(t, Config{MaxOutputBytes: 1000})
	res := ok(t, p, "import sys\nsys.stdout.write('A' * 100 + 'x' * (10 * 1024 * 1024 - 200) + 'Z' * 100)\nprint('e' * 3000, file=sys.stderr)")
	total := int64(10 * 1024 * 1024)
	if res.StdoutOmitted != total-1000 {
		t.Fatalf("omitted %d want %d", res.StdoutOmitted, total-1000)
	}
	notice := capbuf.Notice(total - 1000)
	if len(res.Stdout) != 1000+len(notice) || !strings.HasPrefix(res.Stdout, strings.Repeat("A", 100)) ||
		!strings.HasSuffix(res.Stdout, strings.Repeat("Z", 100)) || !strings.Contains(res.Stdout, notice) {
		t.Fatalf("stdout %d bytes: %q...", len(res.Stdout), res.Stdout[:120])
	}
	if res.StderrOmitted != 3001-1000 {
		t.Fatalf("stderr omitted %d", res.StderrOmitted)
	}
	// under the cap: untouched
	if res := ok(t, p, "print('x' * 998)"); res.StdoutOmitted != 0 || len(res.Stdout) != 999 {
		t.Fatalf("small output %d %d", len(res.Stdout), res.StdoutOmitted)
	}
}

func TestMarkerSplitAcrossReads(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(r, 1<<20)
	m := []byte("\x1e<rlm-cell-end:abc>\x1e")
	s.arm(m)
	// write byte by byte: every split point of the marker
	data := append(append([]byte("hello \x1e<rlm-cell-"), m...), "next"...)
	for i := range data {
		s.feed(data[i : i+1])
	}
	c := <-s.done
	if got := c.Bytes(); string(got) != "hello \x1e<rlm-cell-" {
		t.Fatalf("cell output %q", got)
	}
	w.Close()
	<-s.eof
	if got := s.take().Bytes(); string(got) != "next" {
		t.Fatalf("after marker %q", got)
	}
}

func TestInterruptFromAnotherGoroutine(t *testing.T) {
	p := start(t, Config{})
	ok(t, p, "v = 'still here'")
	if err := p.Interrupt(); err != nil { // nothing running: no effect
		t.Fatal(err)
	}
	pid := p.Pid()
	ch := make(chan *core.Result, 1)
	go func() {
		ch <- runT(t, p, "import time\nprint('go', flush=True)\ntime.sleep(60)", 0, nil)
	}()
	waitFor(t, hasChildThreadsSleeping(pid))
	if err := p.Interrupt(); err != nil {
		t.Fatal(err)
	}
	res := <-ch
	if res.EndedBy != ending.Cancelled || res.StateLost || string(res.Stdout) != "go\n" {
		t.Fatalf("ended %v lost %v stdout %q error %q", res.EndedBy, res.StateLost, res.Stdout, res.Error)
	}
	if res := ok(t, p, "print(v)"); string(res.Stdout) != "still here\n" {
		t.Fatalf("%q", res.Stdout)
	}
}

func TestContextCancel(t *testing.T) {
	p := start(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pid := p.Pid()
	go func() {
		sleeping := hasChildThreadsSleeping(pid)
		for deadline := time.Now().Add(10 * time.Second); !sleeping() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel() // also on timeout: the assertions below then fail
	}()
	res, err := p.Execute(ctx, "import time\ntime.sleep(60)", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.EndedBy != ending.Cancelled || res.StateLost {
		t.Fatalf("ended %v lost %v", res.EndedBy, res.StateLost)
	}
}

func TestTimeoutDuringCallbackCancelsIt(t *testing.T) {
	p := start(t, Config{})
	res := runT(t, p, "x = 5\ntry:\n    llm_query('slow')\nexcept LLMQueryError as e:\n    print('E', e)", 300*time.Millisecond,
		func(ctx context.Context, _ core.Query) ([]string, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	// the interrupt is raised after the callback returns, so the cell sees
	// KeyboardInterrupt rather than the callback's error
	if res.EndedBy != ending.Timeout || res.StateLost || !strings.Contains(string(res.Stderr), "KeyboardInterrupt") {
		t.Fatalf("ended %v lost %v stdout %q stderr %q", res.EndedBy, res.StateLost, res.Stdout, res.Stderr)
	}
	if found, js := variable(t, p, "x"); !found || js != "5" {
		t.Fatal("state lost")
	}
}

func TestNoAutoPrintAndPickleMain(t *testing.T) {
	p := start(t, Config{})
	if res := ok(t, p, "1 + 1"); len(res.Stdout) != 0 {
		t.Fatalf("expression was printed: %q", res.Stdout)
	}
	res := ok(t, p, "import pickle\nclass P:\n    pass\nprint(type(pickle.loads(pickle.dumps(P()))).__name__, __name__)")
	if string(res.Stdout) != "P __main__\n" {
		t.Fatalf("%q", res.Stdout)
	}
}

func TestClosedStdoutStillEnds(t *testing.T) {
	p := start(t, Config{})
	res := ok(t, p, "import os, sys\nprint('a', flush=True)\nos.close(1)\nos.close(2)")
	if string(res.Stdout) != "a\n" {
		t.Fatalf("%q", res.Stdout)
	}
	ok(t, p, "x = 1")
}

// --- helpers -------------------------------------------------------------

// hasChildThreadsSleeping reports whether the driver's main thread is in
// time.sleep (a timed wait in the kernel, not the pipe read of an idle
// driver): it polls /proc, not the clock. Python 3.11+ sleeps in
// clock_nanosleep, older ones in select.
func hasChildThreadsSleeping(pid int) func() bool {
	return func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
		w := string(b)
		return err == nil && (strings.Contains(w, "hrtimer") || strings.Contains(w, "select") || strings.Contains(w, "poll"))
	}
}

func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// sleepers finds running "sleep ARG" processes.
func sleepers(tb testing.TB, args ...string) []int {
	tb.Helper()
	var out []int
	for _, a := range args {
		want := "sleep\x00" + a + "\x00"
		var found int
		waitFor(tb, func() bool {
			files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && string(b) == want {
					found, _ = strconv.Atoi(filepath.Base(filepath.Dir(f)))
					return true
				}
			}
			return false
		})
		out = append(out, found)
	}
	return out
}

// A cell's final expression comes back as its repr, as in a notebook; any
// other ending, a None and a trailing semicolon give none.
func TestCellValue(t *testing.T) {
	p := start(t, Config{MaxOutputBytes: 1000})
	value := func(code string) *string {
		t.Helper()
		return ok(t, p, code).Value
	}
	for _, c := range []struct {
		code string
		want string // "-" for none
	}{
		{"1 + 1", "2"},
		{"x = 5", "-"},
		{"print('hi')\nx * 2", "10"},
		{"'a' + 'b'", "'ab'"},
		{"None", "-"},
		{"print(1)", "-"},
		{"x;", "-"},
		{"x ; # hidden", "-"},
		{"(x +\n 1)", "6"},
		{"if x:\n    x", "-"},
		{"def f():\n    return 3\nf()", "3"},
		{"{'é': [1, 2]}", "{'é': [1, 2]}"},
		{"class R:\n    def __repr__(self): raise ValueError('no')\nR()", "<unrepresentable R: ValueError>"},
		{"x\r\n", "5"},
		{"from __future__ import annotations\nx", "5"},
	} {
		got := value(c.code)
		switch {
		case c.want == "-" && got != nil:
			t.Errorf("%q: value %q, want none", c.code, *got)
		case c.want != "-" && (got == nil || *got != c.want):
			t.Errorf("%q: value %v, want %q", c.code, got, c.want)
		}
	}
	// capped like output, head and tail kept
	v := value("'a' * 5000 + 'z' * 5000")
	if v == nil || len(*v) > 1100 || !strings.HasPrefix(*v, "'aaa") || !strings.HasSuffix(*v, "zzz'") || !strings.Contains(*v, "bytes omitted") {
		t.Fatalf("long value: %v", v)
	}
	// a failing cell has none; tracebacks still name the cell, not the driver
	res := run(t, p, "x\n1/0")
	if res.Value != nil || !strings.Contains(res.Error, "ZeroDivisionError") || !strings.Contains(string(res.Stderr), `File "<cell`) || strings.Contains(string(res.Stderr), "rlm-driver") {
		t.Fatalf("value %v error %q stderr %s", res.Value, res.Error, res.Stderr)
	}
	// the value is computed in the cell: a timeout interrupts a slow repr
	res = runT(t, p, "class S:\n    def __repr__(self):\n        import time; time.sleep(30)\nS()", 300*time.Millisecond, nil)
	if res.EndedBy != ending.Timeout || res.Value != nil {
		t.Fatalf("slow repr: ended %v value %v", res.EndedBy, res.Value)
	}
}
