package warm

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
func newPool(t testing.TB, mode Mode, n int, disk int64, env ...string) *Pool {
	exe, prefix := python(t)
	p := NewPool(Config{Mode: mode, Python: exe, ReadOnlyPaths: []string{prefix}, DiskBytes: disk, Env: env}, n)
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

// runStaged is run for a staged workspace (program.StagedWorkspace): the
// code file goes to the sandbox with the header, nothing is on the host.
func runStaged(t testing.TB, p *Pool, code string, l core.Limits) *core.Result {
	t.Helper()
	name, interp := "main.py", p.cfg.Python
	if p.cfg.Mode == ModeExec {
		name, interp = "main.sh", "/usr/bin/bash"
	}
	l.Isolation = "namespace"
	req := core.Program{Code: code, Limits: l, ReturnFiles: true}
	ws := program.StagedWorkspace(req, name, "/workspace")
	env := append(program.BaseEnv(ws.Dir), "PYTHONDONTWRITEBYTECODE=1")
	res, err := program.Exec(context.Background(), program.Command{
		Argv: []string{interp, ws.CodePath, "arg1"}, Dir: ws.Dir, Env: env, Limits: l,
		Spawner: p.Spawner(context.Background(), Run{Limits: l, ReturnFiles: true, Staged: ws}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ws.Finish(res)
	return res
}

// TestStagedRunIsAHostRun: a run whose code file goes to the sandbox with
// its header (a staged workspace) sees, does and brings back exactly what
// the same run from a host workspace does: its file, argv, working
// directory, exit status and produced files, a file too large omitted, the
// code file it rewrote left out, a symlink not followed.
func TestStagedRunIsAHostRun(t *testing.T) {
	progs := map[Mode]string{
		ModePython: `import os, sys
st = os.stat(__file__)
print(__name__, __file__, sys.argv, os.getcwd(), sorted(os.listdir()), oct(st.st_mode), st.st_uid == os.getuid())
open("out.txt", "w").write("made")
os.makedirs("d/e")
open("d/e/f.bin", "wb").write(bytes(range(256)))
open("big.bin", "wb").write(b"x" * 5000)
os.symlink("/etc/hostname", "link")
open(__file__, "a").write("# rewritten")
raise SystemExit(3)
`,
		ModeExec: `echo "$0 $* $PWD $(ls) $(stat -c %a main.sh)"
echo made > out.txt
mkdir -p d/e && printf 'abc' > d/e/f.bin
head -c 5000 /dev/zero > big.bin
ln -s /etc/hostname link
echo '# rewritten' >> main.sh
exit 3
`,
	}
	for mode, code := range progs {
		p := newPool(t, mode, 1, 0)
		l := core.Limits{Wall: 60 * time.Second, MaxFileBytes: 4096}
		host, staged := run(t, p, code, l), runStaged(t, p, code, l)
		if host.ExitCode != 3 || host.Stdout == "" {
			t.Fatalf("%s, host workspace: exit %d %q %q", mode, host.ExitCode, host.Stdout, host.Stderr)
		}
		if staged.Stdout != host.Stdout || staged.Stderr != host.Stderr || staged.ExitCode != host.ExitCode || staged.EndedBy != host.EndedBy {
			t.Fatalf("%s: staged %d %q %q, host %d %q %q", mode, staged.ExitCode, staged.Stdout, staged.Stderr, host.ExitCode, host.Stdout, host.Stderr)
		}
		if !staged.FilesOmitted || !host.FilesOmitted {
			t.Fatalf("%s: big.bin omitted: staged %v host %v", mode, staged.FilesOmitted, host.FilesOmitted)
		}
		files := func(r *core.Result) string {
			var b strings.Builder
			for _, f := range r.Files {
				fmt.Fprintf(&b, "%s %s %q;", f.Path, f.Change, f.Data)
			}
			return b.String()
		}
		if files(staged) != files(host) || len(host.Files) != 2 {
			t.Fatalf("%s: produced files: staged %s host %s", mode, files(staged), files(host))
		}
	}
	// One entry in the workspace that is not the code file: still listed.
	p := newPool(t, ModePython, 1, 0)
	p.mu.Lock()
	for sb := range p.all {
		// bwrap makes all three tmpfs: the stat-only fast paths are on.
		if !slices.Equal(sb.scratchTmpfs, []bool{true, true, true}) {
			t.Errorf("scratch directories taken for tmpfs: %v", sb.scratchTmpfs)
		}
	}
	p.mu.Unlock()
	r := runStaged(t, p, "import os\nos.remove(__file__)\nopen('other.txt', 'w').write('x')", core.Limits{Wall: 60 * time.Second})
	if len(r.Files) != 1 || r.Files[0].Path != "other.txt" {
		t.Fatalf("the code file replaced by another: %+v %q", r.Files, r.Stderr)
	}
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

// TestEnvironmentIsTheRequests: a run sees exactly its request's
// environment, whether that is the worker's own (which the child then
// keeps, the usual case) or another, and nothing of an earlier run's.
func TestEnvironmentIsTheRequests(t *testing.T) {
	for _, mode := range []Mode{ModePython, ModeExec} {
		workerEnv := RunEnv()
		if mode == ModePython {
			workerEnv = RunEnv("PYTHONDONTWRITEBYTECODE=1")
		}
		p := newPool(t, mode, 1, 0, workerEnv...)
		name, interp, code := "main.py", p.cfg.Python, "import os\nfor k in sorted(os.environ): print(k + '=' + os.environ[k])\n"
		if mode == ModeExec {
			name, interp, code = "main.sh", "/usr/bin/bash", "env -0 | sort -z | tr '\\0' '\\n' | grep -v '^_=\\|^SHLVL='\n"
		}
		envRun := func(extra ...string) (got, want string) {
			t.Helper()
			req := core.Program{Code: code, Limits: core.Limits{Isolation: "namespace"}}
			ws, err := program.NewWorkspace(req, name)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Remove()
			env := append(program.BaseEnv(ws.Dir), extra...)
			if mode == ModePython {
				env = append(env, "PYTHONDONTWRITEBYTECODE=1")
			}
			res, err := program.Exec(context.Background(), program.Command{
				Argv: []string{interp, ws.CodePath}, Dir: ws.Dir, Env: env, Limits: req.Limits,
				Spawner: p.Spawner(context.Background(), Run{Limits: req.Limits}),
			})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
			m := envMap(isolate.RewritePaths(env, ws.Dir, isolate.SandboxWorkdir, true))
			m["PWD"] = isolate.SandboxWorkdir // as bwrap sets it for a cold run
			var lines []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				lines = append(lines, k+"="+m[k]+"\n")
			}
			return res.Stdout, strings.Join(lines, "")
		}
		kept := envKept.Load()
		if got, want := envRun(); got != want {
			t.Fatalf("%s, the worker's environment: got\n%s\nwant\n%s", mode, got, want)
		}
		if envKept.Load() != kept+1 {
			t.Fatalf("%s: a run with the worker's environment did not keep it (the host sent it whole)", mode)
		}
		if got, want := envRun("FOO=bar", "HOME=/elsewhere", "EQ=a=b", "UNI=é✓"); got != want || !strings.Contains(got, "FOO=bar\n") {
			t.Fatalf("%s, another environment: got\n%s\nwant\n%s", mode, got, want)
		}
		if got, want := envRun(); got != want || strings.Contains(got, "FOO=") {
			t.Fatalf("%s, after another run's: got\n%s\nwant\n%s", mode, got, want)
		}
	}
}

// TestHeaderRefusesNUL: the header's fields are NUL-terminated, so a NUL
// inside one would shift every field after it.
func TestHeaderRefusesNUL(t *testing.T) {
	for _, h := range []header{
		{Argv: []string{"python3", "a\x00b"}},
		{Dir: "/work\x00space"},
		{Env: map[string]string{"A": "b\x00c"}},
		{Env: map[string]string{"A\x00B": "c"}},
		{Staged: "main\x00.py"},
		{Staged: "../main.py"},
	} {
		if _, err := h.encode(); err == nil {
			t.Errorf("%+v: encoded", h)
		}
	}
	b, err := (&header{Argv: []string{"p", "é"}, Env: map[string]string{"B": "2", "A": "x=y"}, Dir: "/w", Rlimits: [][3]uint64{{1, 2, 3}}, Wait: true}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := "1\x00/w\x00\x001\x001\x002\x003\x002\x00p\x00é\x002\x00A=x=y\x00B=2\x00"; string(b) != want {
		t.Fatalf("%q, want %q", b, want)
	}
}

// TestExitIsAScriptsExit: a warm run ends as `python3 main.py` does: it
// waits for the non-daemon threads still running, then runs the atexit
// handlers (a SystemExit in one is reported and ignored, as python3 does),
// then flushes; a thread already finished, or a daemon one, is not waited
// for.
func TestExitIsAScriptsExit(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	code := `import atexit, sys, threading, time
atexit.register(lambda: print("atexit", flush=True))
done = threading.Thread(target=lambda: None)
done.start()
done.join()
threading.Thread(target=lambda: time.sleep(600), daemon=True).start()
def late():
    time.sleep(0.3)
    print("thread done", flush=True)
threading.Thread(target=late).start()
sys.stdout.write("main done\n")  # flushed at exit
`
	l := core.Limits{Wall: 60 * time.Second}
	for _, r := range []*core.Result{run(t, p, code, l), runStaged(t, p, code, l)} {
		if r.Stdout != "main done\nthread done\natexit\n" || r.ExitCode != 0 {
			t.Fatalf("exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
	}
	r := runStaged(t, p, "import atexit, sys\natexit.register(sys.exit, 4)\nprint('x')", l)
	if r.ExitCode != 0 || r.Stdout != "x\n" || !strings.Contains(r.Stderr, "SystemExit: 4") {
		t.Fatalf("SystemExit from atexit: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// TestParseStatus: the worker's report of a run's end is read field by
// field; anything else (the JSON messages, a short or garbled report) is
// left to the JSON decoder, which refuses what it cannot read.
func TestParseStatus(t *testing.T) {
	var m message
	if !parseStatus([]byte("S 7 256 2 1500000 11333632"), &m) || m.ID != 7 || m.Status == nil || *m.Status != 256 ||
		m.Leftovers != 2 || m.CPUNs != 1500000 || m.MaxRSS != 11333632 {
		t.Fatalf("%+v", m)
	}
	for _, bad := range []string{`{"id":7,"clean":true}`, "S 7 256 2 1500000", "S 7 x 2 1 1", "T 7 256 2 1 1", ""} {
		if parseStatus([]byte(bad), &m) {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestWorkerIsFrozen: the worker's own objects are out of the collector's
// reach (gc.freeze) before the first fork, so a child's full collection
// does not copy every page of them; the child's own objects are collected.
func TestWorkerIsFrozen(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	r := run(t, p, `import gc
class C:
    pass
a = C(); a.me = a
del a
print(gc.get_freeze_count() > 1000, gc.collect() >= 1)`, core.Limits{Wall: 60 * time.Second})
	if r.Stdout != "True True\n" {
		t.Fatalf("%q %q", r.Stdout, r.Stderr)
	}
}
