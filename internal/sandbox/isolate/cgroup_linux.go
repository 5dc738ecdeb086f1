package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// The files cgroup discovery reads; tests point them at fakes.
var (
	procSelfCgroup    = "/proc/self/cgroup"
	procSelfMountinfo = "/proc/self/mountinfo"
)

// cgroupDir is one per-run child cgroup of one hierarchy.
type cgroupDir struct {
	path    string // absolute directory of the child cgroup
	version int    // 1 or 2
}

// runCgroups holds the per-run child cgroups. On cgroup v2 mem and pids are
// the same directory; on v1 (or a hybrid host) they are two.
type runCgroups struct {
	mem, pids *cgroupDir
	dirs      []*cgroupDir // unique, for join/kill/remove
}

var cgroupSeq atomic.Int64

// noCgroupsForTest makes runs behave as on a host without usable cgroups.
var noCgroupsForTest bool

// controllerParent finds the directory of the calling process's cgroup for
// one controller ("memory" or "pids") and the hierarchy's version. A v1
// hierarchy wins over v2 because a controller bound to v1 is absent from v2.
func controllerParent(controller string) (string, int, error) {
	self, err := os.ReadFile(procSelfCgroup)
	if err != nil {
		return "", 0, err
	}
	v1Path, v2Path, haveV2 := "", "", false
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				v1Path = parts[2]
			}
		}
	}
	mounts, err := os.ReadFile(procSelfMountinfo)
	if err != nil {
		return "", 0, err
	}
	var v2Mount, v2Root string
	for _, line := range strings.Split(string(mounts), "\n") {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(line)
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		root, mnt, fstype, super := fields[3], unescapeMount(fields[4]), fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup":
			if v1Path == "" {
				continue
			}
			for _, o := range strings.Split(super, ",") {
				if o == controller {
					return filepath.Join(mnt, relTo(v1Path, root)), 1, nil
				}
			}
		case "cgroup2":
			if v2Mount == "" {
				v2Mount, v2Root = mnt, root
			}
		}
	}
	if !haveV2 || v2Mount == "" {
		return "", 0, fmt.Errorf("no cgroup hierarchy has the %s controller", controller)
	}
	dir := filepath.Join(v2Mount, relTo(v2Path, v2Root))
	ctrls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", 0, err
	}
	if !hasWord(string(ctrls), controller) {
		return "", 0, fmt.Errorf("cgroup v2 %s does not offer the %s controller (delegate it to rlm's cgroup)", dir, controller)
	}
	return dir, 2, nil
}

type parentResult struct {
	dir     string
	version int
	err     error
}

var (
	parentMu    sync.Mutex
	parentCache = map[string]parentResult{}
)

// processControllerParent is controllerParent for this process, read once:
// a process's own cgroup does not move under it, and parsing mountinfo
// costs ~65 µs, which every run (and every plugin kill) would pay twice.
func processControllerParent(controller string) (string, int, error) {
	parentMu.Lock()
	defer parentMu.Unlock()
	r, ok := parentCache[controller]
	if !ok {
		r.dir, r.version, r.err = controllerParent(controller)
		parentCache[controller] = r
	}
	return r.dir, r.version, r.err
}

