package warm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// TestLimitsPerRequest: each limit ends its request with the ended_by of a
// cold run, and the next request in the same sandbox runs normally with
// the sandbox kept (the limits are the request's, not the sandbox's).
func TestLimitsPerRequest(t *testing.T) {
	p := newPool(t, ModePython, 1, 32<<20)
	_, workers := p.Sandboxes()
	lim := func() core.Limits {
		return core.Limits{MemoryBytes: 128 << 20, MaxProcesses: 32, MaxDiskBytes: 32 << 20, Wall: 60 * time.Second}
	}
	cases := []struct {
		name string
		code string
		l    func(*core.Limits)
		want ending.Reason
	}{
		{"memory", "x = bytearray(512 << 20)\nx[::4096] = b'x' * len(x[::4096])", nil, ending.MemoryLimit},
		{"processes", "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)", nil, ending.ProcessLimit},
		{"disk", "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))\n    f.flush()", nil, ending.DiskLimit},
		{"cpu", "while True: pass", func(l *core.Limits) { l.CPU = time.Second }, ending.CPULimit},
		{"timeout", "import time\ntime.sleep(600)", func(l *core.Limits) { l.Wall = time.Second }, ending.Timeout},
		{"output", "import os\nb = b'x' * (1 << 20)\nwhile True: os.write(1, b)", func(l *core.Limits) { l.MaxOutputBytes = 1 << 10 }, ending.OutputLimit},
		{"signal", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", nil, ending.Signal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := lim()
			if c.l != nil {
				c.l(&l)
			}
			r := run(t, p, c.code, l)
			if r.EndedBy != c.want {
				t.Fatalf("ended by %s, want %s (exit %d signal %s, stderr %q)", r.EndedBy, c.want, r.ExitCode, r.Signal, tail(r.Stderr))
			}
			r = run(t, p, "print('after')", lim())
			if r.Stdout != "after\n" || r.EndedBy != ending.Exit {
				t.Fatalf("the next request: %q %s %q", r.Stdout, r.EndedBy, r.Stderr)
			}
		})
	}
	if _, now := p.Sandboxes(); len(now) != 1 || now[0] != workers[0] {
		t.Fatalf("the sandbox was replaced (%v -> %v)", workers, now)
	}
}

func tail(s string) string {
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return strings.TrimSpace(s)
}

// TestSandboxCgroupsAcrossRuns: runs are born in their sandbox's own
// cgroups (no cgroup per run), and each run still sees only its own
// limits, memory peak and limit hits: a run after one that filled memory
// reports its own small peak, a run after an OOM kill is not judged by it,
// raised and lowered limits hold, the process limit counts what a cold
// run's does, and a memory limit too small to share the sandbox's cgroups
// gets cgroups of its own.
func TestSandboxCgroupsAcrossRuns(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	var sb *sandbox
	p.mu.Lock()
	for s := range p.all {
		sb = s
	}
	p.mu.Unlock()
	if sb.cg == nil {
		if isolate.NewCgroups(isolate.Spec{}).Memory() {
			t.Fatal("the host has cgroups, but the sandbox's own are not used")
		}
		t.Skip("no usable cgroups on this host")
	}
	lim := func(mem int64, procs int64) core.Limits {
		return core.Limits{MemoryBytes: mem, MaxProcesses: procs, Wall: 60 * time.Second}
	}
	fill := "x = bytearray(%d << 20)\nx[::4096] = b'x' * len(x[::4096])\nprint('ok')"
	r := run(t, p, fmt.Sprintf(fill, 100), lim(256<<20, 32))
	if r.Stdout != "ok\n" || r.EndedBy != ending.Exit || r.MemoryUsedBytes < 100<<20 {
		t.Fatalf("100 MB under 256 MB: %q %s peak %d %q", r.Stdout, r.EndedBy, r.MemoryUsedBytes, tail(r.Stderr))
	}
	r = run(t, p, "print('small')", lim(256<<20, 32))
	if r.Stdout != "small\n" || r.MemoryUsedBytes <= 0 || r.MemoryUsedBytes > 64<<20 {
		t.Fatalf("the next run's peak is the earlier one's: %q peak %d", r.Stdout, r.MemoryUsedBytes)
	}
	r = run(t, p, fmt.Sprintf(fill, 200), lim(128<<20, 32))
	if r.EndedBy != ending.MemoryLimit {
		t.Fatalf("200 MB under a lowered 128 MB: %s exit %d %q", r.EndedBy, r.ExitCode, tail(r.Stderr))
	}
	r = run(t, p, fmt.Sprintf(fill, 200), lim(512<<20, 32))
	if r.Stdout != "ok\n" || r.EndedBy != ending.Exit {
		t.Fatalf("200 MB under a raised 512 MB, after an OOM kill: %q %s %q", r.Stdout, r.EndedBy, tail(r.Stderr))
	}
	// A cold run's cgroups hold bwrap, its reaper and the program: with 10
	// processes the program may start 7 more.
	forks := "import os, time\nn = 0\nwhile n < 50:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\nprint(n)"
	r = run(t, p, forks, lim(256<<20, 10))
	if r.Stdout != "7\n" {
		t.Fatalf("processes under a limit of 10: %q %s %q", r.Stdout, r.EndedBy, tail(r.Stderr))
	}
	r = run(t, p, forks, lim(256<<20, 64))
	if r.Stdout != "50\n" || r.EndedBy != ending.Exit {
		t.Fatalf("processes under a raised limit of 64: %q %s %q", r.Stdout, r.EndedBy, tail(r.Stderr))
	}
	// Below what the sandbox itself holds: cgroups of the run's own.
	r = run(t, p, "print('tiny')", lim(12<<20, 32))
	if r.Stdout != "tiny\n" || r.EndedBy != ending.Exit {
		t.Fatalf("a 12 MB limit: %q %s %q", r.Stdout, r.EndedBy, tail(r.Stderr))
	}
	r = run(t, p, "print('after')", lim(256<<20, 32))
	if r.Stdout != "after\n" {
		t.Fatalf("after: %q %s", r.Stdout, r.EndedBy)
	}
}

