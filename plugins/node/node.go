// Package node is the Node.js runtime: a program is main.js run by node,
// and requirements are installed with npm into rlm's requirement cache.
package node

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/install"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/plugins/internal/inproc"
	"github.com/rlmkit/rlm/plugins/internal/warm"
)

// Probe reports node's version as `node --version` prints it ("v20.20.2").
var Probe = toolpath.VersionLine("--version")

// NpmCommand is the installer's command line: npm installs reqs into
// dir/node_modules, quietly and without audit or funding requests.
func NpmCommand(npm string) func(dir string, reqs []string, opt core.InstallOptions) []string {
	return func(dir string, reqs []string, opt core.InstallOptions) []string {
		argv := []string{npm, "install", "--no-audit", "--no-fund", "--no-save",
			"--no-update-notifier", "--loglevel=error", "--prefix", dir}
		if r := opt.NPMRegistry; r != "" {
			argv = append(argv, "--registry", r)
		}
		return append(argv, reqs...)
	}
}

func installer(t toolpath.Tool) *install.Installer {
	npm, err := exec.LookPath("npm")
	if err != nil {
		// npm usually sits beside node; otherwise the install fails with
		// the shell's "not found", which names the problem.
		npm = filepath.Join(filepath.Dir(t.Exe), "npm")
	}
	cacheDir := filepath.Join(os.TempDir(), "rlm-npm-cache")
	if root, err := install.Root(); err == nil {
		cacheDir = filepath.Join(filepath.Dir(root), "npm-cache")
	}
	return &install.Installer{
		Runtime: "node",
		Version: t.Version,
		Command: NpmCommand(npm),
		Env: append(install.BaseEnv(),
			"npm_config_cache="+cacheDir,
			"npm_config_update_notifier=false",
			"NO_UPDATE_NOTIFIER=1"),
	}
}

// useInstalled makes require() and import find the set: NODE_PATH serves
// require(); ES modules ignore it, so node_modules is also linked into the
// workspace (a symlink, which never comes back as a produced file).
func useInstalled(dir string, ws *program.Workspace) []string {
	nm := filepath.Join(dir, "node_modules")
	link := filepath.Join(ws.Dir, "node_modules")
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		_ = os.Symlink(nm, link)
	}
	return []string{"NODE_PATH=" + nm}
}

// Runtime describes node for core/plugin/native.
var Runtime = &native.Runtime{
	Name:         "node",
	Language:     "javascript",
	Ext:          ".js",
	CodeFile:     "main.js",
	Tool:         "node",
	Probe:        Probe,
	Installer:    installer,
	InstallEnv:   useInstalled,
	Capabilities: []string{"program", "requirements", "check", "files"},
	// Programs under namespace run in warm sandboxes (as bash's do): the
	// worker execs node for each program. A run with requirements gets a
	// sandbox of its own.
	Sandbox: &inproc.Sandbox{Warm: warm.ExecConfig},
	// node --check reads no standard input: the code goes in a file.
	Syntax: native.Syntax(native.SyntaxCheck{Args: []string{"--check"}, FileExt: ".js", ShowAs: "main.js"}),
}

// New returns the node runtime service.
func New() *native.Server { return native.New(Runtime) }

// Main is the plugin binary's entry point.
func Main() {
	native.Serve(New())
}
