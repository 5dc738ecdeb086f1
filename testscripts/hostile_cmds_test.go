package testscripts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Commands for testdata/hostile, the end-to-end suite of hostile programs.
// Those scripts run sandboxes whose processes have a scrubbed environment
// and (under --isolation namespace) a working directory of /workspace, so
// they cannot be attributed to a script by $WORK like noprocs does: they
// carry a random $TOKEN in their command line instead, and everything a run
// allocates on the host lives below a directory made by sandboxtmp.

// token VAR sets VAR to 16 random hex digits, a marker no other script (or
// other checkout running the same scripts) shares.
func cmdToken(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: token VAR")
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	ts.Setenv(args[0], hex.EncodeToString(b))
}

// sandboxtmp VAR makes an empty directory that other users may traverse
// (mode 0711, below the system temp dir) and sets VAR to it. With TMPDIR
// pointing there, everything rlm and its plugins allocate for a run (the
// plugin's directory, rlm-run-*, the rlm-isolate-ws-* tmpfs of a
// process-level run with a disk cap, rlm-isolate-ro-*) is made below it, where leftovers can count it;
// $WORK cannot serve, as the sandbox's uid 65534 cannot reach it, and rlm
// would fall back to the shared /tmp. It is removed (mounts detached) when
// the script ends.
func cmdSandboxTmp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sandboxtmp VAR")
	}
	dir, err := os.MkdirTemp("", "rlm-hostile-")
	ts.Check(err)
	ts.Check(os.Chmod(dir, 0o711))
	ts.Defer(func() {
		for _, m := range mountsBelow(dir) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(dir)
	})
	ts.Setenv(args[0], dir)
}

// leftovers [-warm] DIR [PID|@FILE...] waits up to 5 s until nothing a
// finished run allocated remains, and fails naming what does (with -warm,
// the cgroup of a live warm sandbox and its plugin's read-only stage are
// not leftovers: a server keeps them between runs by design):
//   - no rlm-run-*, rlm-isolate-*, rlm-context-* or rlm-session-* entry
//     below DIR (at most 3 levels down; a live plugin's own rlm-plugin-*
//     directory and socket are allowed),
//   - no mount at or below DIR (a run's tmpfs workspace, read-only stages),
//   - no process whose working directory is below DIR,
//   - no rlm-isolate-P-N cgroup (in any hierarchy) owned by a live process P
//     whose environment mentions DIR (rlm and its plugins, which get
//     TMPDIR=DIR), or by one of the PIDs given, or listed in FILE (plugins
//     since killed).
//
// Call it when no run is in flight.
func cmdLeftovers(ts *testscript.TestScript, neg bool, args []string) {
	warmOK := len(args) > 0 && args[0] == "-warm"
	if warmOK {
		args = args[1:]
	}
	if neg || len(args) < 1 {
		ts.Fatalf("usage: leftovers [-warm] DIR [PID|@FILE...]")
	}
	dir := args[0]
	owners := map[int]bool{}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "@") {
			for _, f := range strings.Fields(ts.ReadFile(a[1:])) {
				pid, _ := strconv.Atoi(f)
				owners[pid] = true
			}
			continue
		}
		pid, err := strconv.Atoi(a)
		if err != nil {
			ts.Fatalf("leftovers: %q is not a pid", a)
		}
		owners[pid] = true
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var live map[int]bool
		if warmOK {
			live = warmSandboxTrees()
		}
		left := leftoversBelow(dir, owners, live)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("leftovers of finished runs:\n\t%s", strings.Join(left, "\n\t"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// warmSandboxTrees lists the processes of live warm sandboxes (plugins/internal/warm):
// each worker (pid 1 of its sandbox, its last argument isolate.WarmWorkerArg) and
// every ancestor up to and including the plugin that started it. A warm
// sandbox outlives the runs it served by design; `leftovers -warm` allows
// its cgroup and its owner's read-only stage, and nothing else.
func warmSandboxTrees() map[int]bool {
	out := map[int]bool{}
	for _, pid := range pidsMatching(isolate.WarmWorkerArg) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		isInit := false
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == "1" {
				isInit = true
			}
		}
		if !isInit {
			continue // a request's forked child, not the worker
		}
		for p := pid; p > 1 && !out[p]; {
			out[p] = true
			if strings.Contains(cmdline(p), "rlm-plugin-") {
				break // the plugin that owns the sandbox
			}
			ppid, _, ok := procStat(p)
			if !ok {
				break
			}
			p = ppid
		}
	}
	return out
}

