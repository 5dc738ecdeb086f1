package warm

import (
	"os/exec"
	"strings"
	"sync"

	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// execEnv is the environment ModeExec's workers start with (Config.Env).
var execEnv = RunEnv()

var (
	pyOnce          sync.Once
	pyExe, pyPrefix string
	pyErr           error
)

// ExecConfig is the warm sandbox of a runtime that execs its program (bash,
// node): the host's python3 runs the worker, which execs the runtime's tool
// for each program (core/plugin/native adds the tool's own read-only paths). ok is
// false when the host has no python3.
func ExecConfig(toolpath.Tool) (cfg Config, ok bool) {
	exe, prefix, err := FindPython()
	if err != nil {
		return Config{}, false
	}
	return Config{Mode: ModeExec, Python: exe, ReadOnlyPaths: []string{prefix}, Env: execEnv}, true
}

// FindPython resolves the python3 on PATH to the real interpreter (a
// pyenv-style shim costs ~170 ms a start) and its installation prefix, once
// per process: ModeExec's worker needs a Python although the runtime it
// serves (bash, node) does not.
func FindPython() (exe, prefix string, err error) {
	pyOnce.Do(func() {
		p, err := exec.LookPath("python3")
		if err != nil {
			pyErr = err
			return
		}
		out, err := exec.Command(p, "-c", "import sys; print(sys.executable); print(sys.prefix)").Output()
		if err != nil {
			pyErr = err
			return
		}
		f := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(f) != 2 || f[0] == "" {
			pyErr = exec.ErrNotFound
			return
		}
		pyExe, pyPrefix = f[0], f[1]
	})
	return pyExe, pyPrefix, pyErr
}
