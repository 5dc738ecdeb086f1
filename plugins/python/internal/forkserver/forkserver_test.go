package forkserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/testutil"
)

func python(t testing.TB) string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("python3 not installed")
	}
	return strings.TrimSpace(string(out))
}

func start(t testing.TB) *Server {
	s, err := Start(python(t), program.BaseEnv(os.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func runCode(t testing.TB, s *Server, code string, args []string, l core.Limits) *core.Result {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.py")
	os.WriteFile(file, []byte(code), 0o644)
	env := append(program.BaseEnv(dir), "GREETING=hi")
	res, err := program.Exec(context.Background(), program.Command{
		Argv: append([]string{"python3", file}, args...), Dir: dir, Env: env, Limits: l, Spawner: s,
		Stdin: []byte("from stdin"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunsLikeAScript(t *testing.T) {
	s := start(t)
	r := runCode(t, s, `import os, sys
print(__name__, os.path.basename(__file__), sys.argv[1:], os.environ["GREETING"], os.getcwd() == os.path.dirname(__file__))
print(sys.stdin.read())
print("to stderr", file=sys.stderr)
sys.exit(5)`, []string{"a", "b"}, core.Limits{})
	want := "__main__ main.py ['a', 'b'] hi True\nfrom stdin\n"
	if r.Stdout != want || r.Stderr != "to stderr\n" || r.ExitCode != 5 {
		t.Fatalf("stdout %q stderr %q exit %d", r.Stdout, r.Stderr, r.ExitCode)
	}
}

func TestTracebackLooksLikePythons(t *testing.T) {
	r := runCode(t, start(t), "def f():\n    raise ValueError('boom')\nf()\n", nil, core.Limits{})
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "ValueError: boom") || strings.Contains(r.Stderr, "zygote") {
		t.Fatalf("exit %d stderr %q", r.ExitCode, r.Stderr)
	}
	if !strings.Contains(r.Stderr, `main.py", line 3, in <module>`) {
		t.Fatalf("traceback lacks the script frame: %q", r.Stderr)
	}
}

func TestStateIsNotShared(t *testing.T) {
	s := start(t)
	runCode(t, s, "import json\njson.leak = 1\nopen('x','w')", nil, core.Limits{})
	r := runCode(t, s, "import json\nprint(hasattr(json, 'leak'))", nil, core.Limits{})
	if r.Stdout != "False\n" {
		t.Fatalf("state leaked between runs: %q", r.Stdout)
	}
}

func TestTimeoutAndSignals(t *testing.T) {
	s := start(t)
	r := runCode(t, s, "import subprocess, time\nsubprocess.Popen(['sleep', '311'])\ntime.sleep(30)", nil, core.Limits{Wall: 300 * time.Millisecond})
	if r.EndedBy != ending.Timeout {
		t.Fatalf("%+v", r)
	}
	r = runCode(t, s, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", nil, core.Limits{})
	if r.Signal != "SIGTERM" {
		t.Fatalf("%+v", r)
	}
	// The server survives its children's deaths.
	if r := runCode(t, s, "print('alive')", nil, core.Limits{}); r.Stdout != "alive\n" {
		t.Fatalf("%q", r.Stdout)
	}
}

func TestConcurrentRuns(t *testing.T) {
	s := start(t)
	testutil.Concurrently(t, 32, func(i int) string {
		r := runCode(t, s, "import sys\nprint(sys.argv[1])", []string{string(rune('A' + i%26))}, core.Limits{})
		if r.Stdout != string(rune('A'+i%26))+"\n" {
			return r.Stdout + r.Stderr
		}
		return ""
	})
}

func TestDeadServerIsAnError(t *testing.T) {
	s, err := Start(python(t), program.BaseEnv(os.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s.Alive() {
		t.Fatal("alive after Close")
	}
	if _, err := s.Spawn([]string{"python3", "x.py"}, ".", nil, os.Stdin, os.Stdout, os.Stderr); err == nil {
		t.Fatal("spawn on a closed server succeeded")
	}
}

func BenchmarkForkServerRun(b *testing.B) {
	s := start(b)
	for i := 0; i < b.N; i++ {
		runCode(b, s, "print(1)", nil, core.Limits{})
	}
}

// A child that exits before its Wait begins still reports its status (the
// exit message used to remove the waiter's channel: "unknown child").
func TestExitBeforeWait(t *testing.T) {
	s := start(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "main.py")
	os.WriteFile(file, []byte("import sys; sys.exit(7)"), 0o644)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for i := 0; i < 3; i++ {
		p, err := s.Spawn([]string{"python3", file}, dir, program.BaseEnv(dir), null, null, null)
		if err != nil {
			t.Fatal(err)
		}
		// Let the child exit and its status arrive before waiting.
		for proctree.Alive(p.Pid()) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		ex, err := p.Wait()
		if err != nil || ex.Code != 7 {
			t.Fatalf("run %d: exit %+v, %v; want code 7", i, ex, err)
		}
	}
}
