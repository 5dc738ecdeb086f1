package isolate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/isolation"
)

// fakeProc points the cgroup discovery at fake /proc/self files.
func fakeProc(t *testing.T, cgroup, mountinfo string) {
	t.Helper()
	dir := t.TempDir()
	c, m := filepath.Join(dir, "cgroup"), filepath.Join(dir, "mountinfo")
	os.WriteFile(c, []byte(cgroup), 0o644)
	os.WriteFile(m, []byte(mountinfo), 0o644)
	oldC, oldM := procSelfCgroup, procSelfMountinfo
	procSelfCgroup, procSelfMountinfo = c, m
	t.Cleanup(func() { procSelfCgroup, procSelfMountinfo = oldC, oldM })
}

func TestControllerParentHybrid(t *testing.T) {
	// This project's CI host: memory and pids on v1, an empty v2 beside them.
	fakeProc(t, "8:pids:/\n4:memory:/process_api/abc\n0::/\n",
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"+
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"+
			"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"+
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	for ctrl, want := range map[string]string{"memory": "/sys/fs/cgroup/memory/process_api/abc", "pids": "/sys/fs/cgroup/pids"} {
		dir, v, err := controllerParent(ctrl)
		if err != nil || v != 1 || dir != want {
			t.Errorf("%s: got %q v%d %v, want %q v1", ctrl, dir, v, err, want)
		}
	}
}

func TestControllerParentContainerRoot(t *testing.T) {
	// A container whose cgroup mount shows only its own subtree.
	fakeProc(t, "5:memory,foo:/docker/xyz/sub\n",
		"35 31 0:32 /docker/xyz /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,foo\n")
	dir, _, err := controllerParent("memory")
	if err != nil || dir != "/sys/fs/cgroup/memory/sub" {
		t.Fatalf("got %q %v", dir, err)
	}
}

func TestControllerParentV2(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(root, "user.slice", "rlm.scope")
	os.MkdirAll(self, 0o755)
	os.WriteFile(filepath.Join(self, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644)
	fakeProc(t, "0::/user.slice/rlm.scope\n", "30 23 0:27 / "+root+" rw - cgroup2 cgroup2 rw\n")
	dir, v, err := controllerParent("pids")
	if err != nil || v != 2 || dir != self {
		t.Fatalf("got %q v%d %v", dir, v, err)
	}
	if _, _, err := controllerParent("hugetlb"); err == nil || !strings.Contains(err.Error(), "delegate") {
		t.Fatalf("missing controller: got %v", err)
	}
	if _, _, err := controllerParent("memory"); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupV2ConfigureAndStats(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"memory.max", "memory.swap.max", "memory.oom.group", "pids.max"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.peak"), []byte("123456\n"), 0o644)
	cg := &cgroupDir{path: dir, version: 2}
	spec := &Spec{Spec: isolation.Spec{MemoryBytes: 64 << 20, MaxProcesses: 10}}
	if err := cg.configure("memory", spec); err != nil {
		t.Fatal(err)
	}
	if err := cg.configure("pids", spec); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "10"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	rc := &runCgroups{mem: cg, pids: cg, dirs: []*cgroupDir{cg}}
	oom, pmax, peak := rc.stats()
	if oom != 1 || pmax != 3 || peak != 123456 {
		t.Fatalf("stats = %d %d %d", oom, pmax, peak)
	}
}

func TestCgroupV1Configure(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.swappiness"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 0o644)
	cg := &cgroupDir{path: dir, version: 1}
	if err := cg.configure("memory", &Spec{Spec: isolation.Spec{MemoryBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != "1048576" {
			t.Errorf("%s = %q", f, b)
		}
	}
	if oom, _, _ := (&runCgroups{mem: cg}).stats(); oom != 2 {
		t.Errorf("oom_kill = %d", oom)
	}
}
