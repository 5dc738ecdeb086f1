package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/internal/host/catalog"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Names of the backends.
const (
	Auto    = "auto"
	Native  = "native"
	Pyodide = "pyodide"
	Daemon  = "daemon"
)

// Valid lists the accepted backend names.
var Valid = []string{Auto, Daemon, Native, Pyodide}

// Options say how to find runtimes.
type Options struct {
	Backend string
	// Plugins are the directories searched for plugins, in order
	// (cmdutil builds rlm's from DESIGN.md's discovery order).
	Plugins []string
	// DaemonSocket is the daemon's socket path ("" for the default).
	DaemonSocket string
	// DaemonDial connects to the daemon; nil means no daemon support
	// (set by the daemon package to avoid an import cycle).
	DaemonDial func(ctx context.Context, socket, runtime string) (*Runtime, error)
	// DaemonAlive reports whether a daemon answers on socket.
	DaemonAlive func(ctx context.Context, socket string) bool
}

// Check validates a backend name.
func Check(name string) error {
	for _, v := range Valid {
		if v == name {
			return nil
		}
	}
	return fmt.Errorf("unknown backend %q: use one of %s", name, strings.Join(Valid, ", "))
}

// Open connects to runtime on the backend o names. auto means: the daemon
// when it answers, else the native plugin when it can run here, else
// pyodide for python. The plugin launched to check availability is the one
// used, so auto costs no second start.
func Open(ctx context.Context, runtime string, o Options) (*Runtime, error) {
	b := o.Backend
	if b == "" {
		b = Auto
	}
	if err := Check(b); err != nil {
		return nil, err
	}
	switch b {
	case Daemon:
		if o.DaemonDial == nil {
			return nil, fmt.Errorf("the daemon backend is not available in this build")
		}
		return o.DaemonDial(ctx, o.DaemonSocket, runtime)
	case Pyodide:
		if runtime != "python" {
			return nil, &core.RefusedError{Kind: core.Invalid,
				Msg: fmt.Sprintf("the pyodide backend runs python only, not %s: drop -b pyodide (or use -b native) for %s", runtime, runtime)}
		}
		return Launch(ctx, o.Plugins, Pyodide, runtime, Pyodide)
	case Native:
		return Launch(ctx, o.Plugins, runtime, runtime, Native)
	}
	if o.DaemonAlive != nil && o.DaemonAlive(ctx, o.DaemonSocket) && o.DaemonDial != nil {
		if rt, err := o.DaemonDial(ctx, o.DaemonSocket, runtime); err == nil {
			return rt, nil
		}
	}
	rt, available, err := start(ctx, runtime, runtime, Native, o)
	if err != nil || runtime != "python" || available {
		return rt, err
	}
	if _, perr := launch.SearchPath(o.Plugins).Find(Pyodide); perr != nil {
		return rt, nil // native it is; its Run will say why it cannot
	}
	rt.Close()
	return Launch(ctx, o.Plugins, Pyodide, runtime, Pyodide)
}

// Launch starts the plugin called pluginName, found on the search path
// plugins (directories, in order), to serve runtime, reported as backend.
// It goes through the catalog, which fingerprints the plugin: the runtime
// needs no second Info to know what the plugin declares, and knows when
// the process exits (Runtime.Exited). A plugin that is not found is a
// launch.NotFoundError. Closing the runtime kills the plugin.
func Launch(ctx context.Context, plugins []string, pluginName, runtime, backend string) (*Runtime, error) {
	rt, _, err := start(ctx, pluginName, runtime, backend, Options{Plugins: plugins})
	return rt, err
}

// start is Launch that also says whether the plugin is available here.
func start(ctx context.Context, pluginName, runtime, backend string, o Options) (*Runtime, bool, error) {
	p, err := catalog.Open(ctx, o.Plugins, pluginName, runtime)
	if err != nil {
		return nil, false, err
	}
	rt := NewRuntime(runtime, backend, p.Client, p.Kill, isolate.Available)
	rt.Plugin = p.Path
	rt.exited = p.Exited
	rt.stderr = p.Stderr
	if p.Info != nil {
		rt.SetDeclared(p.Info)
	}
	return rt, p.Available(), nil
}
