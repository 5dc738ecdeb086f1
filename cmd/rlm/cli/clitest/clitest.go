// Package clitest runs the whole rlm command line in process, for the tests
// that drive it end to end (rlm run's, the examples'), so that they start it
// the same way: with the plugins they built and nothing of the user's
// configuration.
package clitest

import (
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/root"
)

// Run runs rlm with args and stdin as its input, finding plugins in
// pluginDir, with a fresh HOME and RLM_CONFIG and RLM_PLUGIN_PATH unset;
// it returns what rlm wrote and its exit code.
func Run(t *testing.T, pluginDir, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RLM_CONFIG", "")
	t.Setenv("RLM_PLUGIN_PATH", "")
	ios, out, errb := cmdutil.TestIO(stdin)
	code = root.Run(append([]string{"--plugin-dir", pluginDir}, args...), ios, nil)
	return out.String(), errb.String(), code
}