func relTo(path, root string) string {
	if root == "/" {
		return path
	}
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// newRunCgroups creates the per-run child cgroups and writes the limits.
// It returns what it enforces, and the reasons a controller was unusable.
func newRunCgroups(spec *Spec) (*runCgroups, []string, []string) {
	rc := &runCgroups{}
	if noCgroupsForTest {
		return rc, nil, []string{"disabled by a test"}
	}
	sweepStaleCgroups()
	var enforced, missing []string
	name := fmt.Sprintf("rlm-isolate-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	byPath := map[string]*cgroupDir{}
	for _, ctrl := range []string{"memory", "pids"} {
		parent, version, err := processControllerParent(ctrl)
		if err != nil {
			missing = append(missing, ctrl+": "+err.Error())
			continue
		}
		dir := filepath.Join(parent, name)
		cg := byPath[dir]
		if cg == nil {
			if version == 2 {
				if err := enableV2Controllers(parent); err != nil {
					missing = append(missing, ctrl+": "+err.Error())
					continue
				}
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				missing = append(missing, ctrl+": "+err.Error())
				continue
			}
			cg = &cgroupDir{path: dir, version: version}
			byPath[dir] = cg
			rc.dirs = append(rc.dirs, cg)
		}
		if err := cg.configure(ctrl, spec); err != nil {
			missing = append(missing, ctrl+": "+err.Error())
			continue
		}
		tag := "cgroup-v" + strconv.Itoa(version)
		if ctrl == "memory" {
			rc.mem = cg
			if spec.MemoryBytes > 0 {
				enforced = append(enforced, "memory="+tag)
			}
		} else {
			rc.pids = cg
			if spec.MaxProcesses > 0 {
				enforced = append(enforced, "pids="+tag)
			}
		}
	}
	return rc, enforced, missing
}

// enableV2Controllers turns on memory and pids for children of parent.
// This fails with EBUSY when parent holds processes itself and is not the
// root (cgroup v2's "no internal processes" rule); the error says so.
func enableV2Controllers(parent string) error {
	sub := filepath.Join(parent, "cgroup.subtree_control")
	cur, _ := os.ReadFile(sub)
	for _, c := range []string{"memory", "pids"} {
		if hasWord(string(cur), c) {
			continue
		}
		if err := os.WriteFile(sub, []byte("+"+c), 0); err != nil {
			return fmt.Errorf("cannot enable the %s controller in %s: %v (on cgroup v2 run rlm in a delegated cgroup of its own, e.g. systemd-run --scope -p Delegate=yes)", c, parent, err)
		}
	}
	return nil
}

func (cg *cgroupDir) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(cg.path, file), []byte(value), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, filepath.Join(cg.path, file), err)
	}
	return nil
}

func (cg *cgroupDir) exists(file string) bool {
	_, err := os.Stat(filepath.Join(cg.path, file))
	return err == nil
}

func (cg *cgroupDir) configure(ctrl string, spec *Spec) error {
	switch {
	case ctrl == "memory" && spec.MemoryBytes > 0 && cg.version == 1:
		n := strconv.FormatInt(spec.MemoryBytes, 10)
		if err := cg.write("memory.limit_in_bytes", n); err != nil {
			return err
		}
		// memsw (memory+swap) must be >= limit_in_bytes, so it comes second.
		if cg.exists("memory.memsw.limit_in_bytes") {
			if err := cg.write("memory.memsw.limit_in_bytes", n); err != nil {
				return err
			}
		}
		_ = cg.write("memory.swappiness", "0") // refused on some kernels; memsw already holds swap
	case ctrl == "memory" && spec.MemoryBytes > 0:
		if err := cg.write("memory.max", strconv.FormatInt(spec.MemoryBytes, 10)); err != nil {
			return err
		}
		if cg.exists("memory.swap.max") {
			if err := cg.write("memory.swap.max", "0"); err != nil {
				return err
			}
		}
		_ = cg.write("memory.oom.group", "1") // kill the whole run on OOM where supported
	case ctrl == "pids" && spec.MaxProcesses > 0:
		return cg.write("pids.max", strconv.FormatInt(spec.MaxProcesses, 10))
	}
	return nil
}

