package warm

import (
	"os/exec"
	"strings"
	"sync"
)

var (
	pyOnce          sync.Once
	pyExe, pyPrefix string
	pyErr           error
)

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
