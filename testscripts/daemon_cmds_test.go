package testscripts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Commands for the daemon scripts. Scripts run in parallel, so they never
// look for processes by a name another script's processes could share:
// they record the descendants of their own daemon and check those.

// daemonprocs PIDFILE OUT writes the process named in PIDFILE and all its
// descendants to OUT, one "pid cmdline" a line.
func cmdDaemonProcs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: daemonprocs PIDFILE OUT")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	if err != nil {
		ts.Fatalf("daemonprocs: %s holds no pid", args[0])
	}
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var b strings.Builder
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		fmt.Fprintf(&b, "%d %s\n", p, cmdline(p))
		queue = append(queue, children[p]...)
	}
	if err := os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o644); err != nil {
		ts.Fatalf("daemonprocs: %v", err)
	}
}

// killproc FILE PATTERN sends SIGKILL to the first process listed in FILE
// (by daemonprocs) whose command line contains PATTERN and that still runs.
func cmdKillProc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: killproc FILE PATTERN")
	}
	for _, p := range listedProcs(ts, args[0]) {
		if strings.Contains(p.cmd, args[1]) && p.alive() {
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
				ts.Fatalf("killproc: %v", err)
			}
			ts.Logf("killed %d %s", p.pid, p.cmd)
			return
		}
	}
	ts.Fatalf("killproc: no running process in %s matches %q", args[0], args[1])
}

// signalpid SIGNAL PIDFILE sends SIGNAL (TERM, INT, HUP or KILL) to the
// process whose pid PIDFILE holds (testscript's kill knows INT and KILL
// only, and only for its own background commands).
func cmdSignalPID(ts *testscript.TestScript, neg bool, args []string) {
	sigs := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "KILL": syscall.SIGKILL}
	if neg || len(args) != 2 || sigs[args[0]] == 0 {
		ts.Fatalf("usage: signalpid TERM|INT|HUP|KILL PIDFILE")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[1])))
	if err != nil || pid <= 0 {
		ts.Fatalf("signalpid: %s holds no pid", args[1])
	}
	if err := syscall.Kill(pid, sigs[args[0]]); err != nil {
		ts.Fatalf("signalpid: %v", err)
	}
}

// gone FILE waits up to 5 s until no process listed in FILE is running
// (a zombie counts as gone: it holds no resources but its pid).
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gone FILE")
	}
	procs := listedProcs(ts, args[0])
	if len(procs) == 0 {
		ts.Fatalf("gone: %s lists no processes", args[0])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, p := range procs {
			if p.alive() {
				left = append(left, fmt.Sprintf("%d %s", p.pid, p.cmd))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("still running:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually [-match REGEX] CMD ARGS... runs CMD every 50 ms, for up to
// 15 s, until it succeeds (and its stdout matches REGEX), leaving the last
// run's output for stdout/stderr checks. For state the daemon reaches in
// the background, such as a replaced worker.
func cmdEventually(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: eventually [-match REGEX] CMD ARGS...")
	}
	var re *regexp.Regexp
	if args[0] == "-match" && len(args) > 2 {
		re = regexp.MustCompile(args[1])
		args = args[2:]
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := ts.Exec(args[0], args[1:]...)
		if err == nil && (re == nil || re.MatchString(ts.ReadFile("stdout"))) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("eventually: %s never succeeded (last: %v)", strings.Join(args, " "), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type listedProc struct {
	pid int
	cmd string
}

// alive: the pid runs, is not a zombie, and is still the same program.
func (p listedProc) alive() bool {
	_, state, ok := procStat(p.pid)
	return ok && state != 'Z' && cmdline(p.pid) == p.cmd
}

func listedProcs(ts *testscript.TestScript, file string) []listedProc {
	var out []listedProc
	for _, line := range strings.Split(ts.ReadFile(file), "\n") {
		pid, cmd, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(pid)
		if ok && err == nil {
			out = append(out, listedProc{n, cmd})
		}
	}
	return out
}

func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, f[0][0], err == nil
}

// cmdline is the start of pid's command line on one line (an interpreter
// given its driver with -c has the whole script there).
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	b = bytes.TrimRight(b, "\x00")
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.Map(func(r rune) rune {
		if r == 0 || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, string(b))
}

// stopDaemons stops any daemon a script left running (a script that failed
// before its `rlm daemon stop`): every pid file in the work directory and
// ~/.rlm whose daemon still runs gets SIGTERM, which drains and kills its
// plugins and workers, and SIGKILL if it has not exited within 10 s.
func stopDaemons(workDir string) {
	files, _ := filepath.Glob(filepath.Join(workDir, "*.pid"))
	more, _ := filepath.Glob(filepath.Join(workDir, "home", ".rlm", "*.pid"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !strings.Contains(cmdline(pid), " daemon") {
			continue
		}
		p := listedProc{pid, cmdline(pid)}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(10 * time.Second); p.alive() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if p.alive() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
