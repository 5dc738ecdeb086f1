package python_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/testutil"
)

// These tests run the real plugin binary over real go-plugin RPC against the
// real interpreter.

var pluginDir string

func TestMain(m *testing.M) {
	testutil.BuildMain(m, &pluginDir, "./cmd/rlm-plugin-python")
}

func startRuntime(t testing.TB) *client.Runtime {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	p, err := launch.Launch(filepath.Join(pluginDir, "rlm-plugin-python"))
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime("python", "native", p.Client, p.Kill, isolate.Available)
	t.Cleanup(rt.Close)
	return rt
}

func open(t testing.TB, rt *client.Runtime, opts core.SessionOptions) core.Session {
	t.Helper()
	s, err := rt.OpenSession(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// run executes code in s, failing the test if the call fails.
var run = plugintest.Execute

func TestStatePersistsAndVariablesReadBack(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	run(t, s, "x = 41\nd = {'a': [1, 2]}\nn = None")
	if r := run(t, s, "x += 1\nprint(x)"); r.Stdout != "42\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
	for name, want := range map[string]string{"x": "42", "d": `{"a":[1,2]}`, "n": "null"} {
		v, found, err := s.Variable(context.Background(), name)
		if err != nil || !found {
			t.Fatalf("%s: found=%v err=%v", name, found, err)
		}
		var got, exp any
		json.Unmarshal(v, &got)
		json.Unmarshal([]byte(want), &exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("%s = %s, want %s", name, v, want)
		}
	}
	if _, found, err := s.Variable(context.Background(), "missing"); err != nil || found {
		t.Fatalf("missing variable: found=%v err=%v", found, err)
	}
}

func TestLargeContextArrivesIntact(t *testing.T) {
	data := []byte(strings.Repeat("0123456789abcdef", 50<<20/16)) // 50 MiB
	data[len(data)/2] = 'Z'
	s := open(t, startRuntime(t), core.SessionOptions{Context: &core.Context{Data: data, Kind: "text"}})
	r := run(t, s, "import hashlib\nprint(len(context), context.index('Z'), hashlib.sha256(context.encode()).hexdigest())")
	want := fmt.Sprintf("%d %d %x\n", len(data), len(data)/2, sha256.Sum256(data))
	if r.Stdout != want {
		t.Fatalf("got %q want %q", r.Stdout, want)
	}
}

func TestJSONContext(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{Context: &core.Context{Data: []byte(`{"k": [1, "two"]}`), Kind: "json"}})
	if r := run(t, s, "print(type(context).__name__, context['k'][1])"); r.Stdout != "dict two\n" {
		t.Fatalf("got %q", r.Stdout)
	}
}

func TestBridgesReachGo(t *testing.T) {
	var rec plugintest.Recorder
	s := open(t, startRuntime(t), core.SessionOptions{
		Context: &core.Context{Data: []byte(plugintest.BridgeContext)},
		Bridges: rec.Bridges(),
	})
	plugintest.CheckBridges(t, s, &rec)
}

// The helpers a cell sees behave as sessiontest holds every Python to.
// A session environment no program could receive is refused at open.
func TestSessionEnvRefused(t *testing.T) { plugintest.CheckEnvRefused(t, startRuntime(t).OpenSession) }

func TestHelpers(t *testing.T) {
	plugintest.CheckHelpers(t, open(t, startRuntime(t), core.SessionOptions{
		Context: &core.Context{Data: []byte(plugintest.HelperContext)},
	}))
}

func TestBatchedQueriesRunConcurrently(t *testing.T) {
	const n, delay = 8, 300 * time.Millisecond
	s := open(t, startRuntime(t), core.SessionOptions{Bridges: core.Bridges{
		MaxConcurrent: n,
		LLMQuery: func(_ context.Context, prompt, _ string) (string, error) {
			time.Sleep(delay)
			return strings.ToUpper(prompt), nil
		},
	}})
	start := time.Now()
	r := run(t, s, fmt.Sprintf("print(llm_query_batched(['p%%d' %% i for i in range(%d)]))", n))
	took := time.Since(start)
	if !strings.Contains(r.Stdout, "'P0'") || !strings.Contains(r.Stdout, fmt.Sprintf("'P%d'", n-1)) {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	// Sequential would take n*delay = 2.4 s; concurrent about one delay.
	if took > time.Duration(n/2)*delay {
		t.Fatalf("batched queries took %v: not concurrent (sequential would be %v)", took, n*delay)
	}
}

func TestCallbackErrorIsAPythonException(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{Bridges: core.Bridges{
		LLMQuery: func(context.Context, string, string) (string, error) { return "", errors.New("model is down") },
	}})
	r := run(t, s, `try:
    llm_query("x")
except Exception as e:
    print("caught:", type(e).__name__, e)`)
	if !strings.Contains(r.Stdout, "caught:") || !strings.Contains(r.Stdout, "model is down") {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	r = run(t, s, `llm_query("x")`)
	if r.ExitCode != 1 || !strings.Contains(r.Error, "model is down") {
		t.Fatalf("uncaught: exit %d error %q", r.ExitCode, r.Error)
	}
}

func TestNoLLMConfiguredIsAClearError(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	r := run(t, s, `llm_query("x")`)
	if !strings.Contains(r.Error+r.Stderr, "no LLM configured") {
		t.Fatalf("error %q stderr %q", r.Error, r.Stderr)
	}
}

func TestTimeoutInterruptKeepsState(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	run(t, s, "kept = 'yes'")
	r, err := s.Execute(context.Background(), "import time\ntime.sleep(30)", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.StateLost {
		t.Fatalf("timed_out=%v state_lost=%v", r.TimedOut, r.StateLost)
	}
	if r := run(t, s, "print(kept)"); r.Stdout != "yes\n" {
		t.Fatalf("state lost after interrupt: %q", r.Stdout)
	}
}

func TestHardKillRestartsAndSaysSo(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{Context: &core.Context{Data: []byte("ctx")}})
	run(t, s, "kept = 1")
	r, err := s.Execute(context.Background(), `import time
while True:
    try:
        time.sleep(1)
    except KeyboardInterrupt:
        pass`, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || !r.StateLost {
		t.Fatalf("timed_out=%v state_lost=%v", r.TimedOut, r.StateLost)
	}
	if r := run(t, s, "print('kept' in globals(), context)"); r.Stdout != "False ctx\n" {
		t.Fatalf("after restart: %q %q", r.Stdout, r.Stderr)
	}
}

func TestCancelInterruptsTheCell(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	r, err := s.Execute(ctx, "import time\nx = 5\ntime.sleep(30)", 0)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if err == nil && r.EndedBy != "cancelled" {
		t.Fatalf("ended_by %q", r.EndedBy)
	}
	if r := run(t, s, "print(x)"); r.Stdout != "5\n" {
		t.Fatalf("state after cancel: %q", r.Stdout)
	}
}

func TestPluginKilledMidCellIsAnError(t *testing.T) {
	p, err := launch.Launch(filepath.Join(pluginDir, "rlm-plugin-python"))
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime("python", "native", p.Client, p.Kill, isolate.Available)
	defer rt.Close()
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(context.Background(), "import time; time.sleep(60)", 0)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	p.Kill()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("no error after the plugin died")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Execute hung after the plugin died")
	}
}

func TestExitCodesAndOutput(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	r := run(t, s, "import os, sys\nprint('out', flush=True)\nos.system('echo sys; echo err >&2')\nsys.exit(3)")
	if r.ExitCode != 3 || r.Stdout != "out\nsys\n" || r.Stderr != "err\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	if r := run(t, s, "print('still alive')"); r.Stdout != "still alive\n" {
		t.Fatalf("after sys.exit: %q", r.Stdout)
	}
}

func TestCloseKillsBackgroundChildren(t *testing.T) {
	rt := startRuntime(t)
	// At level process the child's pid is a host pid this test can watch;
	// under namespace (hostile/session_namespace.txtar) it dies with the
	// sandbox's pid namespace.
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{Limits: core.Limits{Isolation: "process"}})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s, "import subprocess\np = subprocess.Popen(['sleep', '333'])\nprint(p.pid)")
	var pid int
	fmt.Sscan(r.Stdout, &pid)
	if pid == 0 {
		t.Fatalf("no pid: %q", r.Stdout)
	}
	s.Close()
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d survived Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A cell's final expression comes back as Value, through the plugin's
// stream.
func TestCellValue(t *testing.T) {
	s := open(t, startRuntime(t), core.SessionOptions{})
	if r := run(t, s, "1 + 1"); r.Value == nil || *r.Value != "2" {
		t.Fatalf("1 + 1: value %v", r.Value)
	}
	if r := run(t, s, "x = 1"); r.Value != nil {
		t.Fatalf("a statement has value %q", *r.Value)
	}
	if r := run(t, s, "print('a')\nprint('b')\n[x, 'y']"); r.Value == nil || *r.Value != "[1, 'y']" || r.Stdout != "a\nb\n" {
		t.Fatalf("value %v stdout %q", r.Value, r.Stdout)
	}
}

