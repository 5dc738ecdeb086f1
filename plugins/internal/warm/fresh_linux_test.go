package warm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
)

// probe is python shared by the leaking request and the one that looks:
// view() says which traces of a leak it can see.
const probe = `import builtins, ctypes, json, os, socket, sys, time
MARK = "31337%s"
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x5eed
def procs():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if MARK.encode() in open("/proc/%%s/cmdline" %% p, "rb").read():
                    out.append(p)
            except OSError:
                pass
    return out
def view():
    v = {}
    v["workdir"] = os.path.exists("/workspace/leak") or os.path.exists("/workspace/d")
    v["tmp"] = os.path.exists("/tmp/leak")
    v["devshm"] = os.path.exists("/dev/shm/leak")
    v["env"] = "RLM_LEAK" in os.environ
    v["global"] = hasattr(builtins, "rlm_leak") or "rlm_leak_mod" in sys.modules or "/leak" in sys.path
    v["process"] = bool(procs())
    v["sysv_shm"] = libc.shmget(KEY, 0, 0) != -1
    v["sysv_sem"] = libc.semget(KEY, 0, 0) != -1
    v["sysv_msg"] = libc.msgget(KEY, 0) != -1
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0rlm-leak")
        v["abstract_socket"] = True
    except OSError:
        v["abstract_socket"] = False
    s.close()
    return v
`

// leak leaves one of everything item 2 of the issue names behind, then
// shows its own view (the positive control).
const leak = probe + `
open("/workspace/leak", "w").write("x")
os.makedirs("/workspace/d/e")
open("/workspace/d/e/f", "w").write("x")
os.chmod("/workspace/d/e", 0o500)
os.chmod("/workspace/d", 0o500)
open("/tmp/leak", "w").write("x")
open("/dev/shm/leak", "w").write("x")
os.environ["RLM_LEAK"] = "1"
builtins.rlm_leak = 1
sys.modules["rlm_leak_mod"] = type(sys)("rlm_leak_mod")
sys.path.append("/leak")
IPC_CREAT = 0o1000
assert libc.shmget(KEY, 4096, IPC_CREAT | 0o600) != -1
assert libc.semget(KEY, 1, IPC_CREAT | 0o600) != -1
assert libc.msgget(KEY, IPC_CREAT | 0o600) != -1
s = socket.socket(socket.AF_UNIX)
s.bind("\0rlm-leak")
s.listen(1)
os.set_inheritable(s.fileno(), True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", ["sleep", MARK])
    os._exit(0)
while not procs():
    time.sleep(0.01)
print(json.dumps(view()))
sys.stdout.flush()
if len(sys.argv) > 1 and sys.argv[1] == "hold":
    # Holds the run, and says to the host that the view above is out.
    os.execv("/usr/bin/sleep", ["sleep", "600", "0" + MARK])
`

const look = probe + `
print(json.dumps(view()))
`

func views(t *testing.T, r *core.Result) map[string]bool {
	t.Helper()
	var v map[string]bool
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || len(v) < 10 {
		t.Fatalf("no view: %v\nstdout %q\nstderr %q\nended %s", err, r.Stdout, r.Stderr, r.EndedBy)
	}
	return v
}

func runArgs(t testing.TB, ctx context.Context, p *Pool, code string, args ...string) *core.Result {
	t.Helper()
	l := core.Limits{Isolation: "namespace", MemoryBytes: 256 << 20, MaxProcesses: 64, Wall: 120 * time.Second}
	req := core.Program{Code: code, Limits: l}
	ws, err := program.NewWorkspace(req, "main.py")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	res, err := program.Exec(ctx, program.Command{
		Argv: append([]string{p.cfg.Python, ws.CodePath}, args...), Dir: ws.Dir, Env: program.BaseEnv(ws.Dir), Limits: l,
		Spawner: p.Spawner(ctx, Run{Limits: l}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestFreshAfterEachRequest: a request leaves a file in its working
// directory (in a directory it made unwritable), /tmp and /dev/shm, a
// setsid daemon, an environment variable, Python globals, SysV shared
// memory, semaphores and message queues, and a listening abstract unix
// socket held by the daemon; it sees every one of them itself (the
// positive control). The next request in the same sandbox (a pool of one)
// sees none.
func TestFreshAfterEachRequest(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	_, workers := p.Sandboxes()
	mark := strconv.Itoa(os.Getpid())
	a := runArgs(t, context.Background(), p, fmt.Sprintf(leak, mark))
	for k, seen := range views(t, a) {
		if !seen {
			t.Errorf("positive control: the leaking request does not see its own %s", k)
		}
	}
	b := runArgs(t, context.Background(), p, fmt.Sprintf(look, mark))
	for k, seen := range views(t, b) {
		if seen {
			t.Errorf("the next request sees the earlier one's %s", k)
		}
	}
	if _, now := p.Sandboxes(); len(now) != 1 || now[0] != workers[0] {
		t.Fatalf("the sandbox was replaced (%v -> %v): the test proved nothing about a reset", workers, now)
	}
	if hostProcs("31337"+mark) != 0 {
		t.Fatal("the daemon outlived its request")
	}
}

// TestFreshAcrossConcurrentRequests: while one request holds all of the
// above (its daemon is seen running from the host), a concurrent request
// in the pool's other sandbox sees none of it.
func TestFreshAcrossConcurrentRequests(t *testing.T) {
	p := newPool(t, ModePython, 2, 0)
	mark := strconv.Itoa(os.Getpid()) + "1"
	ctx, cancel := context.WithCancel(context.Background())
	var a *core.Result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a = runArgs(t, ctx, p, fmt.Sprintf(leak, mark), "hold")
	}()
	// Until the holding request has printed its view (it then becomes
	// `sleep 600 031337…`): seeing only its daemon, the other request could
	// finish, and the holding one be cancelled, before it printed.
	for hostProcs("031337"+mark) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	b := runArgs(t, context.Background(), p, fmt.Sprintf(look, mark))
	cancel()
	wg.Wait()
	for k, seen := range views(t, a) {
		if !seen {
			t.Errorf("positive control: the holding request does not see its own %s", k)
		}
	}
	if a.EndedBy != ending.Cancelled {
		t.Errorf("the holding request ended by %s, want cancelled", a.EndedBy)
	}
	for k, seen := range views(t, b) {
		if seen {
			t.Errorf("a concurrent request sees the other's %s", k)
		}
	}
}

// hostProcs counts host processes whose command line contains mark.
func hostProcs(mark string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), mark) {
			n++
		}
	}
	return n
}
