package server

import (
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// The server says how to raise a limit in its own terms: the request's
// field for the timeout, its setting for the sandbox's limits.
func TestResponseHints(t *testing.T) {
	for _, tc := range []struct {
		r    core.Result
		want string
	}{
		{core.Result{EndedBy: ending.Timeout, TimedOut: true, Error: "timed out after 1s"},
			"timed out after 1s; raise it with timeout_ms or timeout_seconds (up to the server's max timeout)"},
		{core.Result{EndedBy: ending.ProcessLimit, Error: "reached the process limit"},
			"reached the process limit; raise it with the server's limits.max_processes (rlm serve --max-processes)"},
		{core.Result{EndedBy: ending.Exit, ExitCode: 1, Error: "ValueError: boom"}, "ValueError: boom"},
	} {
		if got := Response("python", &tc.r).Error; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.r.EndedBy, got, tc.want)
		}
	}
}
