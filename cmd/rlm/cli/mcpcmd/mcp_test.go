package mcpcmd

import (
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
)

func run(args ...string) (*Options, error) {
	ios, _, _ := cmdutil.TestIO("")
	return cmdutil.ParseFlags(&cmdutil.Factory{IO: ios}, NewCmd, args...)
}

// rlm mcp takes serve's engine flags, with serve's parsing.
func TestEngineFlags(t *testing.T) {
	o, err := run("--mode", "python,shell", "--max-concurrent", "3", "--queue", "2", "--queue-wait", "2s",
		"--max-timeout", "1m", "--session-idle", "90s", "--max-sessions", "5", "--backend", "native",
		"--log-format", "json", "--isolation", "process", "--memory", "256MiB")
	if err != nil {
		t.Fatal(err)
	}
	s := o.Serve
	if s.Mode != "python,shell" || s.MaxConcurrent != 3 || s.Queue != 2 || s.QueueWait != 2*time.Second ||
		s.MaxTimeout != time.Minute || s.SessionIdle != 90*time.Second || s.MaxSessions != 5 || s.Backend != "native" || s.LogFormat != "json" {
		t.Errorf("got %+v", s)
	}
	for _, f := range []string{"mode", "isolation", "memory"} {
		if !s.Changed(f) {
			t.Errorf("--%s not seen as given", f)
		}
	}
}

// The HTTP-only flags of serve are not offered on stdio.
func TestNoHTTPFlags(t *testing.T) {
	for _, f := range []string{"--addr", "--token", "--body-limit", "--grace"} {
		if _, err := run(f, "x"); err == nil || !strings.Contains(err.Error(), "unknown flag: "+f) {
			t.Errorf("%s: %v, want unknown flag", f, err)
		}
	}
	if _, err := run("extra"); err == nil {
		t.Error("a positional argument was accepted")
	}
}