// join moves pid into every per-run cgroup.
func (rc *runCgroups) join(pid int) error {
	for _, cg := range rc.dirs {
		if err := cg.write("cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func readPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// killCgroupDirs SIGKILLs every process in the run's cgroups until they are empty
// (a fork racing the sweep is caught on the next pass) or the deadline passes.
// It returns how many processes it signalled.
func killCgroupDirs(dirs []string, deadline time.Duration) (int, error) {
	killed := 0
	end := time.Now().Add(deadline)
	for {
		left := 0
		for _, d := range dirs {
			for _, pid := range readPids(d) {
				left++
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		}
		if left == 0 {
			return killed, nil
		}
		if time.Now().After(end) {
			return killed, fmt.Errorf("%d processes still in %v after SIGKILL", left, dirs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (rc *runCgroups) paths() []string {
	var p []string
	for _, cg := range rc.dirs {
		p = append(p, cg.path)
	}
	return p
}

// stats reads OOM kills, pids-limit hits and the memory high-water mark.
func (rc *runCgroups) stats() (oomKills, pidsMax, peak int64) {
	return rc.statsWith(readFile)
}

// statsWith is stats reading each file with read (nil when unreadable):
// os.ReadFile for a run's own cgroups, descriptors kept open for a warm
// sandbox's (sharedState.read).
func (rc *runCgroups) statsWith(read func(path string) []byte) (oomKills, pidsMax, peak int64) {
	if rc.mem != nil {
		if rc.mem.version == 1 {
			oomKills = keyedValue(read(filepath.Join(rc.mem.path, "memory.oom_control")), "oom_kill")
			peak = parseInt(read(filepath.Join(rc.mem.path, "memory.max_usage_in_bytes")))
		} else {
			oomKills = keyedValue(read(filepath.Join(rc.mem.path, "memory.events")), "oom_kill")
			peak = parseInt(read(filepath.Join(rc.mem.path, "memory.peak")))
		}
	}
	if rc.pids != nil {
		pidsMax = keyedValue(read(filepath.Join(rc.pids.path, "pids.events")), "max")
	}
	return
}

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// keyedValue is the number after key in a cgroup's "key value" lines.
func keyedValue(b []byte, key string) int64 {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if f := bytes.Fields(line); len(f) == 2 && string(f[0]) == key {
			return parseInt(f[1])
		}
	}
	return 0
}

func parseInt(b []byte) int64 {
	n, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n
}

func fileInt(file string) int64 {
	return parseInt(readFile(file))
}

// remove kills what is left and removes the cgroup directories. rmdir can
// briefly fail with EBUSY while the last killed tasks finish exiting.
func (rc *runCgroups) remove() error {
	if rc == nil {
		return nil
	}
	_, kerr := killCgroupDirs(rc.paths(), 5*time.Second)
	var errs []error
	if kerr != nil {
		errs = append(errs, kerr)
	}
	for _, cg := range rc.dirs {
		if err := rmdirRetry(cg.path, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	rc.dirs = nil
	return errors.Join(errs...)
}

func rmdirRetry(dir string, wait time.Duration) error {
	end := time.Now().Add(wait)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var sweepOnce sync.Once

// sweepStaleCgroups removes rlm-isolate-PID-N cgroups left by a process that
// died before its Cleanup (a crash, SIGKILL). It runs once per process.
func sweepStaleCgroups() {
	sweepOnce.Do(func() {
		reapCgroups(func(pid int) bool {
			return pid != os.Getpid() && !proctree.Alive(pid)
		})
	})
}

// ReapOwner kills every process left in the cgroups of runs started by
// process owner, and removes those cgroups and the runs' private working
// directories. A host calls it after it killed a plugin: the plugin's
// programs may have left daemons behind (setsid, double fork) that its own
// cleanup never got to, and they must not wait for the next rlm's sweep.
// tmpDirs are where the owner made temporary files besides the usual ones
// (its $TMPDIR): a working directory's tmpfs there must be unmounted before
// the directory can be removed.
func ReapOwner(owner int, tmpDirs ...string) {
	if owner > 0 && owner != os.Getpid() {
		reapCgroups(func(pid int) bool { return pid == owner })
		reapWorkspaces(func(pid int) bool { return pid == owner }, tmpDirs...)
	}
}

// reapCgroups kills and removes the rlm-isolate-PID-N cgroups whose PID
// match accepts.
func reapCgroups(match func(pid int) bool) {
	for _, ctrl := range []string{"memory", "pids"} {
		parent, _, err := processControllerParent(ctrl)
		if err != nil {
			continue
		}
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			var pid, seq int
			if !e.IsDir() {
				continue
			}
			if n, _ := fmt.Sscanf(e.Name(), "rlm-isolate-%d-%d", &pid, &seq); n != 2 || !match(pid) {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			_, _ = killCgroupDirs([]string{dir}, time.Second)
			_ = rmdirRetry(dir, time.Second)
		}
	}
}
