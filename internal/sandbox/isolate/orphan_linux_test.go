package isolate

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/distinct"
)

// When the process that started a run dies (SIGKILL, no Cleanup), the run
// dies with it: PR_SET_PDEATHSIG on the started process, and bwrap's
// --die-with-parent inside. Leftover cgroups are swept by the next process
// that uses the package.
func TestRunDiesWithCaller(t *testing.T) {
	if os.Getenv("RLM_ISOLATE_ORPHAN_HELPER") != "" {
		orphanHelper()
		return
	}
	for _, level := range limitedLevels {
		t.Run(string(level), func(t *testing.T) {
			requireLevel(t, level)
			marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
			helper := exec.Command(os.Args[0], "-test.run", "^TestRunDiesWithCaller$")
			// The helper's own directories (its run's Dir, a read-only path)
			// go below one of the test's, removed with it; what rlm makes
			// goes to the usual temporary directory, where the sweep looks.
			helper.Env = append(os.Environ(), "RLM_ISOLATE_ORPHAN_HELPER="+string(level), "RLM_ISOLATE_MARKER="+marker,
				"RLM_ISOLATE_ORPHAN_SCRATCH="+t.TempDir())
			out, err := helper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			helper.Stderr = os.Stderr
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			defer helper.Process.Kill()
			sc := bufio.NewScanner(out)
			ready := false
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "HELPER-READY") {
					ready = true
					break
				}
			}
			if !ready {
				t.Fatal("helper never started its run")
			}
			if !eventually(5*time.Second, func() bool { return len(withMarker(marker)) == 1 }) {
				t.Fatalf("host sees %d sandboxed sleepers before the kill, want 1", len(withMarker(marker)))
			}
			helper.Process.Signal(syscall.SIGKILL)
			helper.Wait()
			if !eventually(5*time.Second, func() bool { return len(withMarker(marker)) == 0 }) {
				t.Fatalf("run survived its caller: %v", withMarker(marker))
			}
			// A new run sweeps the dead caller's cgroups.
			left := func() (n int) {
				for _, c := range []string{"memory", "pids"} {
					if parent, _, err := controllerParent(c); err == nil {
						ents, _ := os.ReadDir(parent)
						for _, e := range ents {
							if strings.HasPrefix(e.Name(), fmt.Sprintf("rlm-isolate-%d-", helper.Process.Pid)) {
								n++
							}
						}
					}
				}
				return n
			}
			if left() == 0 {
				t.Fatal("the killed caller left no cgroups: the sweep check would prove nothing")
			}
			// ... and, as root, what it left on the host: the capped tmpfs of
			// a process-level run, or the stage of a namespace run's
			// read-only path that uid 65534 cannot reach. A namespace run's
			// working directory is never on the host at all.
			hostLeft := func(prefix string) (dirs, mounts int) {
				name := fmt.Sprintf("%s%d-", prefix, helper.Process.Pid)
				for _, d := range distinct.Strings([]string{os.TempDir(), "/tmp"}, filepath.Clean) {
					ents, _ := os.ReadDir(d)
					for _, e := range ents {
						if strings.HasPrefix(e.Name(), name) {
							dirs++
						}
					}
				}
				b, _ := os.ReadFile("/proc/self/mountinfo")
				return dirs, strings.Count(string(b), "/"+name)
			}
			leftPrefix := wsPrefix
			if level == LevelNamespace {
				leftPrefix = roPrefix
				if d, m := hostLeft(wsPrefix); d+m != 0 {
					t.Fatalf("a namespace run left a working directory on the host (%d dirs, %d mounts): it should live only inside the sandbox", d, m)
				}
			}
			if d, m := hostLeft(leftPrefix); os.Geteuid() == 0 && (d == 0 || m == 0) {
				t.Fatalf("the killed caller left %d %s* directories and %d mounts: the sweep check would prove nothing", d, leftPrefix, m)
			}
			sweepOnce, wsSweepOnce = *new(sync.Once), *new(sync.Once)
			spec := shSpec(t, level, "echo TOKEN")
			r := run(t, spec)
			mustToken(t, r, "TOKEN")
			if n := left(); n != 0 {
				t.Fatalf("%d cgroups of the dead caller not swept", n)
			}
			if d, m := hostLeft(leftPrefix); d+m != 0 {
				t.Fatalf("the dead caller's %d %s* directories and %d mounts not swept", d, leftPrefix, m)
			}
		})
	}
}

func orphanHelper() {
	level := Level(os.Getenv("RLM_ISOLATE_ORPHAN_HELPER"))
	scratch := os.Getenv("RLM_ISOLATE_ORPHAN_SCRATCH")
	dir, _ := os.MkdirTemp(scratch, "orphan-")
	spec := Spec{Spec: isolation.Spec{Level: level, Argv: []string{"/bin/sh", "-c", "echo HELPER-READY; exec sleep " + os.Getenv("RLM_ISOLATE_MARKER")}, Dir: dir, MaxProcesses: 8, MemoryBytes: 64 << 20}}
	if level == LevelProcess {
		spec.DiskBytes = diskIfRoot()
	} else if os.Geteuid() == 0 {
		// A read-only path below a 0700 directory, as pyenv's Python is
		// below /root: staged through a bind mount on the host.
		private, _ := os.MkdirTemp(scratch, "orphan-ro-")
		os.Mkdir(private+"/rt", 0o755)
		spec.ReadOnlyPaths = []string{private + "/rt"}
	}
	c, err := Command(context.Background(), spec)
	if err != nil {
		fmt.Println("HELPER-ERROR", err)
		os.Exit(1)
	}
	c.Stdout = os.Stdout
	if err := c.Start(); err != nil {
		fmt.Println("HELPER-ERROR", err)
		os.Exit(1)
	}
	time.Sleep(200 * time.Millisecond) // let sh exec sleep
	select {}                          // wait to be killed
}

// diskIfRoot caps the helper's working directory (a tmpfs, which needs
// root) so that its run has a private directory to leave behind.
func diskIfRoot() int64 {
	if os.Geteuid() == 0 {
		return 16 << 20
	}
	return 0
}
