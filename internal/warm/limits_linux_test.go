package warm

import (
	"strings"
	"testing"

	pb "github.com/rlmkit/rlm/core/proto"
)

// TestLimitsPerRequest: each limit ends its request with the ended_by of a
// cold run, and the next request in the same sandbox runs normally with
// the sandbox kept (the limits are the request's, not the sandbox's).
func TestLimitsPerRequest(t *testing.T) {
	p := newPool(t, ModePython, 1, 32<<20)
	_, workers := p.Sandboxes()
	lim := func() *pb.Limits {
		return &pb.Limits{MemoryBytes: 128 << 20, MaxProcesses: 32, MaxDiskBytes: 32 << 20, WallMs: 60000}
	}
	cases := []struct {
		name string
		code string
		l    func(*pb.Limits)
		want pb.EndedBy
	}{
		{"memory", "x = bytearray(512 << 20)\nx[::4096] = b'x' * len(x[::4096])", nil, pb.EndedBy_MEMORY_LIMIT},
		{"processes", "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)", nil, pb.EndedBy_PROCESS_LIMIT},
		{"disk", "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))\n    f.flush()", nil, pb.EndedBy_DISK_LIMIT},
		{"cpu", "while True: pass", func(l *pb.Limits) { l.CpuMs = 1000 }, pb.EndedBy_CPU_LIMIT},
		{"timeout", "import time\ntime.sleep(600)", func(l *pb.Limits) { l.WallMs = 1000 }, pb.EndedBy_TIMEOUT},
		{"output", "import os\nb = b'x' * (1 << 20)\nwhile True: os.write(1, b)", func(l *pb.Limits) { l.MaxOutputBytes = 1 << 10 }, pb.EndedBy_OUTPUT_LIMIT},
		{"signal", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", nil, pb.EndedBy_SIGNAL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := lim()
			if c.l != nil {
				c.l(l)
			}
			r := run(t, p, c.code, l)
			if r.EndedBy != c.want {
				t.Fatalf("ended by %s, want %s (exit %d signal %s, stderr %q)", r.EndedBy, c.want, r.ExitCode, r.Signal, tail(r.Stderr))
			}
			r = run(t, p, "print('after')", lim())
			if string(r.Stdout) != "after\n" || r.EndedBy != pb.EndedBy_EXIT {
				t.Fatalf("the next request: %q %s %q", r.Stdout, r.EndedBy, r.Stderr)
			}
		})
	}
	if _, now := p.Sandboxes(); len(now) != 1 || now[0] != workers[0] {
		t.Fatalf("the sandbox was replaced (%v -> %v)", workers, now)
	}
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return strings.TrimSpace(s)
}
