package cmdutil

import (
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// The CLI says how to raise a limit in its flags; a timeout keeps the
// message rlm exec has always printed.
func TestAddHint(t *testing.T) {
	r := &core.Result{EndedBy: ending.MemoryLimit, Error: ending.MemoryLimit.Message(0)}
	AddHint(r)
	if want := "reached the memory limit; raise it with --memory (config: limits.memory)"; r.Error != want {
		t.Errorf("memory: %q, want %q", r.Error, want)
	}
	r = &core.Result{EndedBy: ending.Timeout, Error: "timed out after 1s"}
	AddHint(r)
	if r.Error != "timed out after 1s" {
		t.Errorf("timeout: %q", r.Error)
	}
	AddHint(nil)
}
