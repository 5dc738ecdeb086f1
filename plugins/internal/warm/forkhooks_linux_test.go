package warm

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
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
