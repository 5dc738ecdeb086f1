// Package testscripts holds rlm's end-to-end tests: each testdata/**/*.txtar
// runs real rlm and plugin binaries (this test binary, re-executed under
// their names) against real interpreters.
package testscripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/cmd/rlm/cli/root"
	"github.com/rlmkit/rlm/examples/gen"
	"github.com/rlmkit/rlm/plugins/compiled"
	"github.com/rlmkit/rlm/plugins/golang"
	"github.com/rlmkit/rlm/plugins/node"
	"github.com/rlmkit/rlm/plugins/pyodide"
	"github.com/rlmkit/rlm/plugins/python"
	"github.com/rlmkit/rlm/plugins/shell"
)

// commands are the binaries under test. Plugins are here so that every
// script finds them beside rlm, as an installed rlm would.
var commands = map[string]func(){
	"rlm":                func() { os.Exit(root.Main(os.Args[1:])) },
	"rlm-plugin-python":  python.Main,
	"rlm-plugin-node":    node.Main,
	"rlm-plugin-golang":  golang.Main,
	"rlm-plugin-shell":   shell.Main,
	"rlm-plugin-pyodide": pyodide.Main,
	"rlm-gen-examples":   gen.Main,
	"rlm-plugin-c":       func() { compiled.Main(compiled.C) },
	"rlm-plugin-cpp":     func() { compiled.Main(compiled.CPP) },
	"rlm-plugin-java":    func() { compiled.Main(compiled.Java) },
	"rlm-plugin-rust":    func() { compiled.Main(compiled.Rust) },
}

var sharedCache string

func TestMain(m *testing.M) {
	testscript.Main(cleanupM{m}, commands)
}

// cleanupM gives the scripts a shared cache for tool probes (a pyenv shim
// costs ~170 ms a start) and removes it when the tests are done; it is made
// only in the top-level test process, not in the re-executed commands.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	sharedCache, _ = os.MkdirTemp("", "rlm-testscripts-cache-")
	defer os.RemoveAll(sharedCache)
	return c.m.Run()
}

