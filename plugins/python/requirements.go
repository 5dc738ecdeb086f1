package python

import (
	"os/exec"
	"path/filepath"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/install"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// PipCommand is the installer's command line for interpreter exe: `uv pip
// install --target` when uv is given (much faster), else `python -m pip
// install --target`, with the index settings of opt.
func PipCommand(exe, uv string) func(dir string, reqs []string, opt core.InstallOptions) []string {
	return func(dir string, reqs []string, opt core.InstallOptions) []string {
		var argv []string
		if uv != "" {
			argv = []string{uv, "pip", "install", "--python", exe, "--target", dir, "--quiet"}
		} else {
			argv = []string{exe, "-m", "pip", "install", "--target", dir, "--quiet",
				"--disable-pip-version-check", "--no-input", "--no-warn-script-location"}
		}
		if u := opt.IndexURL; u != "" {
			argv = append(argv, "--index-url", u)
		}
		for _, l := range opt.FindLinks {
			argv = append(argv, "--find-links", l)
		}
		if opt.NoIndex {
			argv = append(argv, "--no-index")
		}
		return append(argv, reqs...)
	}
}

func installer(t toolpath.Tool) *install.Installer {
	uv, _ := exec.LookPath("uv")
	env := append(install.BaseEnv(), "PYTHONDONTWRITEBYTECODE=1")
	if root, err := install.Root(); err == nil {
		env = append(env, "PIP_CACHE_DIR="+filepath.Join(filepath.Dir(root), "pip-cache"),
			"UV_CACHE_DIR="+filepath.Join(filepath.Dir(root), "uv-cache"))
	}
	return &install.Installer{Runtime: "python", Version: t.Version + " " + t.Exe,
		Command: PipCommand(t.Exe, uv), Env: env}
}

// useInstalled puts the installed set on the import path.
func useInstalled(dir string, _ *program.Workspace) []string {
	return []string{"PYTHONPATH=" + dir}
}
