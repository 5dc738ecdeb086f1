// Package python is the native Python runtime: programs run by the real
// CPython interpreter, and REPL sessions run by an embedded driver that
// speaks JSON-RPC 2.0 to the host on private pipes.
package python

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/internal/inproc"
	"github.com/rlmkit/rlm/plugins/internal/warm"
)

// probeScript prints what the plugin needs to know about an interpreter in
// one start: pyenv-style shims cost ~170 ms each, so the real executable is
// resolved once and cached by toolpath.
const probeScript = `import sys, json; print(json.dumps({"exe": sys.executable, "version": "Python %d.%d.%d" % sys.version_info[:3], "prefix": sys.prefix, "major": sys.version_info[0], "minor": sys.version_info[1]}))`

// Probe resolves a python3 found on PATH to the real interpreter.
func Probe(path string) (toolpath.Tool, error) {
	out, err := exec.Command(path, "-c", probeScript).Output()
	if err != nil {
		return toolpath.Tool{}, fmt.Errorf("%s does not run: %v", path, err)
	}
	var p struct {
		Exe, Version, Prefix string
		Major, Minor         int
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return toolpath.Tool{}, fmt.Errorf("%s: unexpected probe output %q", path, out)
	}
	if p.Exe == "" {
		p.Exe = path
	}
	return toolpath.Tool{Exe: p.Exe, Version: p.Version, Extra: map[string]string{
		"prefix": p.Prefix, "major": strconv.Itoa(p.Major), "minor": strconv.Itoa(p.Minor)}}, nil
}

// checkVersion refuses interpreters older than 3.8, which the driver needs.
func checkVersion(t toolpath.Tool) error {
	maj, _ := strconv.Atoi(t.Extra["major"])
	minr, _ := strconv.Atoi(t.Extra["minor"])
	if maj < 3 || (maj == 3 && minr < 8) {
		return fmt.Errorf("%s is %s; rlm needs Python 3.8 or newer", t.Exe, t.Version)
	}
	return nil
}

// programEnv is what a program's environment has besides program.BaseEnv:
// bytecode caches would land in the workspace and come back as produced
// files. The warm sandboxes' workers start with it too (warm.Config.Env).
var programEnv = []string{"PYTHONDONTWRITEBYTECODE=1"}

// warmEnv is the warm workers' environment, built once rather than for
// every run that asks for its pool.
var warmEnv = warm.RunEnv(programEnv...)

// Runtime describes python for core/plugin/native.
var Runtime = &native.Runtime{
	Name:     "python",
	Language: "python",
	Ext:      ".py",
	CodeFile: "main.py",
	Tool:     "python3",
	Probe:    Probe,
	Check:    checkVersion,
	Env: func(toolpath.Tool, *program.Workspace) []string {
		return programEnv
	},
	// Programs under namespace run in warm sandboxes: the worker is this
	// interpreter, and each program the file run as __main__ in its fork.
	Sandbox: &inproc.Sandbox{Warm: func(t toolpath.Tool) (warm.Config, bool) {
		return warm.Config{Mode: warm.ModePython, Python: t.Exe, Env: warmEnv}, true
	}},
	Installer:    installer,
	InstallEnv:   useInstalled,
	Capabilities: []string{"program", "repl", "check", "files", "requirements"},
	// What Server.OpenSession enforces (sessionIsolation); the host runs
	// no session at a level not listed here.
	SessionLevels: []isolate.Level{isolate.LevelNone, isolate.LevelProcess, isolate.LevelNamespace},
	// compile() checks the code without running it.
	Syntax: native.Syntax(native.SyntaxCheck{Args: []string{"-I", "-c", `import sys
try:
    compile(sys.stdin.read(), "<sandbox>", "exec")
except (SyntaxError, ValueError) as e:
    print("%s: %s (line %s)" % (type(e).__name__, getattr(e, "msg", e), getattr(e, "lineno", "?")))
    sys.exit(1)`}}),
}

// Server is the python plugin's runtime service.
type Server struct {
	native.Server
	forks forkPool
}

// New returns the python runtime service.
func New() *Server {
	s := &Server{}
	rt := *Runtime
	rt.Spawner = s.forks.spawner
	s.Server = native.Server{RT: &rt}
	return s
}

// Main is the plugin binary's entry point.
func Main() {
	// Descendants that escape their process group re-parent here, where
	// they are found and killed, instead of becoming immortal zombies.
	native.Serve(New())
}
