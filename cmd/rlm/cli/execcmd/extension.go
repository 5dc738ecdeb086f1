package execcmd

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/host/catalog"
)

// runtimeForFile is the built-in runtime a code file's extension names,
// or "".
func runtimeForFile(file string) string {
	if file == "" || file == "-" {
		return ""
	}
	return extRuntimes[strings.ToLower(filepath.Ext(file))]
}

// runtimeByExtension is the runtime for the code file: the built-in one
// its extension names, else the discovered plugin whose Info declares
// that extension (FileExtension), else "" for code without a file or a
// file without an extension (the config's runtime runs it). An extension
// nobody declares is a usage error naming those known and -r.
//
// Only plugins that are not built in are asked (launched once each, in
// parallel, for their Info), and only for an extension the built-in
// mapping lacks: `rlm exec x.py` launches nothing more than before.
func (o *Options) runtimeByExtension(ctx context.Context) (string, error) {
	if rt := runtimeForFile(o.File); rt != "" || o.File == "" || o.File == "-" {
		return rt, nil
	}
	ext := strings.ToLower(filepath.Ext(o.File))
	if ext == "" {
		return "", nil
	}
	builtin := func(name string) bool {
		return slices.Contains(cmdutil.BuiltinRuntimes, name) || name == client.Pyodide
	}
	byRuntime := map[string][]string{}
	for e, rt := range extRuntimes {
		byRuntime[rt] = append(byRuntime[rt], e)
	}
	for _, e := range catalog.ListOnly(ctx, o.F.SearchPath(), func(name string) bool { return !builtin(name) }) {
		if e.Info == nil || e.Info.FileExtension == "" {
			continue
		}
		declared := strings.ToLower(e.Info.FileExtension)
		if !strings.HasPrefix(declared, ".") {
			declared = "." + declared
		}
		if declared == ext {
			return e.Name, nil
		}
		byRuntime[e.Name] = append(byRuntime[e.Name], declared)
	}
	var known []string
	for _, rt := range slices.Sorted(maps.Keys(byRuntime)) {
		exts := byRuntime[rt]
		slices.Sort(exts)
		known = append(known, fmt.Sprintf("%s (%s)", strings.Join(exts, " "), rt))
	}
	return "", cmdutil.Usagef("no runtime declares %s files (%s): the known extensions are %s; give the runtime with -r RUNTIME",
		ext, o.File, strings.Join(known, ", "))
}