// Cells take files into the session's working directory and report the
// files they produce, at every level the plugin runs sessions at: under
// namespace the interpreter may work in a private copy (always, for a root
// caller), and the files must land in it.
func TestCellFiles(t *testing.T) {
	levels := []string{"none", "process"}
	if _, err := exec.LookPath("bwrap"); err == nil {
		levels = append(levels, "namespace")
	}
	rt := startRuntime(t)
	for _, level := range levels {
		t.Run(level, func(t *testing.T) {
			s := open(t, rt, core.SessionOptions{ReturnFiles: true, Limits: core.Limits{Isolation: level}})
			cr := s.(core.CellRunner)
			cell := func(c core.Cell) *core.Result {
				t.Helper()
				r, err := cr.RunCell(context.Background(), c)
				if err != nil {
					t.Fatalf("%q: %v", c.Code, err)
				}
				if r.Error != "" {
					t.Fatalf("%q: %s\n%s", c.Code, r.Error, r.Stderr)
				}
				return r
			}
			r := cell(core.Cell{Code: "import os\nopen('in/a.txt').read() + str(os.listdir('in'))",
				Files: []core.File{{Path: "in/a.txt", Data: []byte("hello")}}})
			if r.Value == nil || *r.Value != `"hello['a.txt']"` || len(r.Files) != 0 {
				t.Fatalf("value %v files %v", r.Value, r.Files)
			}
			r = cell(core.Cell{Code: "open('out.txt', 'w').write('made')\nopen('in/a.txt', 'a').write('!')"})
			got := map[string]string{}
			for _, f := range r.Files {
				got[f.Path] = f.Change + ":" + string(f.Data)
			}
			if len(got) != 2 || got["out.txt"] != "created:made" || got["in/a.txt"] != "modified:hello!" {
				t.Fatalf("files %v", got)
			}
			// an upload replaces the file, and the cell may change it after
			r = cell(core.Cell{Code: "open('in/a.txt', 'a').write('+')\nopen('in/a.txt').read()",
				Files: []core.File{{Path: "in/a.txt", Data: []byte("new")}}})
			if r.Value == nil || *r.Value != "'new+'" {
				t.Fatalf("replaced: value %v", r.Value)
			}
			// a path out of the directory is refused before the cell runs
			cell(core.Cell{Code: "import os\nos.symlink('/etc', 'etc')"})
			for _, name := range []string{"etc/x", "../x", "/tmp/x"} {
				_, err := cr.RunCell(context.Background(), core.Cell{Code: "ran = True", Files: []core.File{{Path: name, Data: []byte("x")}}})
				var refused *core.RefusedError
				if !errors.As(err, &refused) {
					t.Fatalf("%s: %v, want a RefusedError", name, err)
				}
			}
			if _, found, _ := s.Variable(context.Background(), "ran"); found {
				t.Fatal("a refused cell ran")
			}
		})
	}
	// Uploads count toward the disk limit of the namespace sandbox's
	// working directory: one that does not fit says so.
	if _, err := exec.LookPath("bwrap"); err == nil {
		s := open(t, rt, core.SessionOptions{Limits: core.Limits{Isolation: "namespace", MaxDiskBytes: 1 << 20}})
		_, err := s.(core.CellRunner).RunCell(context.Background(), core.Cell{Code: "1", Files: []core.File{{Path: "big", Data: make([]byte, 2<<20)}}})
		var refused *core.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "working directory is full") {
			t.Fatalf("an upload over the disk limit: %v", err)
		}
		if r := run(t, s, "import os\nos.listdir('.')"); r.Value == nil || *r.Value != "[]" {
			t.Fatalf("after the refused upload: %+v", r)
		}
	}
}

// The python plugin, launched and reached over RPC as rlm reaches it,
// keeps the contract every runtime's Run keeps (plugintest.CheckRun).
func TestRunContract(t *testing.T) {
	plugintest.CheckRun(t, startRuntime(t).Run, plugintest.Programs{
		Hello:     "import sys\nprint('hello')\nprint('oops', file=sys.stderr)",
		Exit3:     "raise SystemExit(3)",
		Echo:      "import os, sys\nsys.stdout.write(sys.stdin.read())\nprint(os.environ['RLM_CHECK'])",
		WriteFile: "open('out.txt', 'w').write('data')",
		Spin:      "while True:\n    pass",
	})
}
