package servecmd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// unsandboxedFlag names the runtimes that may be served although their
// plugin reaches only isolation none.
const unsandboxedFlag = "allow-unsandboxed"

// registerUnsandboxedFlag adds --allow-unsandboxed to the engine flags.
func (o *Options) registerUnsandboxedFlag(fl *pflag.FlagSet) {
	fl.StringSliceVar(&o.AllowUnsandboxed, unsandboxedFlag, nil, "serve these runtimes although their plugin can only run code unsandboxed (isolation none: as this user, network on, host files readable), comma-separated (env RLM_ALLOW_UNSANDBOXED, [serve] allow_unsandboxed)")
}

// allowedUnsandboxed is the flag over [serve] allow_unsandboxed, as
// canonical runtime names.
func (o *Options) allowedUnsandboxed(fromConfig []string) []string {
	names := fromConfig
	if o.Changed != nil && o.Changed(unsandboxedFlag) {
		names = o.AllowUnsandboxed
	}
	return server.ParseModes(strings.Join(names, ","))
}

// candidates are the runtimes a server without --mode tries, in priority
// order: the built-in ones (seed 003's python, golang, node, shell, so
// python stays the default where it runs), then every other plugin on the
// search path, by name. pyodide is a backend of python, not a runtime.
func (o *Options) candidates() []string {
	out := slices.Clone(server.DetectOrder)
	for _, f := range launch.SearchPath(o.F.SearchPath()).All() {
		if f.Name != client.Pyodide && !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// openEnabled opens the runtimes to serve. Named modes must all run here
// (else a start error); without any, every runtime available here is
// enabled and each other one logged at info with the reason. Either way a
// runtime whose plugin reaches only isolation none needs its name in
// allowed: untrusted code must not run unsandboxed by accident. Named
// without it, that is a start error naming the flag; detected, it is left
// out with a log line saying how to enable it. An allowed one is served
// with a warning. A server configured for isolation none (--isolation
// none, [serve] isolation) runs everything unsandboxed by the operator's
// explicit choice, and allows every runtime so (allowAll).
func (o *Options) openEnabled(ctx context.Context, open client.Opener, mode string, allowed []string, allowAll bool, logger *slog.Logger) ([]string, map[string]*client.Runtime, error) {
	named := server.ParseModes(mode)
	var modes []string
	var rts map[string]*client.Runtime
	if len(named) > 0 {
		var err error
		if modes, rts, _, err = server.OpenModes(ctx, open, named); err != nil {
			return nil, nil, err
		}
	} else {
		d, err := server.DetectModes(ctx, open, o.candidates())
		if err != nil {
			return nil, nil, err
		}
		for _, m := range o.candidates() {
			if why, ok := d.Skipped[m]; ok {
				logger.Info("runtime not enabled: it cannot run here", "runtime", m, "reason", why)
			}
		}
		modes, rts = d.Modes, d.Runtimes
	}
	closeAll := func() {
		for _, rt := range rts {
			rt.Close()
		}
	}
	var kept []string
	for _, m := range modes {
		what := unsandboxed(ctx, rts[m])
		if what == "" {
			kept = append(kept, m)
			continue
		}
		if allowAll || slices.Contains(allowed, m) {
			by := "--" + unsandboxedFlag
			if allowAll {
				by = "--isolation none"
			}
			logger.Warn("serving a runtime unsandboxed: its plugin can only run code at isolation none (as this user, network on, host files readable)", "runtime", m, "why", what, "allowed_by", by)
			kept = append(kept, m)
			continue
		}
		if len(named) > 0 {
			closeAll()
			return nil, nil, cmdutil.Usagef("mode=%s: %s (isolation none: as this user, network on, host files readable); "+
				"pass --%s %s (env RLM_ALLOW_UNSANDBOXED, [serve] allow_unsandboxed) to serve it anyway, or give the plugin a sandbox level (docs/plugins.md)", m, what, unsandboxedFlag, m)
		}
		logger.Info("runtime not enabled: its plugin can only run code unsandboxed (isolation none)", "runtime", m, "why", what, "enable_with", fmt.Sprintf("--%s %s", unsandboxedFlag, m))
		rts[m].Close()
		delete(rts, m)
	}
	if len(kept) == 0 {
		return nil, nil, fmt.Errorf("no runtime to serve: every one found here can only run code unsandboxed; name those to serve anyway with --%s NAME[,NAME]", unsandboxedFlag)
	}
	return kept, rts, nil
}

// unsandboxed says what of rt would run at isolation none under auto ("":
// nothing): its programs, or its REPL sessions when it offers them (a
// plugin whose sessions declare no level runs them unsandboxed however
// well its programs are sandboxed). A level that cannot be resolved is not
// this check's to report (checkIsolation does).
func unsandboxed(ctx context.Context, rt *client.Runtime) string {
	if level, err := rt.Isolation(ctx, core.AutoIsolation, false); err == nil && level == "none" {
		return "its plugin can only run code unsandboxed"
	}
	info, err := rt.Declared(ctx)
	if err != nil || info == nil || !slices.Contains(info.Capabilities, "repl") {
		return ""
	}
	if level, err := rt.Isolation(ctx, core.AutoIsolation, true); err == nil && level == "none" {
		return "its plugin runs REPL sessions unsandboxed (they declare no isolation level)"
	}
	return ""
}
