package isolate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/testutil"
)

var limitedLevels = []Level{LevelProcess, LevelNamespace}

func TestExitCodesAndWorkdir(t *testing.T) {
	for _, level := range []Level{LevelNone, LevelProcess, LevelNamespace} {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			spec := pySpec(t, level, "import os, sys\nprint('TOKEN', os.getcwd(), open('in.txt').read())\nsys.exit(3)\n")
			if err := os.WriteFile(filepath.Join(spec.Dir, "in.txt"), []byte("input"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := run(t, spec)
			mustToken(t, r, "TOKEN")
			if r.err != nil || r.out.Ending != ending.Exit || r.out.ExitCode != 3 {
				t.Fatalf("want exit 3:\n%s", r)
			}
			if !strings.Contains(r.stdout, "input") {
				t.Fatalf("input file not readable:\n%s", r)
			}
			if level == LevelNamespace && !strings.Contains(r.stdout, SandboxWorkdir) {
				t.Fatalf("namespace workdir should be %s:\n%s", SandboxWorkdir, r)
			}
		})
	}
}

func TestSignalReported(t *testing.T) {
	for _, level := range []Level{LevelNone, LevelProcess, LevelNamespace} {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			r := run(t, shSpec(t, level, "echo TOKEN; kill -TERM $$; sleep 5"))
			mustToken(t, r, "TOKEN")
			if r.out.Ending != ending.Signal || r.out.Signal != "SIGTERM" || r.out.ExitCode != -1 {
				t.Fatalf("want SIGTERM:\n%s", r)
			}
		})
	}
}

func TestScrubbedEnvironment(t *testing.T) {
	t.Setenv("RLM_ISOLATE_SECRET_ENV", "leaked")
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			r := run(t, shSpec(t, level, "echo TOKEN; env"))
			mustToken(t, r, "TOKEN")
			if strings.Contains(r.stdout, "leaked") {
				t.Fatalf("caller's environment leaked:\n%s", r)
			}
			if !strings.Contains(r.stdout, "PATH=") {
				t.Fatalf("default environment missing:\n%s", r)
			}
		})
	}
}

func TestTimeoutKillsTree(t *testing.T) {
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			r := runCtx(t, ctx, shSpec(t, level, "echo TOKEN; sleep 30 & sleep 30"))
			mustToken(t, r, "TOKEN")
			if r.out.Ending != ending.Timeout {
				t.Fatalf("want timeout:\n%s", r)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("timeout took %v", d)
			}
		})
	}
}

func TestCPULimit(t *testing.T) {
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			spec := pySpec(t, level, "print('TOKEN', flush=True)\nwhile True: pass\n")
			spec.CPUSeconds = 1
			r := run(t, spec)
			mustToken(t, r, "TOKEN")
			if r.out.Ending != ending.CPULimit {
				t.Fatalf("want cpu_limit:\n%s", r)
			}
		})
	}
}

// A fork bomb stops at the process limit; a twin that needs a few processes
// succeeds under the same limit.
func TestForkBombContained(t *testing.T) {
	requireCgroups(t)
	bomb := "import os, time\nprint('TOKEN', flush=True)\nwhile True:\n    os.fork()\n"
	twin := "import os\nkids = [os.fork() for _ in range(4)]\nfor k in kids:\n    if k == 0: os._exit(0)\n    os.waitpid(k, 0)\nprint('TWIN-OK')\n"
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			spec := pySpec(t, level, twin)
			spec.MaxProcesses = 32
			r := runCtx(t, ctx, spec)
			if r.out.Ending != ending.Exit || r.out.ExitCode != 0 || !strings.Contains(r.stdout, "TWIN-OK") {
				t.Fatalf("harmless twin failed under the same limit:\n%s", r)
			}
			spec = pySpec(t, level, bomb)
			spec.MaxProcesses = 32
			r = runCtx(t, ctx, spec)
			mustToken(t, r, "TOKEN")
			if r.out.Ending != ending.ProcessLimit || !r.out.ProcessLimitHit {
				t.Fatalf("want process_limit:\n%s", r)
			}
			if d := descendants(t); len(d) != 0 {
				t.Fatalf("processes left after the fork bomb: %v", d)
			}
		})
	}
}

