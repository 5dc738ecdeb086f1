package isolate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
)

// requireLevel skips a test of level only when that level is unavailable
// here and RLM_REQUIRE_NAMESPACE is unset (CI sets it after installing
// bubblewrap, so there an unavailable sandbox is a failure, not a skip).
func requireLevel(t testing.TB, level Level) {
	t.Helper()
	err := Available(level)
	if err == nil {
		return
	}
	if os.Getenv("RLM_REQUIRE_NAMESPACE") != "" {
		t.Fatalf("isolation %s required (RLM_REQUIRE_NAMESPACE is set) but unavailable: %v", level, err)
	}
	t.Skipf("isolation %s unavailable: %v", level, err)
}

// requireCgroups skips when the host offers no memory and pids cgroups we can
// create children in, unless RLM_REQUIRE_NAMESPACE is set.
func requireCgroups(t testing.TB) {
	t.Helper()
	for _, c := range []string{"memory", "pids"} {
		if _, _, err := controllerParent(c); err != nil {
			if os.Getenv("RLM_REQUIRE_NAMESPACE") != "" {
				t.Fatalf("cgroup %s required: %v", c, err)
			}
			t.Skipf("no %s cgroup: %v", c, err)
		}
	}
}

type pyInfo struct {
	exe    string   // real interpreter path
	roDirs []string // what a namespace sandbox must expose for it
}

var (
	pyOnce sync.Once
	py     pyInfo
	pyErr  error
)

// python resolves the real python3 behind any pyenv shim, and the prefix a
// sandbox must expose read-only, the way a runtime plugin would.
func python(t testing.TB) pyInfo {
	t.Helper()
	pyOnce.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys,os; print(os.path.realpath(sys.executable)); print(sys.prefix); print(sys.base_prefix)").Output()
		if err != nil {
			pyErr = err
			return
		}
		lines := strings.Fields(string(out))
		py.exe = lines[0]
		for _, p := range lines[1:] {
			if !strings.HasPrefix(p, "/usr/") && !contains(py.roDirs, p) {
				py.roDirs = append(py.roDirs, p)
			}
		}
	})
	if pyErr != nil {
		t.Fatalf("python3 is needed by these tests: %v", pyErr)
	}
	return py
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type result struct {
	stdout, stderr string
	out            Outcome
	err            error
}

// pySpec returns a spec that runs python code (from a file in the workdir,
// as runtimes do) at level.
func pySpec(t testing.TB, level Level, code string) Spec {
	t.Helper()
	p := python(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return Spec{Spec: isolation.Spec{Level: level, Argv: []string{p.exe, "main.py"}, Dir: dir, ReadOnlyPaths: p.roDirs}}
}

func shSpec(t testing.TB, level Level, script string) Spec {
	t.Helper()
	return Spec{Spec: isolation.Spec{Level: level, Argv: []string{"/bin/bash", "-c", script}, Dir: t.TempDir()}}
}

func run(t testing.TB, spec Spec) result {
	t.Helper()
	return runCtx(t, context.Background(), spec)
}

func runCtx(t testing.TB, ctx context.Context, spec Spec) result {
	t.Helper()
	c, err := Command(ctx, spec)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	defer c.Cleanup()
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	err = c.Run()
	return result{so.String(), se.String(), c.Outcome(), err}
}

func (r result) String() string {
	return fmt.Sprintf("outcome=%+v err=%v\nstdout:\n%s\nstderr:\n%s", r.out, r.err, clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:1000] + "\n...\n" + s[len(s)-1000:]
	}
	return s
}

// mustToken fails unless the program got far enough to print token (the
// positive control of a hostile check).
func mustToken(t testing.TB, r result, token string) {
	t.Helper()
	if !strings.Contains(r.stdout, token) {
		t.Fatalf("program never printed %q, so the check proves nothing:\n%s", token, r)
	}
}

// descendants counts live (non-zombie) processes below this test process.
func descendants(t testing.TB) []string {
	t.Helper()
	self := os.Getpid()
	parent := map[int]int{}
	desc := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		desc[pid] = s[:i+1]
	}
	var out []string
	for pid, name := range desc {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// withMarker lists live processes whose command line contains marker,
// and are sleep, wherever they are in the process tree (a setsid daemon is
// reparented).
func withMarker(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(marker)) || string(bytes.TrimSpace(comm)) != "sleep" {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// leakState is what a run must not leave behind.
type leakState struct {
	procs, mounts, cgroups, tmpdirs []string
}

func currentLeakState(t testing.TB) leakState {
	t.Helper()
	var s leakState
	s.procs = descendants(t)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	// Only mounts below this test's temporary directory: other packages'
	// tests run at the same time (go test -p) and their sessions hold
	// rlm-isolate mounts of their own for as long as they live.
	tmp := os.TempDir() + "/"
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.Contains(f[4], "rlm-isolate") && strings.HasPrefix(f[4], tmp) {
			s.mounts = append(s.mounts, l)
		}
	}
	prefix := fmt.Sprintf("rlm-isolate-%d-", os.Getpid())
	for _, c := range []string{"memory", "pids"} {
		if parent, _, err := controllerParent(c); err == nil {
			ents, _ := os.ReadDir(parent)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), prefix) {
					s.cgroups = append(s.cgroups, filepath.Join(parent, e.Name()))
				}
			}
		}
	}
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "rlm-isolate-") {
			s.tmpdirs = append(s.tmpdirs, e.Name())
		}
	}
	return s
}

func (s leakState) String() string {
	return fmt.Sprintf("processes=%d %v\nmounts=%d %v\ncgroups=%d %v\ntempdirs=%d %v",
		len(s.procs), s.procs, len(s.mounts), s.mounts, len(s.cgroups), s.cgroups, len(s.tmpdirs), s.tmpdirs)
}

func (s leakState) same(o leakState) bool {
	return len(s.procs) == len(o.procs) && len(s.mounts) == len(o.mounts) && len(s.cgroups) == len(o.cgroups) && len(s.tmpdirs) == len(o.tmpdirs)
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// setPrivateTMPDIR points TMPDIR at a fresh directory, so leak counts see
// only this test's temp dirs. It stays traversable (not listable) by others,
// as the sandbox's uid must reach its workspace below it.
func setPrivateTMPDIR(t testing.TB) {
	t.Helper()
	tmp := t.TempDir()
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
}
