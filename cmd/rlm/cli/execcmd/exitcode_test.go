package execcmd

import (
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
)

// TestExitCode: what stopped a program has a status of its own, apart
// from the program's exit 1, as `rlm exec --help` documents.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		res  core.Result
		want int
	}{
		{core.Result{EndedBy: "exit", ExitCode: 3}, 3},
		{core.Result{EndedBy: "timeout", TimedOut: true, ExitCode: -1}, cmdutil.ExitTimeout},
		{core.Result{EndedBy: "fuel", ExitCode: -1}, cmdutil.ExitFuel},
		{core.Result{EndedBy: "install_failed", ExitCode: -1}, cmdutil.ExitInstall},
		{core.Result{EndedBy: "cancelled", ExitCode: -1}, cmdutil.ExitInterrupted},
		{core.Result{EndedBy: "crashed", ExitCode: -1}, cmdutil.ExitFailure},
	} {
		if got := ExitCode(&c.res); got != c.want {
			t.Errorf("ExitCode(ended_by %s) = %d, want %d", c.res.EndedBy, got, c.want)
		}
	}
}

// TestRuntimeForFile: a file's extension names its runtime.
func TestRuntimeForFile(t *testing.T) {
	for file, want := range map[string]string{"hi.js": "node", "a/b.PY": "python", "x.go": "golang", "run.sh": "shell", "notes.txt": "", "-": ""} {
		if got := runtimeForFile(file); got != want {
			t.Errorf("runtimeForFile(%q) = %q, want %q", file, got, want)
		}
	}
}