// Shell fork bomb, the classic; under namespace it runs as uid 65534.
func TestShellForkBombContained(t *testing.T) {
	requireCgroups(t)
	requireLevel(t, LevelNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Every shell waits for its pipeline, so the tree only grows: the
	// limit is hit whatever the scheduling (a `b | b &` bomb whose
	// parents exit at once could finish before reaching it).
	spec := shSpec(t, LevelNamespace, "echo TOKEN; b() { b | b; }; b")
	spec.MaxProcesses = 64
	r := runCtx(t, ctx, spec)
	mustToken(t, r, "TOKEN")
	if !r.out.ProcessLimitHit {
		t.Fatalf("process limit never hit:\n%s", r)
	}
	if d := descendants(t); len(d) != 0 {
		t.Fatalf("processes left after the fork bomb: %v", d)
	}
}

// Memory bombs, private and through a shared anonymous mapping that
// RLIMIT_AS/RLIMIT_DATA do not see, end as memory_limit; 32 MiB under the
// same limit succeeds.
func TestMemoryLimit(t *testing.T) {
	requireCgroups(t)
	const limit = 128 << 20
	cases := []struct{ name, code string }{
		{"twin", "b = bytearray(32 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('TWIN-OK')\n"},
		{"private", "print('TOKEN', flush=True)\nb = bytearray(512 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('SURVIVED')\n"},
		{"shared", "import mmap\nprint('TOKEN', flush=True)\nm = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\nfor i in range(0, len(m), 4096): m[i] = 1\nprint('SURVIVED')\n"},
	}
	for _, level := range limitedLevels {
		for _, tc := range cases {
			t.Run(string(level)+"/"+tc.name, func(t *testing.T) {
				requireLevel(t, level)
				spec := pySpec(t, level, tc.code)
				spec.MemoryBytes = limit
				r := run(t, spec)
				if tc.name == "twin" {
					if r.out.Ending != ending.Exit || r.out.ExitCode != 0 || !strings.Contains(r.stdout, "TWIN-OK") {
						t.Fatalf("32 MiB under a 128 MiB limit failed:\n%s", r)
					}
					if r.out.PeakMemoryBytes < 32<<20 {
						t.Fatalf("peak memory %d below the 32 MiB touched", r.out.PeakMemoryBytes)
					}
					return
				}
				mustToken(t, r, "TOKEN")
				if strings.Contains(r.stdout, "SURVIVED") || r.out.Ending != ending.MemoryLimit || !r.out.MemoryLimitHit {
					t.Fatalf("want memory_limit:\n%s", r)
				}
			})
		}
	}
}

// The working directory's total size is capped: one huge file and many small
// ones both stop at DiskBytes; a 1 MB write succeeds and comes back.
func TestDiskCap(t *testing.T) {
	const disk = 32 << 20
	cases := []struct{ name, code string }{
		{"twin", "open('ok.bin', 'wb').write(b'x' * (1 << 20))\nprint('TWIN-OK')\n"},
		{"onefile", "print('TOKEN', flush=True)\nf = open('big.bin', 'wb')\nfor _ in range(200): f.write(b'x' * (1 << 20)); f.flush()\nprint('SURVIVED')\n"},
		{"manyfiles", "import os\nprint('TOKEN', flush=True)\nos.mkdir('d')\nfor i in range(100000): open('d/f%d' % i, 'wb').write(b'x' * 65536)\nprint('SURVIVED')\n"},
	}
	for _, level := range limitedLevels {
		for _, tc := range cases {
			t.Run(string(level)+"/"+tc.name, func(t *testing.T) {
				requireLevel(t, level)
				spec := pySpec(t, level, tc.code)
				spec.DiskBytes = disk
				spec.MemoryBytes = 256 << 20
				r := run(t, spec)
				total := dirSize(t, spec.Dir)
				if total > disk {
					t.Fatalf("working directory holds %d bytes, cap %d", total, disk)
				}
				if tc.name == "twin" {
					fi, err := os.Stat(filepath.Join(spec.Dir, "ok.bin"))
					if r.out.Ending != ending.Exit || r.out.ExitCode != 0 || err != nil || fi.Size() != 1<<20 {
						t.Fatalf("1 MB write did not succeed and come back (%v):\n%s", err, r)
					}
					return
				}
				mustToken(t, r, "TOKEN")
				if strings.Contains(r.stdout, "SURVIVED") || r.out.Ending != ending.DiskLimit || !r.out.DiskLimitHit {
					t.Fatalf("want disk_limit:\n%s", r)
				}
				if total < disk/2 {
					t.Fatalf("only %d bytes came back; the program's output before the cap was lost", total)
				}
			})
		}
	}
}

// Under LevelNamespace the working directory is capped even when the caller
// sets no DiskBytes: at DefaultDiskBytes, or half of MemoryBytes when that is
// smaller, so a program writing without end ends as disk_limit (not
// memory_limit, though tmpfs pages are charged to its memory cgroup, and not
// by a timeout) and the host's disk never fills. The inputs are there and
// belong to the sandbox's user; a write below the cap comes back.
func TestNamespaceDefaultDiskCap(t *testing.T) {
	requireLevel(t, LevelNamespace)
	const mem = 256 << 20
	spec := pySpec(t, LevelNamespace, `import os
print(open('in.txt').read(), os.stat('in.txt').st_uid == os.getuid(), flush=True)
open('in.txt', 'a').write('+more')
open('ok.bin', 'wb').write(b'x' * (1 << 20))
print('TOKEN', flush=True)
f = open('big.bin', 'wb')
for _ in range(2048): f.write(b'x' * (1 << 20)); f.flush()
print('SURVIVED')
`)
	if err := os.WriteFile(filepath.Join(spec.Dir, "in.txt"), []byte("INPUT"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec.MemoryBytes = mem
	r := run(t, spec)
	mustToken(t, r, "TOKEN")
	if !strings.Contains(r.stdout, "INPUT True") {
		t.Fatalf("the input file was not in the sandbox's working directory, owned by its user:\n%s", r)
	}
	if strings.Contains(r.stdout, "SURVIVED") || r.out.Ending != ending.DiskLimit || !r.out.DiskLimitHit {
		t.Fatalf("want disk_limit from the default cap:\n%s", r)
	}
	if total := dirSize(t, spec.Dir); total > mem/2+(1<<20) || total < mem/4 {
		t.Fatalf("working directory came back with %d bytes, want about the default cap %d", total, mem/2)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Dir, "in.txt")); err != nil || string(b) != "INPUT+more" {
		t.Fatalf("changed input did not come back: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(spec.Dir, "ok.bin")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("1 MB write did not come back: %v", err)
	}
}

func dirSize(t testing.TB, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// A descriptor the caller holds without close-on-exec (as one inherited from
// its own parent would be) is not visible; the runtime's own pipe (ExtraFiles)
// is, at fd 3.
func TestInheritedDescriptors(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("FD-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const leakFD = 42
	if err := syscall.Dup3(int(f.Fd()), leakFD, 0); err != nil { // no O_CLOEXEC
		t.Fatal(err)
	}
	defer syscall.Close(leakFD)
	code := "import os\nprint('FDS', sorted(int(x) for x in os.listdir('/proc/self/fd')))\nprint('PIPE', os.read(3, 100).decode())\n" +
		"try:\n    print('LEAK', os.read(42, 100))\nexcept OSError as e:\n    print('DENIED', e.errno)\n"
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			io.WriteString(pw, "PIPE-DATA")
			pw.Close()
			spec := pySpec(t, level, code)
			spec.ExtraFiles = []*os.File{pr}
			r := run(t, spec)
			if !strings.Contains(r.stdout, "PIPE PIPE-DATA") {
				t.Fatalf("the runtime's own pipe was not readable at fd 3:\n%s", r)
			}
			if strings.Contains(r.stdout, "FD-SECRET") || !strings.Contains(r.stdout, "DENIED") {
				t.Fatalf("inherited descriptor readable:\n%s", r)
			}
			// listdir itself holds one descriptor open (the 4th entry).
			if !strings.Contains(r.stdout, "FDS [0, 1, 2, 3, 4]") {
				t.Fatalf("unexpected descriptors:\n%s", r)
			}
		})
	}
}

// Host secrets outside the workdir (a key in root's home, /etc/shadow) are
// not readable; the workdir's input is.
func TestHostSecretsHidden(t *testing.T) {
	requireLevel(t, LevelNamespace)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	sshDir, err := os.MkdirTemp(home, ".rlm-isolate-ssh-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sshDir)
	key := filepath.Join(sshDir, "id_test")
	if err := os.WriteFile(key, []byte("HOST-PRIVATE-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf("print('TOKEN', open('in.txt').read())\nfor p in [%q, '/etc/shadow', '/root/.ssh', %q, '/etc/passwd']:\n    try:\n        with open(p) as f: print('READ', p, f.read())\n    except OSError as e:\n        print('DENIED', p, e.strerror)\n", key, home)
	spec := pySpec(t, LevelNamespace, code)
	os.WriteFile(filepath.Join(spec.Dir, "in.txt"), []byte("INPUT-OK"), 0o644)
	r := run(t, spec)
	mustToken(t, r, "INPUT-OK")
	if strings.Contains(r.stdout, "HOST-PRIVATE-KEY") || strings.Contains(r.stdout, "READ /etc/shadow") || strings.Contains(r.stdout, "READ "+key) {
		t.Fatalf("host secret readable:\n%s", r)
	}
	if !strings.Contains(r.stdout, "DENIED "+key) {
		t.Fatalf("key check did not run:\n%s", r)
	}
	// The generated passwd names only root and nobody.
	if !strings.Contains(r.stdout, "READ /etc/passwd") || strings.Count(r.stdout, ":x:") != 2 {
		t.Fatalf("unexpected /etc/passwd:\n%s", r)
	}
}

// Only the workdir (and the private /tmp, /dev/shm) are writable.
func TestWritesOutsideWorkdirFail(t *testing.T) {
	requireLevel(t, LevelNamespace)
	p := python(t)
	// /proc/sys entries that belong to the sandbox's own namespaces (its
	// hostname, its network's sysctls) are writable by design; global ones
	// must not be.
	targets := []string{"/usr/rlm-x", "/etc/rlm-x", "/rlm-x", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/bin/rlm-x", "/sys/rlm-x"}
	for _, d := range p.roDirs {
		targets = append(targets, filepath.Join(d, "rlm-x"))
	}
	var b strings.Builder
	b.WriteString("import os\nopen('out.txt', 'w').write('ok')\nprint('TOKEN')\nopen('/tmp/t', 'w').write('ok')\nopen('/dev/shm/t', 'w').write('ok')\nprint('TMP-OK')\n")
	for _, p := range targets {
		// Unbuffered, so a failing write raises instead of being lost at close.
		fmt.Fprintf(&b, "try:\n    fd = os.open(%q, os.O_WRONLY | os.O_CREAT, 0o644)\n    os.write(fd, b'x')\n    print('WROTE', %q)\nexcept OSError as e:\n    print('DENIED', %q, e.strerror)\n", p, p, p)
	}
	// The sandbox must not be host root under another name: a root caller's
	// sandbox once rewrote the host's kernel.core_pattern through /proc/sys.
	corePattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	spec := pySpec(t, LevelNamespace, b.String())
	r := run(t, spec)
	mustToken(t, r, "TOKEN")
	mustToken(t, r, "TMP-OK")
	if after, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(after) != string(corePattern) {
		os.WriteFile("/proc/sys/kernel/core_pattern", corePattern, 0)
		t.Fatalf("the sandbox changed the host's core_pattern to %q", after)
	}

	if strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("wrote outside the workdir:\n%s", r)
	}
	if strings.Count(r.stdout, "DENIED") != len(targets) {
		t.Fatalf("not every write was tried:\n%s", r)
	}
	for _, p := range targets {
		if _, err := os.Stat(p); err == nil && strings.HasSuffix(p, "rlm-x") {
			t.Fatalf("%s exists on the host", p)
		}
	}
}

// /tmp and /dev/shm are private and fresh per run.
func TestTmpFreshPerRun(t *testing.T) {
	requireLevel(t, LevelNamespace)
	hostMarker := filepath.Join(os.TempDir(), "rlm-host-marker")
	os.WriteFile(hostMarker, []byte("x"), 0o644)
	defer os.Remove(hostMarker)
	first := run(t, shSpec(t, LevelNamespace, "echo a > /tmp/run-marker && echo b > /dev/shm/run-marker && echo WROTE; ls /tmp /dev/shm"))
	mustToken(t, first, "WROTE")
	second := run(t, shSpec(t, LevelNamespace, "echo TOKEN; ls -A /tmp /dev/shm; test -e /tmp/run-marker || test -e /dev/shm/run-marker || test -e /tmp/rlm-host-marker && echo STALE"))
	mustToken(t, second, "TOKEN")
	if strings.Contains(second.stdout, "STALE") || strings.Contains(second.stdout, "marker") {
		t.Fatalf("/tmp or /dev/shm not fresh:\n%s", second)
	}
	var st syscall.Statfs_t
	if syscall.Statfs("/tmp", &st) == nil {
		if _, err := os.Stat("/tmp/run-marker"); err == nil {
			t.Fatal("sandbox /tmp write reached the host's /tmp")
		}
	}
}

// No network under namespace: a connection to a listener on the host's
// loopback is refused; with AllowNetwork, and at level process, it connects.
func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	code := fmt.Sprintf("import socket\nprint('TOKEN', flush=True)\ns = socket.socket()\ns.settimeout(5)\ntry:\n    s.connect(('127.0.0.1', %d))\n    print('CONNECTED', s.recv(5).decode())\nexcept OSError as e:\n    print('REFUSED', e)\n", port)
	cases := []struct {
		level   Level
		network bool
		want    string
	}{
		{LevelNamespace, false, "REFUSED"},
		{LevelNamespace, true, "CONNECTED HELLO"},
		{LevelProcess, false, "CONNECTED HELLO"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/net=%v", tc.level, tc.network), func(t *testing.T) {
			requireLevel(t, tc.level)
			spec := pySpec(t, tc.level, code)
			spec.AllowNetwork = tc.network
			r := run(t, spec)
			mustToken(t, r, "TOKEN")
			if !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("want %s:\n%s", tc.want, r)
			}
		})
	}
}

// Background jobs, setsid'd and double-forked daemons are gone after Kill
// and after a normal exit.
func TestNoSurvivors(t *testing.T) {
	requireCgroups(t)
	type variant struct {
		level Level
		how   string
		noCG  bool // as on a host without cgroups: the pid namespace alone must do it
	}
	var variants []variant
	for _, level := range limitedLevels {
		for _, how := range []string{"kill", "exit"} {
			variants = append(variants, variant{level, how, false})
		}
	}
	variants = append(variants, variant{LevelNamespace, "kill", true}, variant{LevelNamespace, "exit", true})
	for _, v := range variants {
		level, how := v.level, v.how
		name := string(level) + "/" + how
		if v.noCG {
			name += "/without-cgroups"
		}
		{
			t.Run(name, func(t *testing.T) {
				requireLevel(t, level)
				noCgroupsForTest = v.noCG
				defer func() { noCgroupsForTest = false }()
				marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
				script := fmt.Sprintf(`sleep %[1]s &
setsid sleep %[1]s &
( ( setsid nohup sleep %[1]s >/dev/null 2>&1 & ) & )
for i in $(seq 100); do n=$(pgrep -c -f "^sleep %[1]s"); [ "$n" -ge 3 ] && break; sleep 0.1; done
echo READY $n`, marker)
				if how == "kill" {
					script += "\nsleep 300"
				} else {
					script += "\nread _; exit 0" // exit once the host has counted the sleepers
				}
				spec := shSpec(t, level, script)
				c, err := Command(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Cleanup()
				pr, pw := io.Pipe()
				c.Stdout = pw
				stdin, release := io.Pipe()
				c.Stdin = stdin
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				line, _ := bufio.NewReader(pr).ReadString('\n')
				go io.Copy(io.Discard, pr)
				if !strings.HasPrefix(line, "READY 3") {
					t.Fatalf("daemons did not start: %q", line)
				}
				if n := len(withMarker(marker)); n < 3 {
					t.Fatalf("host sees %d of the 3 sleepers: the check would prove nothing", n)
				}
				if how == "kill" {
					if err := c.Kill(); err != nil {
						t.Fatal(err)
					}
				} else {
					release.Write([]byte("\n"))
				}
				release.Close()
				waitStart := time.Now()
				werr := c.Wait()
				waited := time.Since(waitStart)
				pw.Close()
				if werr != nil {
					t.Fatal(werr)
				}
				// The sleepers hold the stdout pipe: Wait returns promptly only
				// because it killed them, not because os/exec gave up on the pipe.
				if waited > time.Second {
					t.Fatalf("Wait took %v", waited)
				}
				if left := withMarker(marker); len(left) != 0 {
					var info []string
					for _, p := range left {
						st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
						info = append(info, string(st))
					}
					t.Fatalf("%d processes survived: %v\n%s", len(left), left, strings.Join(info, "\n"))
				}
				o := c.Outcome()
				if how == "kill" && o.Ending != ending.Cancelled {
					t.Fatalf("want cancelled: %+v", o)
				}
				if how == "exit" && (o.Ending != ending.Exit || o.ExitCode != 0) {
					t.Fatalf("want a clean exit: %+v", o)
				}
			})
		}
	}
}

// From inside a pid namespace host pids do not exist.
func TestCannotKillHostPid(t *testing.T) {
	requireLevel(t, LevelNamespace)
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	r := run(t, shSpec(t, LevelNamespace, fmt.Sprintf("kill -0 $$ && echo SELF-OK; kill -9 %d && echo KILLED; kill -9 %d; echo DONE", victim.Process.Pid, os.Getpid())))
	mustToken(t, r, "SELF-OK")
	mustToken(t, r, "DONE")
	if strings.Contains(r.stdout, "KILLED") {
		t.Fatalf("killed a host process:\n%s", r)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("victim died: %v", err)
	}
}

// The seccomp filter refuses the dangerous calls with EPERM, while ordinary
// calls through the same path work; no capabilities, uid 65534.
func TestSeccompAndCredentials(t *testing.T) {
	requireLevel(t, LevelNamespace)
	nrs := map[string]map[string]int{
		"amd64": {"getpid": 39, "ptrace": 101, "mount": 165, "kexec_load": 246, "bpf": 321, "keyctl": 250, "unshare": 272, "init_module": 175, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425},
		"arm64": {"getpid": 172, "ptrace": 117, "mount": 40, "kexec_load": 104, "bpf": 280, "keyctl": 219, "unshare": 97, "init_module": 105, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425},
	}[runtime.GOARCH]
	if nrs == nil {
		t.Skipf("no syscall table for %s in this test", runtime.GOARCH)
	}
	var b strings.Builder
	b.WriteString("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n")
	b.WriteString("st = open('/proc/self/status').read()\nprint([l for l in st.splitlines() if l.split(':')[0] in ('Uid','CapEff','CapPrm','CapBnd','NoNewPrivs','Seccomp')])\n")
	fmt.Fprintf(&b, "print('GETPID', libc.syscall(%d) == os.getpid())\n", nrs["getpid"])
	for name, nr := range nrs {
		if name == "getpid" {
			continue
		}
		fmt.Fprintf(&b, "ctypes.set_errno(0)\nr = libc.syscall(%d, 0, 0, 0, 0, 0)\nprint('CALL', %q, r, ctypes.get_errno())\n", nr, name)
	}
	// Control: without the filter (level process, as root) ptrace(TRACEME)
	// and unshare(0) succeed, so the EPERMs below come from the filter.
	if Available(LevelProcess) == nil {
		c := run(t, pySpec(t, LevelProcess, b.String()))
		if !strings.Contains(c.stdout, "CALL ptrace 0 0") || !strings.Contains(c.stdout, "CALL unshare 0 0") {
			t.Fatalf("control without seccomp did not succeed:\n%s", c)
		}
	}
	r := run(t, pySpec(t, LevelNamespace, b.String()))
	mustToken(t, r, "GETPID True")
	for name := range nrs {
		if name == "getpid" {
			continue
		}
		if !strings.Contains(r.stdout, fmt.Sprintf("CALL %s -1 %d\n", name, syscall.EPERM)) {
			t.Errorf("%s not refused with EPERM:\n%s", name, r)
		}
	}
	for _, want := range []string{"'Uid:\\t65534\\t65534\\t65534\\t65534'", "'CapEff:\\t0000000000000000'", "'CapBnd:\\t0000000000000000'", "'NoNewPrivs:\\t1'", "'Seccomp:\\t2'"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %s:\n%s", want, r)
		}
	}
}

// Nested user namespaces are refused (bwrap --disable-userns, and unshare is
// in the seccomp list): the usual first step of a kernel exploit.
func TestNoNestedUserNamespace(t *testing.T) {
	requireLevel(t, LevelNamespace)
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("unshare(1) not installed")
	}
	r := run(t, shSpec(t, LevelNamespace, "echo TOKEN; unshare -Ur id && echo NESTED"))
	mustToken(t, r, "TOKEN")
	if strings.Contains(r.stdout, "NESTED") {
		t.Fatalf("created a nested user namespace:\n%s", r)
	}
}

// The working-directory contract under DiskBytes: inputs in, results back,
// deletions mirrored, planted symlinks not copied back, nothing written
// through a caller's symlink.
func TestWorkdirSyncContract(t *testing.T) {
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			if os.Geteuid() != 0 {
				t.Skip("the copy-in/copy-back path needs the capped tmpfs, which needs root")
			}
			outside := t.TempDir()
			spec := shSpec(t, level, `set -e
cat keep.txt; echo changed > change.txt; rm gone.txt; rm -r gonedir
mkdir -p sub/deeper; echo new > sub/deeper/new.txt
ln -s /etc/hostname planted
rm link; mkdir link; echo through > link/x
echo DONE`)
			spec.DiskBytes = 8 << 20
			d := spec.Dir
			os.WriteFile(filepath.Join(d, "keep.txt"), []byte("KEEP\n"), 0o644)
			os.WriteFile(filepath.Join(d, "change.txt"), []byte("old\n"), 0o644)
			os.WriteFile(filepath.Join(d, "gone.txt"), []byte("x"), 0o644)
			os.MkdirAll(filepath.Join(d, "gonedir", "a"), 0o755)
			os.Symlink(outside, filepath.Join(d, "link"))
			r := run(t, spec)
			mustToken(t, r, "KEEP")
			mustToken(t, r, "DONE")
			if r.err != nil || r.out.ExitCode != 0 {
				t.Fatalf("run failed:\n%s", r)
			}
			check := func(rel, want string) {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(d, rel))
				if err != nil || string(b) != want {
					t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
				}
			}
			check("keep.txt", "KEEP\n")
			check("change.txt", "changed\n")
			check("sub/deeper/new.txt", "new\n")
			check("link/x", "through\n")
			for _, gone := range []string{"gone.txt", "gonedir", "planted"} {
				if _, err := os.Lstat(filepath.Join(d, gone)); err == nil {
					t.Errorf("%s should not exist after the run", gone)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("sync-back wrote through the caller's symlink into %s", outside)
			}
		})
	}
}

