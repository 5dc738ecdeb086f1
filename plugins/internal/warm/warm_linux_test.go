package warm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// python returns the real interpreter and its prefix, or skips.
func python(t testing.TB) (string, string) {
	exe, prefix, err := FindPython()
	if err != nil {
		t.Skip("python3 not installed")
	}
	if err := isolate.Available(isolate.LevelNamespace); err != nil {
		t.Skip(err)
	}
	return exe, prefix
}

// newPool starts a pool of n sandboxes and waits until they are all up.
func newPool(t testing.TB, mode Mode, n int, disk int64) *Pool {
	exe, prefix := python(t)
	p := NewPool(Config{Mode: mode, Python: exe, ReadOnlyPaths: []string{prefix}, DiskBytes: disk}, n)
	t.Cleanup(p.Close)
	p.Fill()
	for i := 0; ; i++ {
		p.mu.Lock()
		up, healthy, retry := len(p.all), p.healthy, !p.retryAt.IsZero()
		p.mu.Unlock()
		if up == n && healthy {
			return p
		}
		if retry {
			t.Fatal("the pool's sandboxes do not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run runs code (python, or bash in ModeExec) in p with the given files.
func run(t testing.TB, p *Pool, code string, l core.Limits, files ...core.File) *core.Result {
	t.Helper()
	name, interp := "main.py", p.cfg.Python
	if p.cfg.Mode == ModeExec {
		name, interp = "main.sh", "/usr/bin/bash"
	}
	l.Isolation = "namespace"
	req := core.Program{Code: code, Files: files, Limits: l, ReturnFiles: true}
	ws, err := program.NewWorkspace(req, name)
	if err != nil {
		t.Fatal(err)
	}
	env := append(program.BaseEnv(ws.Dir), "PYTHONDONTWRITEBYTECODE=1")
	res, err := program.Exec(context.Background(), program.Command{
		Argv: []string{interp, ws.CodePath, "arg1"}, Dir: ws.Dir, Env: env, Limits: l,
		Spawner: p.Spawner(context.Background(), Run{Limits: l, ReturnFiles: true}),
	})
	if err != nil {
		ws.Remove()
		t.Fatal(err)
	}
	ws.Finish(res)
	return res
}

func TestRunsLikeAScriptInTheSandbox(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	r := run(t, p, `import os, sys
print(__name__, os.path.basename(__file__), sys.argv[1:], os.getcwd(), os.environ["OUTPUT_DIR"], os.getuid())
print(open("in/data.txt").read())
open("out.txt", "w").write("made")
sys.exit(3)`, core.Limits{}, core.File{Path: "in/data.txt", Data: []byte("input")})
	want := "__main__ main.py ['arg1'] /workspace /workspace 65534\ninput\n"
	if r.Stdout != want || r.ExitCode != 3 || r.Isolation != "namespace" || r.EndedBy != ending.Exit {
		t.Fatalf("stdout %q stderr %q exit %d isolation %s ended %s", r.Stdout, r.Stderr, r.ExitCode, r.Isolation, r.EndedBy)
	}
	if len(r.Files) != 1 || r.Files[0].Path != "out.txt" || string(r.Files[0].Data) != "made" || r.Files[0].Change != "created" {
		t.Fatalf("files %v", r.Files)
	}
	r = run(t, p, "raise ValueError('boom')", core.Limits{})
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "ValueError: boom") || !strings.Contains(r.Stderr, `File "/workspace/main.py", line 1`) {
		t.Fatalf("traceback: exit %d stderr %q", r.ExitCode, r.Stderr)
	}
}

func TestExecModeRunsBash(t *testing.T) {
	p := newPool(t, ModeExec, 1, 0)
	r := run(t, p, `echo "$0 $1 $PWD $(id -u)"; cat in.txt; echo made > out.txt; exit 4`, core.Limits{}, core.File{Path: "in.txt", Data: []byte("input\n")})
	if r.Stdout != "/workspace/main.sh arg1 /workspace 65534\ninput\n" || r.ExitCode != 4 || len(r.Files) != 1 || string(r.Files[0].Data) != "made\n" {
		t.Fatalf("stdout %q stderr %q exit %d files %v", r.Stdout, r.Stderr, r.ExitCode, r.Files)
	}
	// Neither kill -9 of the parent (the worker, pid 1) nor kill -9 -1
	// reaches the worker: the script goes on, and the sandbox serves on.
	_, workers := p.Sandboxes()
	r = run(t, p, "kill -9 $PPID; kill -STOP 1; kill -9 -1; echo survived $PPID", core.Limits{})
	if r.Stdout != "survived 1\n" {
		t.Fatalf("kill -9 $PPID: %q %s %q", r.Stdout, r.EndedBy, r.Stderr)
	}
	r = run(t, p, "echo after", core.Limits{})
	if _, now := p.Sandboxes(); r.Stdout != "after\n" || len(now) != 1 || now[0] != workers[0] {
		t.Fatalf("after kill -9 $PPID: %q %q, workers %v -> %v", r.Stdout, r.Stderr, workers, now)
	}
}
