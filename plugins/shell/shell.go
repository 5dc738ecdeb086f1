// Package shell is the bash runtime: a program is a script run by bash.
// It installs no requirements (it declares no "requirements" capability,
// so rlm refuses a request with them); the tools a script may call are
// whatever the machine (or container image) has installed.
package shell

import (
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/plugins/internal/inproc"
	"github.com/rlmkit/rlm/plugins/internal/warm"
)

// Probe reports bash's version as the first line of `bash --version`.
var Probe = toolpath.VersionLine("--version")

// Runtime describes bash for core/plugin/native.
var Runtime = &native.Runtime{
	Name:         "shell",
	Language:     "bash",
	Ext:          ".sh",
	CodeFile:     "main.sh",
	Tool:         "bash",
	Probe:        Probe,
	Capabilities: []string{"program", "check", "files"},
	// Programs under namespace run in warm sandboxes when the host has a
	// python3 for the worker, which execs bash for each script.
	Sandbox: &inproc.Sandbox{Warm: warm.ExecConfig},
	// bash -n parses the script without running it.
	Syntax: native.Syntax(native.SyntaxCheck{Args: []string{"-n"}}),
}

// New returns the shell runtime service.
func New() *native.Server { return native.New(Runtime) }

// Main is the plugin binary's entry point.
func Main() {
	native.Serve(New())
}
