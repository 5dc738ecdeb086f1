package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/distinct"
)

// SearchPath is the ordered list of directories rlm looks in for plugins.
type SearchPath []string

// DefaultSearchPath builds the lookup order from DESIGN.md: explicit
// directories (flag), $RLM_PLUGIN_PATH, configured directories, the directory
// of the rlm executable, ~/.rlm/plugins, then $PATH.
func DefaultSearchPath(flagDirs, configDirs []string) SearchPath {
	var dirs []string
	dirs = append(dirs, flagDirs...)
	dirs = append(dirs, filepath.SplitList(os.Getenv("RLM_PLUGIN_PATH"))...)
	dirs = append(dirs, configDirs...)
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".rlm", "plugins"))
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	return distinct.Strings(dirs, nil)
}

// NotFoundError says which plugin was missing and everywhere rlm looked.
type NotFoundError struct {
	Name   string
	Looked SearchPath
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no plugin for runtime %q: looked for %s%s in %s; build it with `make build` or set RLM_PLUGIN_PATH",
		e.Name, runtimepb.Prefix, e.Name, strings.Join(e.Looked, ", "))
}

// Find returns the first executable named rlm-plugin-NAME on the path.
func (sp SearchPath) Find(name string) (string, error) {
	for _, dir := range sp {
		p := filepath.Join(dir, runtimepb.Prefix+name)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", &NotFoundError{Name: name, Looked: sp}
}

// Found is one discovered plugin binary.
type Found struct {
	Name string
	Path string
}

// All lists every plugin on the path, first match per name, sorted by name.
func (sp SearchPath) All() []Found {
	seen := map[string]bool{}
	var out []Found
	for _, dir := range sp {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), runtimepb.Prefix)
			if !ok || name == "" || seen[name] {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if !isExecutable(p) {
				continue
			}
			seen[name] = true
			out = append(out, Found{Name: name, Path: p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
