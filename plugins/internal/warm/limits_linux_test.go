package warm

import (
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
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
