// Command rlm-plugin-perl is a third-party rlm runtime plugin: it runs Perl
// programs. It lives in a module of its own and uses only rlm's public
// packages, as any plugin outside the rlm repository would:
//
//   - core/plugin/native is the body every plugin that runs a local interpreter
//     shares: Info, Check (with the checker runtime.Syntax names), and a
//     Run that gives each program a private working
//     directory, capped output, the wall-clock limit, the produced files,
//     and the host's sandbox at the level the host asks for: none, process
//     (rlimits, memory and process caps in cgroups) or namespace
//     (bubblewrap: no network, the host read-only, uid 65534, seccomp).
//     The plugin links no sandbox code: runtime sets no Sandbox, so each
//     sandboxed program is run by the rlm binary that started the plugin
//     (`rlm __sandbox`, named in $RLM_SANDBOX_HELPER). Info declares
//     exactly the levels that supervisor can enforce on this host (only
//     none when the plugin is started by anything but rlm), and rlm holds
//     the plugin to them; native.Serve serves it over go-plugin (through
//     core/plugin, what every plugin imports);
//   - core/plugin/toolpath finds perl and caches its version.
//
// A plugin that runs programs some other way must declare only the levels
// it enforces itself in core.Info.IsolationLevels (see docs/plugins.md).
//
// Build it and put it where rlm looks for plugins:
//
//	go build -o ~/.rlm/plugins/rlm-plugin-perl .
//	rlm plugins
//	rlm exec -r perl -c 'print "hello\n"'
package main

import (
	"os/exec"
	"strings"

	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// version is this plugin's own version, reported by Info.
const version = "0.1.0"

// probe asks perl for its version once; toolpath caches the answer on disk
// until the executable changes.
func probe(path string) (toolpath.Tool, error) {
	out, err := exec.Command(path, "-e", `printf "perl %vd", $^V`).Output()
	if err != nil {
		return toolpath.Tool{}, err
	}
	return toolpath.Tool{Exe: path, Version: strings.TrimSpace(string(out))}, nil
}

// runtime is all that is perl-specific: the tool, the code file and the
// syntax check. Everything else is core/plugin/native's: the command line (by
// default the tool, the code file and the program's arguments) and the
// sandbox (by way of rlm's supervisor).
var runtime = &native.Runtime{
	Name:         "perl",
	Version:      version,
	Language:     "perl",
	Ext:          ".pl",
	CodeFile:     "main.pl",
	Tool:         "perl",
	Probe:        probe,
	Capabilities: []string{"program", "check", "files"},
	// perl -c compiles the program without running it.
	Syntax: native.Syntax(native.SyntaxCheck{Args: []string{"-c", "-"}}),
}

func main() {
	// native.Serve makes the plugin a child subreaper (grandchildren that
	// escape a program's process group are killed after its run), then
	// serves the runtime over go-plugin.
	native.Serve(native.New(runtime))
}