func leftoversBelow(dir string, owners map[int]bool, live map[int]bool) []string {
	var left []string
	base := strings.Count(dir, "/")
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		name := d.Name()
		if owner, ok := stageOwner(name); ok && live[owner] {
			return fs.SkipDir // the read-only stage of a live warm sandbox's plugin
		}
		for _, prefix := range []string{"rlm-run-", "rlm-isolate-", "rlm-context-", "rlm-session-"} {
			if strings.HasPrefix(name, prefix) {
				left = append(left, "temp entry "+p)
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() && strings.Count(p, "/")-base >= 3 {
			return fs.SkipDir
		}
		return nil
	})
	for _, m := range mountsBelow(dir) {
		if owner, ok := stageOwner(filepath.Base(filepath.Dir(m))); ok && live[owner] {
			continue
		}
		left = append(left, "mount "+m)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			left = append(left, fmt.Sprintf("process %d (%s) working in %s", pid, cmdline(pid), cwd))
		}
	}
	for _, cg := range runCgroups() {
		var pid, seq int
		if n, _ := fmt.Sscanf(filepath.Base(cg), "rlm-isolate-%d-%d", &pid, &seq); n != 2 {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if owners[pid] || (err == nil && bytes.Contains(env, []byte(dir))) {
			procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			if inLiveSandbox(strings.Fields(string(procs)), live) {
				continue
			}
			left = append(left, fmt.Sprintf("cgroup %s (processes: %s)", cg, strings.Fields(string(procs))))
		}
	}
	return left
}

// stageOwner reads PID from a read-only stage's name, rlm-isolate-ro-PID-N.
func stageOwner(name string) (int, bool) {
	var pid, n int
	if k, _ := fmt.Sscanf(name, "rlm-isolate-ro-%d-%d", &pid, &n); k != 2 {
		return 0, false
	}
	return pid, true
}

// inLiveSandbox reports whether a cgroup holding procs is a live warm
// sandbox's own: not empty, and every process in it one of live.
func inLiveSandbox(procs []string, live map[int]bool) bool {
	if len(procs) == 0 || len(live) == 0 {
		return false
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p)
		if err != nil || !live[pid] {
			return false
		}
	}
	return true
}

