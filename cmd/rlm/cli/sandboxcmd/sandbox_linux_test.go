package sandboxcmd_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/root"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// TestMain makes the test binary rlm when a plugin runs it as the sandbox
// supervisor, so the tests drive the real command through native's
// HelperSandbox, as a third-party plugin does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == native.HelperCommand {
		os.Exit(root.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(t *testing.T) *native.HelperSandbox {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &native.HelperSandbox{Path: exe}
}

// spawner is the helper's spawner for a process-level run; as root it also
// caps the working directory, which mounts a tmpfs on the host, so the
// cleanup checks cover a mount too.
func spawner(t *testing.T, h *native.HelperSandbox) program.Spawner {
	t.Helper()
	if err := h.Available(isolation.Process); err != nil {
		t.Skipf("isolation process: %v", err)
	}
	l := core.Limits{MemoryBytes: 256 << 20, MaxProcesses: 64}
	if os.Geteuid() == 0 {
		l.MaxDiskBytes = 16 << 20
	}
	return h.Spawner(context.Background(), native.SandboxRun{Spec: l.SandboxSpec(isolation.Process, nil)})
}

func TestLevels(t *testing.T) {
	got := helper(t).Levels()
	if len(got) == 0 || got[0] != isolation.None {
		t.Fatalf("Levels() = %v, want none first", got)
	}
	if err := (&native.HelperSandbox{}).Available(isolation.Process); err == nil || !strings.Contains(err.Error(), native.HelperEnv) {
		t.Errorf("without a helper, Available(process) = %v, want an error naming %s", err, native.HelperEnv)
	}
	if got := (&native.HelperSandbox{}).Levels(); !slices.Equal(got, []isolation.Level{isolation.None}) {
		t.Errorf("without a helper, Levels() = %v, want only none", got)
	}
}

// The spec goes in, the program's output goes straight to its files, and
// the outcome (exit status, level) comes back.
func TestSupervisorRunsSpec(t *testing.T) {
	sp := spawner(t, helper(t))
	dir := t.TempDir()
	res, err := program.Exec(context.Background(), program.Command{
		Argv:    []string{"/bin/sh", "-c", `echo out; echo err >&2; echo made > "$OUTPUT_DIR/f.txt"; exit 3`},
		Dir:     dir,
		Env:     program.BaseEnv(dir),
		Spawner: sp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.Isolation != "process" || res.EndedBy != ending.Exit {
		t.Fatalf("result = stdout %q stderr %q exit %d isolation %q ended %v (%s)", res.Stdout, res.Stderr, res.ExitCode, res.Isolation, res.EndedBy, res.Error)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("produced file = %q, %v", b, err)
	}
	if res.MemoryUsedBytes <= 0 {
		t.Errorf("no peak memory reported")
	}
}

func TestSupervisorReportsStartFailure(t *testing.T) {
	sp := spawner(t, helper(t))
	_, err := program.Exec(context.Background(), program.Command{Argv: []string{"/bin/true"}, Dir: "/nonexistent/dir", Spawner: sp})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Fatalf("err = %v, want one naming the missing directory", err)
	}
}

// A run past its wall-clock limit is killed whole: the program, a child
// that left its process group, the supervisor; no cgroup or mount remains.
func TestSupervisorTimeoutLeavesNothing(t *testing.T) {
	sp := spawner(t, helper(t))
	token := "tok" + strconv.Itoa(os.Getpid()) + "x"
	dir := t.TempDir()
	res, err := program.Exec(context.Background(), program.Command{
		Argv:    []string{"/bin/bash", "-c", `setsid bash -c 'exec -a "$0" sleep 31' "$0-escapee" & exec -a "$0" sleep 32`, token},
		Dir:     dir,
		Env:     program.BaseEnv(dir),
		Wall:    time.Second,
		Spawner: sp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.EndedBy != ending.Timeout {
		t.Errorf("ended by %v (%s), want TIMEOUT", res.EndedBy, res.Error)
	}
	checkNothingLeft(t, token)
}

// SIGTERM or SIGINT to the supervisor kills the sandbox, and it still
// cleans up and reports the run as cancelled.
func TestKilledSupervisorLeavesNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			sp := spawner(t, helper(t))
			token := "tok" + strconv.Itoa(os.Getpid()) + sig.String()[:3]
			dir := t.TempDir()
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			p, err := sp.Spawn([]string{"/bin/bash", "-c", `exec -a "$0" sleep 33`, token}, dir, program.BaseEnv(dir), null, null, null)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return running(token) }, "the program to start")
			sup := supervisorPid(t)
			if err := syscall.Kill(sup, sig); err != nil {
				t.Fatal(err)
			}
			ex, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if ex.EndedBy != ending.Cancelled || ex.Isolation != "process" {
				t.Errorf("exit = %+v, want cancelled at process", ex)
			}
			checkNothingLeft(t, token, sup)
		})
	}
}

// supervisorPid is the pid of this process's one `__sandbox` child.
func supervisorPid(t *testing.T) int {
	t.Helper()
	var found []int
	for pid := range proctree.Children() {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.Contains(string(b), native.HelperCommand) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("supervisor children: %v, want one", found)
	}
	return found[0]
}

// running reports whether a live process's command line contains s.
func running(s string) bool { return exec.Command("pgrep", "-f", s).Run() == nil }

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// checkNothingLeft fails if a process carrying token lives, or a
// supervisor of this test, or a cgroup or mount of one of sups remains.
func checkNothingLeft(t *testing.T, token string, sups ...int) {
	t.Helper()
	waitFor(t, func() bool { return !running(token) }, "the program's processes to end")
	for _, sup := range sups {
		if _, err := os.Stat("/proc/" + strconv.Itoa(sup)); err == nil {
			t.Errorf("supervisor %d still exists", sup)
		}
		mark := "rlm-isolate-" + strconv.Itoa(sup) + "-"
		_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.HasPrefix(d.Name(), mark) {
				t.Errorf("cgroup left: %s", p)
				return fs.SkipDir
			}
			if strings.Count(p, "/") >= 7 {
				return fs.SkipDir
			}
			return nil
		})
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, "rlm-isolate-ws-"+strconv.Itoa(sup)+"-") || strings.Contains(l, "rlm-isolate-ro-"+strconv.Itoa(sup)+"-") {
				t.Errorf("mount left: %s", l)
			}
		}
	}
}