// TestKillAfterTheRunIsANoop: a Kill that comes after its run ended (a
// watchdog firing as the run exits) must not reach the next run in the same
// sandbox, whose processes share the sandbox's cgroups.
func TestKillAfterTheRunIsANoop(t *testing.T) {
	p := newPool(t, ModePython, 1, 0)
	l := core.Limits{Isolation: "namespace", MemoryBytes: 256 << 20, MaxProcesses: 32, Wall: 60 * time.Second}
	ws, err := program.NewWorkspace(core.Program{Code: "print('a')", Limits: l}, "main.py")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	first, err := p.Spawner(context.Background(), Run{Limits: l}).Spawn([]string{p.cfg.Python, ws.CodePath}, ws.Dir, program.BaseEnv(ws.Dir), null, null, null)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := first.Wait(); err != nil || ex.Code != 0 {
		t.Fatalf("the first run: %+v %v", ex, err)
	}
	before := started.Load()
	second := make(chan *core.Result, 1)
	go func() { second <- run(t, p, "import time\ntime.sleep(2)\nprint('second')", l) }()
	for started.Load() == before {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the second run's child is well under way
	first.(program.Killer).Kill()
	if r := <-second; r.Stdout != "second\n" || r.EndedBy != ending.Exit {
		t.Fatalf("the second run, after a late Kill of the first: %q %s %q", r.Stdout, r.EndedBy, tail(r.Stderr))
	}
}

// TestOOMSparesTheWorker: a run that fills the memory limit with many
// processes each smaller than the worker (which shares the sandbox's
// cgroups with it) loses its own processes to the OOM killer, never the
// worker: the sandbox lives on and the run does not read as a crash.
func TestOOMSparesTheWorker(t *testing.T) {
	p := newPool(t, ModeExec, 1, 0)
	_, workers := p.Sandboxes()
	l := core.Limits{MemoryBytes: 64 << 20, MaxProcesses: 128, Wall: 60 * time.Second}
	r := run(t, p, `for i in $(seq 40); do (x=$(head -c 2000000 /dev/zero | tr '\0' x); sleep 2) & done; wait; echo done`, l)
	if _, now := p.Sandboxes(); len(now) != 1 || now[0] != workers[0] || r.EndedBy == ending.Crashed {
		t.Fatalf("ended by %s (%q); workers %v -> %v", r.EndedBy, tail(r.Stderr), workers, now)
	}
}
