//go:build !unix

package llm

import "os/exec"

// killGroupOnCancel: without process groups, exec.CommandContext's default
// (kill the process) and WaitDelay apply.
func killGroupOnCancel(cmd *exec.Cmd) {}
