package warm

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
)

// threadsAcrossForks is a program that checks threading in the process it
// runs in, then starts a thread and forks: the grandchild must get
// CPython's own after-fork hook (the thread is gone there) and still start
// and join threads. It prints what it saw.
const threadsAcrossForks = `
import os, sys
pre = "threading" in sys.modules
import threading
flag = getattr(threading, "_rlm_forked_single_threaded", None)
me = threading.current_thread()
sane = (threading.active_count() == 1 and me is threading.main_thread()
        and me.ident == threading.get_ident() and me.is_alive())
ev = threading.Event()
t = threading.Thread(target=ev.wait)
t.start()
pid = os.fork()
if pid == 0:
    ok = (threading.active_count() == 1 and threading.current_thread() is threading.main_thread()
          and not t.is_alive() and getattr(threading, "_rlm_forked_single_threaded", False) is False)
    u = threading.Thread(target=lambda: None)
    u.start()
    u.join()
    os._exit(0 if ok else 3)
st = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
ev.set()
t.join()
fast = "fast" if flag is False else "full" if flag is None else "wrong"
print(pre and sys.version_info[:2] == (3, 11), fast, sane, st, threading.active_count())
`

// TestForkHooksOfAForkServer: prepare_forks (pymain.py) replaces
// threading's after-fork hook in the fork server's own children only: a
// child sees the same thread table CPython's hook would have left, and a
// fork made by a program (which may have threads) runs the original hook.
// Run on the real interpreter, outside any sandbox, with threading
// imported before prepare_forks as site does when a .pth file needs it.
func TestForkHooksOfAForkServer(t *testing.T) {
	exe, _, err := FindPython()
	if err != nil {
		t.Skip("python3 not installed")
	}
	server := pyMain + `
import threading
prepare_forks()
installed = threading._after_fork.__code__.co_filename == "<rlm fork server>"
print(installed == (sys.version_info[:2] == (3, 11)), flush=True)
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os._exit(run_main(["prog.py"], None, sys.argv[1].encode()))
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), getattr(threading, "_rlm_forked_single_threaded", None) is not False)
`
	v, err := exec.Command(exe, "-c", "import sys; print(sys.version_info[:2] == (3, 11))").Output()
	if err != nil {
		t.Fatal(err)
	}
	// On 3.11 the child gets the cheap hook; elsewhere prepare_forks
	// leaves CPython's alone.
	want := "True\nTrue fast True 0 1\n0 True\n"
	if string(v) != "True\n" {
		want = "True\nFalse full True 0 1\n0 True\n"
	}
	out, err := exec.Command(exe, "-c", server, threadsAcrossForks).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// TestThreadsInWarmRuns: the same program through a real sandboxed
// worker. When the worker's interpreter has threading imported at start
// (this machine's pyenv python does, through a .pth file) the child got the
// cheap hook; either way the threads and a program's own fork behave as
// under python3.
func TestThreadsInWarmRuns(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	l := core.Limits{Wall: 60 * time.Second}
	for _, r := range []*core.Result{run(t, p, threadsAcrossForks, l), runStaged(t, p, threadsAcrossForks, l)} {
		f := strings.Fields(r.Stdout)
		if r.ExitCode != 0 || len(f) != 5 {
			t.Fatalf("exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		want := "full"
		if f[0] == "True" {
			want = "fast"
		}
		if f[1] != want || f[2] != "True" || f[3] != "0" || f[4] != "1" {
			t.Fatalf("want the %s hook, a sane thread table, a sane grandchild: %q", want, r.Stdout)
		}
	}
}

// TestPresetHeaders: a run whose header is made of the sandbox's own
// settings gets it from the worker's preset (it sends an empty frame),
// and every run still sees its own arguments, environment and limits: a
// run with arguments or another environment sends its header whole, and a
// run with other limits replaces the preset.
func TestPresetHeaders(t *testing.T) {
	p := newPool(t, ModePython, 1, 0, RunEnv("PYTHONDONTWRITEBYTECODE=1")...)
	code := `import os, resource, sys
print(sys.argv[1:], os.environ.get("EXTRA"), resource.getrlimit(resource.RLIMIT_CPU)[0])`
	one := func(args []string, extra []string, cpu time.Duration) string {
		t.Helper()
		l := core.Limits{Wall: 60 * time.Second, CPU: cpu, Isolation: "namespace"}
		ws := program.StagedWorkspace(core.Program{Code: code, Limits: l}, "main.py", "/workspace")
		env := append(append(program.BaseEnv(ws.Dir), "PYTHONDONTWRITEBYTECODE=1"), extra...)
		res, err := program.Exec(context.Background(), program.Command{
			Argv: append([]string{p.cfg.Python, ws.CodePath}, args...), Dir: ws.Dir, Env: env, Limits: l,
			Spawner: p.Spawner(context.Background(), Run{Limits: l, Staged: ws}),
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v %+v", err, res)
		}
		return res.Stdout
	}
	for i, c := range []struct {
		args, extra []string
		cpu         time.Duration
		want        string
		preset      bool
	}{
		{nil, nil, 0, "[] None -1\n", true},
		{nil, nil, 0, "[] None -1\n", true},
		{[]string{"a b", "c"}, nil, 0, "['a b', 'c'] None -1\n", false},
		{nil, []string{"EXTRA=x"}, 0, "[] x -1\n", false},
		{nil, nil, 0, "[] None -1\n", true},
		{nil, nil, 7 * time.Second, "[] None 7\n", true},
		{nil, nil, 7 * time.Second, "[] None 7\n", true},
		{nil, nil, 0, "[] None -1\n", true},
	} {
		before := presetRuns.Load()
		if got := one(c.args, c.extra, c.cpu); got != c.want {
			t.Fatalf("run %d: got %q, want %q", i, got, c.want)
		}
		if used := presetRuns.Load() > before; used != c.preset {
			t.Fatalf("run %d: preset used %v, want %v", i, used, c.preset)
		}
	}
}

// TestStagedWipe: the wipe after a staged run unlinks its code file first
// and lists the workspace only when something else is left; whatever a
// run leaves (its code file replaced by a directory, other files) is gone
// for the next run.
func TestStagedWipe(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	l := core.Limits{Wall: 60 * time.Second}
	list := "import os\nprint(sorted(os.listdir('.')), sorted(os.listdir('/tmp')))"
	for i, code := range []string{
		"print('only the code file')",
		"import os\nos.remove('main.py')\nos.makedirs('main.py/sub')\nopen('main.py/sub/f', 'w').write('x')\nopen('other', 'w').write('y')\nopen('/tmp/t', 'w').write('z')",
		"import os\nos.remove('main.py')",
	} {
		if r := runStaged(t, p, code, l); r.ExitCode != 0 {
			t.Fatalf("run %d: exit %d %q", i, r.ExitCode, r.Stderr)
		}
		if r := runStaged(t, p, list, l); r.Stdout != "['main.py'] []\n" {
			t.Fatalf("after run %d the workspace holds %q %q", i, r.Stdout, r.Stderr)
		}
	}
}

// TestKillBeforeHello: a deadline that runs out before the child has said
// "H" (the host no longer waits for it at start) still kills the run: Kill
// reads the child's pid first. The sandbox serves the next run.
func TestKillBeforeHello(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	_, workers := p.Sandboxes()
	for i := 0; i < 5; i++ {
		r := runStaged(t, p, "while True: pass", core.Limits{Wall: time.Millisecond})
		if r.EndedBy != ending.Timeout {
			t.Fatalf("run %d: ended by %s, want timeout (exit %d %q)", i, r.EndedBy, r.ExitCode, r.Stderr)
		}
		if r := runStaged(t, p, "print('next')", core.Limits{Wall: 60 * time.Second}); r.Stdout != "next\n" {
			t.Fatalf("after run %d: %q %q", i, r.Stdout, r.Stderr)
		}
	}
	// Killed at once, before the child can have said anything: Kill must
	// have read the child's pid (from its "H") to kill it, and Wait then
	// reports the run killed.
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	l := core.Limits{Wall: 60 * time.Second, Isolation: "namespace"}
	for i := 0; i < 5; i++ {
		ws := program.StagedWorkspace(core.Program{Code: "while True: pass", Limits: l}, "main.py", "/workspace")
		proc, err := p.Spawner(context.Background(), Run{Limits: l, Staged: ws}).Spawn(
			[]string{p.cfg.Python, ws.CodePath}, ws.Dir, program.BaseEnv(ws.Dir), null, null, null)
		if err != nil {
			t.Fatal(err)
		}
		if proc.Pid() != 0 {
			t.Fatalf("Spawn waited for the child's pid (%d)", proc.Pid())
		}
		proc.(program.Killer).Kill()
		if pid := proc.(*process).helloPid; pid <= 0 {
			t.Fatalf("Kill did not learn the child's pid (%d)", pid)
		}
		if ex, err := proc.Wait(); err != nil || ex.EndedBy != ending.Cancelled {
			t.Fatalf("killed run %d: %+v %v", i, ex, err)
		}
	}
	if r := runStaged(t, p, "print('next')", core.Limits{Wall: 60 * time.Second}); r.Stdout != "next\n" {
		t.Fatalf("after the killed runs: %q %q", r.Stdout, r.Stderr)
	}
	if _, now := p.Sandboxes(); len(now) != 1 || now[0] != workers[0] {
		t.Fatalf("the sandbox was replaced (%v -> %v)", workers, now)
	}
}
