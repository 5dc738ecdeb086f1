package native

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// ReadOnlyPaths is what a namespace sandbox must show of the host for the
// runtime to start: the installation prefix of an interpreter kept outside
// /usr (pyenv under /root, a Go toolchain in /usr/local/go), plus extra
// files and directories the run needs (installed requirements, the context
// file, a compiled binary).
func ReadOnlyPaths(t toolpath.Tool, extra ...string) []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if p == "/usr" || strings.HasPrefix(p, "/usr/") || p == "/bin" || p == "/lib" || p == "/sbin" {
			return // always visible
		}
		for _, have := range out {
			if p == have || strings.HasPrefix(p, have+"/") {
				return
			}
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	add(t.Extra["prefix"])
	add(t.Extra["goroot"])
	// readonly: more directories the tool reads, colon-separated (a JDK's
	// configuration under /etc, which its conf/ links to).
	for _, p := range filepath.SplitList(t.Extra["readonly"]) {
		add(p)
	}
	if real, err := filepath.EvalSymlinks(t.Exe); err == nil {
		// <prefix>/bin/<exe>: the prefix holds the interpreter's libraries.
		add(filepath.Dir(filepath.Dir(real)))
	}
	for _, p := range extra {
		add(p)
	}
	return out
}
