//go:build !linux

package native

import (
	"os/exec"

	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// configureHelper gives the supervisor a process group of its own.
func configureHelper(cmd *exec.Cmd) { proctree.Configure(cmd) }