// mountsBelow lists the mount points at or below dir.
func mountsBelow(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// The mount point escapes space, tab, newline and backslash in octal.
		mp := f[4]
		for _, r := range [][2]string{{`\040`, " "}, {`\011`, "\t"}, {`\012`, "\n"}, {`\134`, `\`}} {
			mp = strings.ReplaceAll(mp, r[0], r[1])
		}
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// runCgroups lists the directories named rlm-isolate-* in the cgroup
// hierarchies (a few levels deep: v1 memory cgroups may sit below the
// container's own).
func runCgroups() []string {
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), "rlm-isolate-") {
			out = append(out, p)
			return fs.SkipDir
		}
		if strings.Count(p, "/") >= 7 { // /sys/fs/cgroup/a/b/c/d: not below d
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// nostray PATTERN... waits up to 3 s until no process anywhere on the
// machine has a command line containing any PATTERN. Unlike noprocs it does
// not look for $WORK (sandboxed processes carry none of it), so patterns must
// be unique to the script: include $TOKEN.
func cmdNoStray(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: nostray PATTERN...")
	}
	waitNoProcs(ts, args, "", "processes outlived their run")
}

// pidof VAR PATTERN [OWNER] sets VAR to the pid of the one process whose
// command line contains PATTERN (and, with OWNER, whose environment or
// working directory mentions OWNER). It waits up to 5 s for exactly one.
func cmdPidOf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: pidof VAR PATTERN [OWNER]")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var found []int
		for _, pid := range pidsMatching(args[1]) {
			if _, state, ok := procStat(pid); !ok || state == 'Z' {
				continue
			}
			if len(args) == 3 && !ownedBy(strconv.Itoa(pid), args[2]) {
				continue
			}
			found = append(found, pid)
		}
		if len(found) == 1 {
			ts.Setenv(args[0], strconv.Itoa(found[0]))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("pidof %q: %d processes match, want 1: %v", args[1], len(found), found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listeners counts what the host listeners of each script received,
// keyed by $WORK and protocol.
var listeners sync.Map // string -> *atomic.Int64

// listen tcp|udp VAR starts a listener on 127.0.0.1 on a free port, set in
// VAR, for the rest of the script. TCP connections get "hello-from-host\n"
// and are closed; UDP datagrams are echoed back (a stand-in resolver).
// Either way heard counts them.
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || (args[0] != "tcp" && args[0] != "udp") {
		ts.Fatalf("usage: listen tcp|udp VAR")
	}
	n := new(atomic.Int64)
	listeners.Store(ts.Getenv("WORK")+" "+args[0], n)
	var closer io.Closer
	var port int
	if args[0] == "tcp" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		ts.Check(err)
		closer, port = ln, ln.Addr().(*net.TCPAddr).Port
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				n.Add(1)
				_, _ = c.Write([]byte("hello-from-host\n"))
				c.Close()
			}
		}()
	} else {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		ts.Check(err)
		closer, port = pc, pc.LocalAddr().(*net.UDPAddr).Port
		go func() {
			buf := make([]byte, 2048)
			for {
				k, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				n.Add(1)
				_, _ = pc.WriteTo(buf[:k], from)
			}
		}()
	}
	ts.Defer(func() { closer.Close() })
	ts.Setenv(args[1], strconv.Itoa(port))
}

// heard tcp|udp N checks that the script's listener has received exactly N
// connections (datagrams) so far.
func cmdHeard(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: heard tcp|udp N")
	}
	v, ok := listeners.Load(ts.Getenv("WORK") + " " + args[0])
	if !ok {
		ts.Fatalf("heard: no %s listener (use listen first)", args[0])
	}
	want, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	// The listener's goroutine may count a moment after the client is done.
	time.Sleep(100 * time.Millisecond)
	if got := v.(*atomic.Int64).Load(); got != want {
		ts.Fatalf("the %s listener heard %d, want %d", args[0], got, want)
	}
}

// waitglob PATTERN... waits up to 30 s until a file matches one of the
// PATTERNs (a run in the background got as far as writing it).
func cmdWaitGlob(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitglob PATTERN...")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, p := range args {
			if m, _ := filepath.Glob(p); len(m) > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitglob: nothing matches %s after 30s", strings.Join(args, " or "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// burst N PARALLEL URL BODY REGEXP POSTs the JSON BODY to URL N times, at
// most PARALLEL at once, and fails unless every answer is a 200 whose body
// matches REGEXP. It logs how long the burst took.
func cmdBurst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 5 {
		ts.Fatalf("usage: burst N PARALLEL URL BODY REGEXP")
	}
	n, err1 := strconv.Atoi(args[0])
	par, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil || n < 1 || par < 1 {
		ts.Fatalf("burst: N and PARALLEL must be positive numbers")
	}
	url, body, re := args[2], args[3], regexp.MustCompile(args[4])
	client := &http.Client{Timeout: 2 * time.Minute}
	var (
		mu    sync.Mutex
		fails []string
		wg    sync.WaitGroup
	)
	slots := make(chan struct{}, par)
	start := time.Now()
	for i := 0; i < n; i++ {
		slots <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-slots; wg.Done() }()
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			var msg string
			if err != nil {
				msg = err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !re.Match(b) {
					msg = fmt.Sprintf("%d %s", resp.StatusCode, b)
				}
			}
			if msg != "" {
				mu.Lock()
				fails = append(fails, fmt.Sprintf("request %d: %s", i, msg))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	ts.Logf("burst: %d requests, %d at once, in %v", n, par, time.Since(start).Round(time.Millisecond))
	if len(fails) > 0 {
		if len(fails) > 5 {
			fails = append(fails[:5], fmt.Sprintf("... %d more", len(fails)-5))
		}
		ts.Fatalf("burst: %d of %d requests failed:\n\t%s", len(fails), n, strings.Join(fails, "\n\t"))
	}
}
