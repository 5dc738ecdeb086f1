package native

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// ReadOnlyPaths is what a namespace sandbox must show of the host for the
// runtime to start: the installation prefix of an interpreter kept outside
// /usr (pyenv under /root, a Go toolchain in /usr/local/go), plus extra
// files and directories the run needs (installed requirements, the context
// file, a compiled binary).
func ReadOnlyPaths(t toolpath.Tool, extra ...string) []string {
	// The tool's own part is the same for every run: remembered for a
	// moment rather than resolved through its symlinks on each.
	key := t.Exe + "\x00" + t.Extra["prefix"] + "\x00" + t.Extra["goroot"] + "\x00" + t.Extra["readonly"]
	own, _ := toolPaths.Get(key, func() ([]string, error) {
		var out []string
		add := func(p string) { out = addReadOnly(out, p) }
		add(t.Extra["prefix"])
		add(t.Extra["goroot"])
		// readonly: more directories the tool reads, colon-separated (a
		// JDK's configuration under /etc, which its conf/ links to).
		for _, p := range filepath.SplitList(t.Extra["readonly"]) {
			add(p)
		}
		if real, err := filepath.EvalSymlinks(t.Exe); err == nil {
			// <prefix>/bin/<exe>: the prefix holds the interpreter's libraries.
			add(filepath.Dir(filepath.Dir(real)))
		}
		return out, nil
	})
	out := slices.Clone(own)
	for _, p := range extra {
		out = addReadOnly(out, p)
	}
	return out
}

var toolPaths toolpath.Memo[[]string]

// addReadOnly adds p to out unless it is not absolute, always visible,
// already below a path of out, or missing.
func addReadOnly(out []string, p string) []string {
	if p == "" || !filepath.IsAbs(p) {
		return out
	}
	p = filepath.Clean(p)
	if p == "/usr" || strings.HasPrefix(p, "/usr/") || p == "/bin" || p == "/lib" || p == "/sbin" {
		return out // always visible
	}
	for _, have := range out {
		if p == have || strings.HasPrefix(p, have+"/") {
			return out
		}
	}
	if _, err := os.Stat(p); err == nil {
		out = append(out, p)
	}
	return out
}
