package daemon

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
)

// startPythonDaemon serves a daemon with the real python plugin (built
// into a temporary directory) pooled.
func startPythonDaemon(t *testing.T, workers int) *running {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "../../plugins/python/cmd/rlm-plugin-python")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the python plugin: %v\n%s", err, out)
	}
	return serveIn(t, dir, workers, "python")
}

// dialPythonDaemon starts a python daemon with workers and dials it; the
// client and the minute the test's calls have are closed and cancelled
// when the test ends.
func dialPythonDaemon(t *testing.T, workers int) (*running, *client.Runtime, context.Context) {
	t.Helper()
	r := startPythonDaemon(t, workers)
	rt, err := Dial(context.Background(), r.socket, "python")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return r, rt, ctx
}

// Two sessions from the pool never share state: a variable (and a module
// imported, and a file-level change to sys) set by one client is absent
// for the next, with real Python workers.
func TestPythonPoolSessionsNeverShareState(t *testing.T) {
	r, rt, ctx := dialPythonDaemon(t, 2)
	for i := 0; i < 4; i++ {
		s, err := rt.OpenSession(ctx, core.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, err := s.Variable(ctx, "secret"); err != nil || found {
			t.Fatalf("session %d: a variable from an earlier client is visible (found=%v, err=%v)", i, found, err)
		}
		res, err := s.Execute(ctx, fmt.Sprintf("import sys\nprint(hasattr(sys, 'rlm_mark'))\nsecret = 'client-%d'\nsys.rlm_mark = 1", i), 0)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("session %d: %v %+v", i, err, res)
		}
		if res.Stdout != "False\n" {
			t.Fatalf("session %d: the interpreter was used before (sys.rlm_mark set): %q", i, res.Stdout)
		}
		if v, found, err := s.Variable(ctx, "secret"); err != nil || !found || string(v) != fmt.Sprintf(`"client-%d"`, i) {
			t.Fatalf("session %d: own variable: %s %v %v", i, v, found, err)
		}
		s.Close()
	}
	st, err := GetStatus(ctx, r.socket)
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Runtimes[0]; rs.WarmSessions != 4 {
		t.Fatalf("want 4 warm sessions, status %+v", rs)
	}
	// Programs run as warm cells do not share state either.
	for i := 0; i < 2; i++ {
		res, err := rt.Run(ctx, core.Program{Code: "print('seen' in globals())\nseen = 1"})
		if err != nil || res.Stdout != "False\n" {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
}

// A warm session proxied by the daemon passes a cell's files in and its
// value and produced files out; a program run as a warm cell keeps script
// semantics (no value).
func TestPythonCellFilesAndValueThroughTheDaemon(t *testing.T) {
	_, rt, ctx := dialPythonDaemon(t, 1)
	s, err := rt.OpenSession(ctx, core.SessionOptions{ReturnFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.(core.CellRunner).RunCell(ctx, core.Cell{
		Code:  "open('out.txt', 'w').write(open('in.txt').read() + '!')\nopen('out.txt').read()",
		Files: []core.File{{Path: "in.txt", Data: []byte("hi")}},
	})
	if err != nil || res.Error != "" {
		t.Fatalf("%v %+v", err, res)
	}
	if res.Value == nil || *res.Value != "'hi!'" || len(res.Files) != 1 || res.Files[0].Path != "out.txt" || string(res.Files[0].Data) != "hi!" {
		t.Fatalf("value %v files %+v", res.Value, res.Files)
	}
	prog, err := rt.Run(ctx, core.Program{Code: "print(1)\n1 + 1"})
	if err != nil || prog.Stdout != "1\n" || prog.Value != nil || prog.Backend != BackendName {
		t.Fatalf("program: %v %+v", err, prog)
	}
}

// A program run as a warm cell that ends its own interpreter ends as the
// program would without the daemon: os._exit(3) is exit 3 and a SIGTERM
// it sends itself is signal 143, with no "interpreter died" error about a
// session the caller never opened.
func TestPythonWarmProgramEndsAsAProgram(t *testing.T) {
	r, rt, ctx := dialPythonDaemon(t, 1)
	for _, c := range []struct {
		code, ended, signal string
		exit                int
	}{
		{"import os\nprint('a', flush=True)\nos._exit(3)", "exit", "", 3},
		{"import os, signal\nprint('a', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)", "signal", "SIGTERM", 143},
	} {
		res, err := rt.Run(ctx, core.Program{Code: c.code})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "a\n" || string(res.EndedBy) != c.ended || res.ExitCode != c.exit || res.Signal != c.signal || res.Error != "" || res.StateLost {
			t.Fatalf("%q: %+v", c.code, res)
		}
	}
	st, err := GetStatus(ctx, r.socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range st.Runtimes {
		if rs.Name == "python" && rs.WarmRuns != 2 {
			t.Fatalf("warm runs %d, want 2: the programs must have run as warm cells", rs.WarmRuns)
		}
	}
}