// 50 runs in a row and 16 at once leave no processes, mounts, cgroups or
// temp dirs behind.
func TestNoLeaks(t *testing.T) {
	requireLevel(t, LevelNamespace)
	setPrivateTMPDIR(t)
	before := currentLeakState(t)
	spec := func() Spec {
		s := shSpec(t, LevelNamespace, "echo TOKEN; sleep 30 & echo x > f; exit 7")
		s.MemoryBytes, s.MaxProcesses, s.DiskBytes, s.CPUSeconds, s.OpenFiles, s.FileSizeBytes = 64<<20, 16, 4<<20, 5, 64, 1<<20
		return s
	}
	for i := 0; i < 50; i++ {
		r := run(t, spec())
		mustToken(t, r, "TOKEN")
		if r.out.ExitCode != 7 || r.err != nil {
			t.Fatalf("run %d:\n%s", i, r)
		}
	}
	specs := make([]Spec, 16)
	for i := range specs {
		specs[i] = spec()
	}
	testutil.Concurrently(t, len(specs), func(i int) string {
		c, err := Command(context.Background(), specs[i])
		if err != nil {
			return err.Error()
		}
		defer c.Cleanup()
		var out strings.Builder
		c.Stdout = &out
		if err := c.Run(); err != nil || c.Outcome().ExitCode != 7 || !strings.Contains(out.String(), "TOKEN") {
			return fmt.Sprintf("err=%v outcome=%+v out=%q", err, c.Outcome(), out.String())
		}
		return ""
	})
	var after leakState
	if !eventually(2*time.Second, func() bool { after = currentLeakState(t); return after.same(before) }) {
		t.Fatalf("leaked:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Cleanup without Start, and a Start that fails, leave nothing.
func TestCleanupPaths(t *testing.T) {
	requireLevel(t, LevelProcess)
	setPrivateTMPDIR(t)
	before := currentLeakState(t)
	c, err := Command(context.Background(), Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"true"}, Dir: t.TempDir(), DiskBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cleanup(); err != nil {
		t.Fatal(err)
	}
	c, err = Command(context.Background(), Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"/nonexistent/prog"}, Dir: t.TempDir(), DiskBytes: 1 << 20, MemoryBytes: 1 << 26}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if o := c.Outcome(); o.Ending != ending.Exit || o.ExitCode != 127 {
		t.Fatalf("missing program: want exit 127, got %+v", o)
	}
	c.Cleanup()
	if after := currentLeakState(t); !after.same(before) {
		t.Fatalf("leaked:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestSpecErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Spec: isolation.Spec{Level: "jail", Argv: []string{"true"}, Dir: dir}}, "unknown isolation level"},
		{Spec{Spec: isolation.Spec{Level: LevelProcess, Dir: dir}}, "Argv is empty"},
		{Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"true"}}}, "Dir is empty"},
		{Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"true"}, Dir: filepath.Join(dir, "nope")}}, "existing directory"},
		{Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"true"}, Dir: dir, MemoryBytes: -1}}, "negative"},
		{Spec{Spec: isolation.Spec{Level: LevelProcess, Argv: []string{"true"}, Dir: dir}, OpenFiles: 3}, "too small"},
		{Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: []string{"true"}, Dir: dir, ReadOnlyPaths: []string{"/"}}}, "whole host"},
		{Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: []string{"true"}, Dir: dir, ReadOnlyPaths: []string{"relative"}}}, "not absolute"},
		{Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: []string{"true"}, Dir: dir, ReadOnlyPaths: []string{"/proc/1"}}}, "shadow"},
	} {
		_, err := Command(context.Background(), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// Without bwrap the error names the package to install.
func TestMissingBwrapError(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := bwrapPath()
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Fatalf("got %v", err)
	}
}

// The embedded filters were generated from the blocklist as it is now.
func TestSeccompBlobsMatchBlocklist(t *testing.T) {
	sum := sha256.Sum256(seccompBlocklist)
	lines := strings.Split(strings.TrimSpace(string(seccompSum)), "\n")
	if lines[0] != "blocklist-sha256 "+hex.EncodeToString(sum[:]) {
		t.Fatal("seccomp_blocklist.txt changed since the filters were generated: run go generate ./internal/isolate")
	}
	blobs := map[string][]byte{"amd64": seccompAMD64, "arm64": seccompARM64}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		s := sha256.Sum256(blobs[f[0]])
		if f[1] != hex.EncodeToString(s[:]) {
			t.Errorf("seccomp_%s.bpf does not match seccomp_bpf.sum", f[0])
		}
		if len(blobs[f[0]])%8 != 0 || len(blobs[f[0]]) == 0 {
			t.Errorf("seccomp_%s.bpf is not a sock_filter array", f[0])
		}
	}
}

