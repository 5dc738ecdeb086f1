package runtimepb

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPluginEnv: a plugin started with PluginEnv runs with sysmonAwake
// first in its GODEBUG and the host's own settings after it; once it has
// called RestorePluginEnv, it and what it starts see the host's GODEBUG as
// it was, or none, and nothing of PluginEnv's.
func TestPluginEnv(t *testing.T) {
	if os.Getenv("RLM_TEST_PLUGIN_ENV_CHILD") == "1" {
		start := os.Getenv("GODEBUG")
		RestorePluginEnv()
		_, carried := os.LookupEnv(hostGodebugEnv)
		out, err := exec.Command("sh", "-c", `echo "child=[${GODEBUG-unset}] carried=[${RLM_HOST_GODEBUG-unset}]"`).Output()
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("start=[" + start + "] own=[" + os.Getenv("GODEBUG") + "] " +
			map[bool]string{true: "kept", false: "dropped"}[carried] + " " + string(out))
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ host, want string }{
		{"", "start=[schedtrace=2147483647] own=[] dropped child=[unset] carried=[unset]"},
		{"madvdontneed=1", "start=[schedtrace=2147483647,madvdontneed=1] own=[madvdontneed=1] dropped child=[madvdontneed=1] carried=[unset]"},
	} {
		cmd := exec.Command(exe, "-test.run=^TestPluginEnv$")
		cmd.Env = append(os.Environ(), "RLM_TEST_PLUGIN_ENV_CHILD=1")
		cmd.Env = append(cmd.Env, PluginEnv(c.host)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("host GODEBUG %q: %v: %s", c.host, err, out)
		}
		got, _, _ := strings.Cut(string(out), "\n")
		if got != c.want {
			t.Errorf("host GODEBUG %q:\n got %s\nwant %s", c.host, got, c.want)
		}
	}
}