func TestScripts(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/*")
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || filepath.Base(dir) == "daemon" {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// serve keeps a plugin alive for a whole script, which scripts
			// checking that no plugin is left (noprocs rlm-plugin-python)
			// would see: it runs alone, before the parallel ones start.
			if filepath.Base(dir) != "serve" {
				t.Parallel()
			}
			testscript.Run(t, params(dir))
		})
	}
}

// TestDaemonScripts runs testdata/daemon after the other scripts, not
// beside them: a daemon keeps rlm-plugin-python processes running, which
// scripts that check by name that no plugin is left would see.
func TestDaemonScripts(t *testing.T) {
	testscript.Run(t, params("testdata/daemon"))
}

func params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Condition: func(cond string) (bool, error) {
			if cond == "browser" {
				return condBrowser()
			}
			if cond == "mcpclient" {
				return mcpClientCondition()
			}
			if cond == "e2bclient" {
				return e2bClientCondition()
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			// $RLMBIN holds only rlm and its plugins (testscript puts it
			// first on PATH): PATH=$RLMBIN hides every runtime's tool.
			env.Setenv("RLMBIN", filepath.SplitList(env.Getenv("PATH"))[0])
			env.Setenv("XDG_CACHE_HOME", sharedCache)
			env.Setenv("RLM_CONFIG", "")
			env.Setenv("RLM_PLUGIN_PATH", "")
			// Go builds (the golang runtime's, and scripts that build a
			// plugin) share the host's caches instead of starting cold.
			for k, v := range goEnv() {
				env.Setenv(k, v)
			}
			// RLM_SRC is the repository, for scripts that build examples.
			if src, err := filepath.Abs(".."); err == nil {
				env.Setenv("RLM_SRC", src)
			}
			// RLM_TEST_BIN is where rlm and the built-in plugins are, for
			// scripts that need rlm without its plugins beside it.
			if rlm, err := exec.LookPath("rlm"); err == nil {
				env.Setenv("RLM_TEST_BIN", filepath.Dir(rlm))
			}
			// $EXAMPLES is the repository's examples directory.
			if ex, err := filepath.Abs("../examples"); err == nil {
				env.Setenv("EXAMPLES", ex)
			}
			env.Setenv("RLM_DAEMON_SOCKET", "")
			env.Defer(func() { stopDaemons(env.WorkDir) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"noprocs":    cmdNoProcs,
			"filesize":   cmdFileSize,
			"countlines": cmdCountLines,
			"freeport":   cmdFreePort,
			"waitfor":    cmdWaitFor,
			"http":       cmdHTTP,
			"jsonvar":    cmdJSONVar,
			"resultkeys": cmdResultKeys,
			"signal":     cmdSignal,
			// daemon scripts (daemon_cmds_test.go)
			"daemonprocs": cmdDaemonProcs,
			"killproc":    cmdKillProc,
			"gone":        cmdGone,
			"signalpid":   cmdSignalPID,
			"eventually":  cmdEventually,
			// hostile scripts (hostile_cmds_test.go)
			"token":      cmdToken,
			"sandboxtmp": cmdSandboxTmp,
			"leftovers":  cmdLeftovers,
			"nostray":    cmdNoStray,
			"pidof":      cmdPidOf,
			"listen":     cmdListen,
			"heard":      cmdHeard,
			"waitglob":   cmdWaitGlob,
			"burst":      cmdBurst,
			// trace viewer scripts (browse_cmds_test.go)
			"browse": cmdBrowse,
			// session scripts (session_cmds_test.go)
			"httpstart": cmdHTTPStart,
			"httpwait":  cmdHTTPWait,
			// load under drain (load_cmds_test.go)
			"load": cmdLoad,
			// model scripts (llm_cmds_test.go)
			"fakellm":  cmdFakeLLM,
			"llmcalls": cmdLLMCalls,
			// run scripts (runs_cmds_test.go)
			"fakerlm":    cmdFakeRLM,
			"httpstream": cmdHTTPStream,
			"waitline":   cmdWaitLine,
		},
	}
}

var (
	goEnvOnce sync.Once
	goEnvVars map[string]string
)

// goEnv is the host's Go cache and proxy settings, asked of `go env` once.
func goEnv() map[string]string {
	goEnvOnce.Do(func() {
		goEnvVars = map[string]string{}
		keys := []string{"GOCACHE", "GOMODCACHE", "GOPROXY", "GOFLAGS", "GONOSUMDB", "GOPRIVATE"}
		out, err := exec.Command("go", append([]string{"env"}, keys...)...).Output()
		if err != nil {
			return
		}
		for i, v := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if i < len(keys) && v != "" {
				goEnvVars[keys[i]] = v
			}
		}
	})
	return goEnvVars
}

// exits N CMD ARGS... runs CMD like exec and checks its exit status is N,
// leaving its output for stdout/stderr checks.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N CMD ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not a number", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// noprocs PATTERN... waits up to 3 s for no process whose command line
// contains any PATTERN to remain (zombies count as gone only once reaped).
// Only this script's processes count: those whose environment or working
// directory mentions its $WORK (plugins inherit it, programs run under its
// TMPDIR), so scripts running in parallel, here or in another checkout on
// the same machine, do not see each other's processes.
func cmdNoProcs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: noprocs PATTERN...")
	}
	waitNoProcs(ts, args, ts.Getenv("WORK"), "processes still running")
}

// waitNoProcs waits up to 3 s for no process whose command line contains
// any of patterns (and, unless work is "", that belongs to the script whose
// work directory is work), and fails with what says which remain.
func waitNoProcs(ts *testscript.TestScript, patterns []string, work, what string) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := matchingProcs(patterns, work)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: %s", what, strings.Join(left, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func matchingProcs(patterns []string, work string) []string {
	var out []string
	for _, p := range patterns {
		for _, pid := range pidsMatching(p) {
			if work == "" || ownedBy(strconv.Itoa(pid), work) {
				out = append(out, fmt.Sprintf("%d: %s", pid, cmdline(pid)))
			}
		}
	}
	return out
}

// ownedBy reports whether process pid belongs to the script whose work
// directory is work.
func ownedBy(pid, work string) bool {
	if cwd, err := os.Readlink(filepath.Join("/proc", pid, "cwd")); err == nil && strings.HasPrefix(cwd, work) {
		return true
	}
	env, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	return err == nil && bytes.Contains(env, []byte(work))
}

// filesize FILE MIN MAX checks that FILE's size is within [MIN, MAX].
func cmdFileSize(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: filesize FILE MIN MAX")
	}
	n := int64(len(ts.ReadFile(args[0])))
	lo, _ := strconv.ParseInt(args[1], 10, 64)
	hi, _ := strconv.ParseInt(args[2], 10, 64)
	in := n >= lo && n <= hi
	if in == neg {
		ts.Fatalf("%s is %d bytes; want %s[%d, %d]", args[0], n, map[bool]string{true: "not in ", false: ""}[neg], lo, hi)
	}
}

// countlines FILE N checks that FILE has exactly N lines.
func cmdCountLines(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: countlines FILE N")
	}
	got := strings.Count(ts.ReadFile(args[0]), "\n")
	want, _ := strconv.Atoi(args[1])
	if (got == want) == neg {
		ts.Fatalf("%s has %d lines, want %d", args[0], got, want)
	}
}