// hostUIDFor is the host uid a namespace sandbox runs as.
func hostUIDFor() int {
	if os.Geteuid() == 0 {
		return sandboxHostUID
	}
	return os.Geteuid()
}

// Seen from the host, sandboxed processes run as an unprivileged uid (65534
// when the caller is root), not as host root without capabilities.
func TestSandboxIsNotHostRoot(t *testing.T) {
	requireLevel(t, LevelNamespace)
	marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
	c, err := Command(context.Background(), shSpec(t, LevelNamespace, "echo READY; exec sleep "+marker))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cleanup()
	pr, pw := io.Pipe()
	c.Stdout = pw
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	if line != "READY\n" {
		t.Fatalf("got %q", line)
	}
	var pids []int
	eventually(2*time.Second, func() bool { pids = withMarker(marker); return len(pids) == 1 })
	if len(pids) != 1 {
		t.Fatalf("sandboxed sleep not found on the host: %v", pids)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Uid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\n", hostUIDFor())
	if !strings.Contains(string(status), want) {
		t.Fatalf("want %q in the host's view:\n%s", want, status)
	}
	c.Kill()
	c.Wait()
	pw.Close()
}

// Per-file size and open-file rlimits hold; the same program under the limit
// succeeds.
func TestFileRlimits(t *testing.T) {
	code := "import sys\nn = int(sys.argv[1])\nopen('f.bin', 'wb').write(b'x' * n)\nprint('WROTE', n, flush=True)\nfs = []\ntry:\n    for i in range(int(sys.argv[2])): fs.append(open('f.bin'))\n    print('OPENED', len(fs))\nexcept OSError as e:\n    print('EMFILE', len(fs), e.errno)\n"
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			spec := pySpec(t, level, code)
			spec.FileSizeBytes, spec.OpenFiles = 1<<20, 64
			spec.Argv = append(spec.Argv, "524288", "10")
			r := run(t, spec)
			if !strings.Contains(r.stdout, "WROTE 524288") || !strings.Contains(r.stdout, "OPENED 10") || r.out.ExitCode != 0 {
				t.Fatalf("twin under the limits failed:\n%s", r)
			}
			spec.Argv[len(spec.Argv)-2], spec.Argv[len(spec.Argv)-1] = "524288", "200"
			r = run(t, spec)
			mustToken(t, r, "WROTE")
			if !strings.Contains(r.stdout, "EMFILE") || strings.Contains(r.stdout, "OPENED") {
				t.Fatalf("open-file limit did not hold:\n%s", r)
			}
			spec.Argv[len(spec.Argv)-2] = "2097152"
			r = run(t, spec)
			// CPython ignores SIGXFSZ, so the write fails with EFBIG instead.
			if strings.Contains(r.stdout, "WROTE") || r.out.ExitCode == 0 || !strings.Contains(r.stderr, "File too large") {
				t.Fatalf("file-size limit did not hold:\n%s", r)
			}
			if fi, err := os.Stat(filepath.Join(spec.Dir, "f.bin")); err != nil {
				t.Fatal(err)
			} else if fi.Size() > 1<<20 {
				t.Fatalf("f.bin has %d bytes, limit %d", fi.Size(), 1<<20)
			}
		})
	}
}

// Callers name the code file and HOME by the directory they prepared; the
// program must find them wherever it actually works.
func TestArgvAndEnvFollowWorkdir(t *testing.T) {
	for _, level := range []Level{LevelNone, LevelProcess, LevelNamespace} {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			spec := shSpec(t, level, "")
			script := filepath.Join(spec.Dir, "main.sh")
			if err := os.WriteFile(script, []byte("echo TOKEN $HOME_DIR; cat \"$1\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(spec.Dir, "in.txt"), []byte("INPUT"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec.Argv = []string{"/bin/sh", script, filepath.Join(spec.Dir, "in.txt")}
			spec.Env = append(DefaultEnv(spec.Dir), "HOME_DIR="+spec.Dir)
			r := run(t, spec)
			mustToken(t, r, "TOKEN")
			if r.out.Ending != ending.Exit || r.out.ExitCode != 0 || !strings.Contains(r.stdout, "INPUT") {
				t.Fatalf("want the script and its input found:\n%s", r)
			}
			if level == LevelNamespace && !strings.Contains(r.stdout, "TOKEN "+SandboxWorkdir) {
				t.Fatalf("HOME_DIR should be %s inside:\n%s", SandboxWorkdir, r)
			}
		})
	}
}
