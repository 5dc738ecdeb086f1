package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rlmkit/rlm/core/isolation"
)

// AutoIsolation asks for the strongest level both this host and the
// runtime's plugin support. It is the default everywhere: a plugin is held
// to what it declares in Info, never trusted to upgrade or downgrade itself.
const AutoIsolation = "auto"

// hostLevels are the levels internal/sandbox/isolate defines, weakest first. A plugin
// may declare a level of its own (pyodide's wasm); the host cannot rank it
// against these, so auto picks it only when the plugin declares none of them.
var hostLevels = isolation.Levels

// ResolveIsolation decides the level a program (or, with session, a REPL
// session) of the plugin described by info runs at, given the requested
// level ("" and "auto" mean auto). plugin names the plugin in errors.
//
// auto is the strongest of none, process and namespace that the plugin
// declares and this host can enforce (else the plugin's own level, such
// as wasm). An explicit level must be declared by the plugin and, when
// internal/sandbox/isolate defines it, work on this host; otherwise the answer is an
// error naming the plugin, what it supports and the fix, and nothing runs.
//
// host says what this host can enforce (internal/sandbox/isolate.Available). It
// must not be nil: without it no level could be ranked, and guessing would
// be the silent downgrade rlm never makes.
func ResolveIsolation(info *Info, plugin, requested string, session bool, host isolation.Probe) (string, error) {
	if host == nil {
		return "", errors.New("resolving an isolation level needs the host's probe (internal/sandbox/isolate.Available), and none was given: this is a bug in the program embedding rlm")
	}
	declared := info.Declared(session)
	what := "programs"
	if session {
		what = "sessions"
	}
	if requested == "" || requested == AutoIsolation {
		for i := len(hostLevels) - 1; i >= 0; i-- {
			l := hostLevels[i]
			if slices.Contains(declared, string(l)) && host(l) == nil {
				return string(l), nil
			}
		}
		for _, l := range declared {
			if !slices.Contains(hostLevels, isolation.Level(l)) {
				return l, nil
			}
		}
		// Unreachable while none is always available; kept for a host
		// where it is not.
		return "", refused(Unavailable, "plugin %s declares isolation %s for its %s, none of which works on this host", plugin, strings.Join(declared, ", "), what)
	}
	if !slices.Contains(declared, requested) {
		return "", refused(Unavailable,
			"plugin %s cannot enforce isolation %s for its %s: it declares only %s; use --isolation auto (or [limits] isolation = \"auto\") to run at the strongest of these, one of them explicitly, or a plugin that supports %s",
			plugin, requested, what, strings.Join(declared, ", "), requested)
	}
	if slices.Contains(hostLevels, isolation.Level(requested)) {
		if err := host(isolation.Level(requested)); err != nil {
			return "", refused(Unavailable, "isolation %s cannot work on this host: %v", requested, err)
		}
	}
	return requested, nil
}

// held are the resource limits a plugin enforces at level: none at level
// none; all of them at the other levels internal/sandbox/isolate defines (process,
// namespace), which enforce every one; at a level of the plugin's own (such
// as pyodide's wasm), which the host cannot judge, only those info declares
// among its capabilities ("memory", "max-processes", "max-disk", "cpu").
func held(info *Info, level string) Resources {
	switch {
	case level == string(isolation.None):
		return 0
	case slices.Contains(hostLevels, isolation.Level(level)):
		return AllResources
	}
	var r Resources
	for _, name := range AllResources.Names() {
		if info.Has(name) {
			r |= ResourceNamed(name)
		}
	}
	return r
}

// checkLimits refuses a request whose explicit limits cannot hold where it
// would run: a resource limit asked for explicitly (Limits.Strict) that the
// level does not enforce (held), or a fuel budget on a runtime that counts
// no fuel (-1, unlimited, holds everywhere). Running without them would be
// the silent downgrade the caller asked not to get. The message names only
// the limits the caller asked for: configured defaults a level cannot hold
// are not refused, as at none.
func checkLimits(l Limits, info *Info, plugin, level string) error {
	if l.Fuel > 0 && !info.Has("fuel") {
		return refused(Invalid,
			"--fuel cannot hold: plugin %s counts no fuel (only the pyodide backend does); bound the run with --timeout (or --cpu), run it with -b pyodide, or drop --fuel",
			plugin)
	}
	lost := l.Strict & l.Set() &^ held(info, level)
	if lost == 0 {
		return nil
	}
	if level == string(isolation.None) {
		return refused(Unavailable,
			"%s cannot hold: plugin %s runs this at isolation none, which enforces no resource limit; use --isolation process or namespace with a plugin that declares them, or drop the flag",
			lost.Flags(), plugin)
	}
	enforced := "no resource limit"
	if h := held(info, level); h != 0 {
		enforced = "only " + h.Flags()
	}
	return refused(Unavailable,
		"%s cannot hold: plugin %s runs this at isolation %s, which enforces %s; drop the flag, or use a runtime that enforces it (for python, -b native at isolation process or namespace)",
		lost.Flags(), plugin, level, enforced)
}

func refused(k RefusalKind, format string, args ...any) error {
	return &RefusedError{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// ResolveLimits is l as it goes on the wire for a program (or, with
// session, a REPL session) of the plugin info describes: its isolation
// resolved (ResolveIsolation) and its explicit limits checked to hold
// there (checkLimits). core/client's Runtime calls it for every run and
// session; a server calls it at start to refuse a configuration every
// request would be refused for.
func ResolveLimits(info *Info, plugin string, l Limits, session bool, host isolation.Probe) (Limits, error) {
	level, err := ResolveIsolation(info, plugin, l.Isolation, session, host)
	if err != nil {
		return l, err
	}
	if err := checkLimits(l, info, plugin, level); err != nil {
		return l, err
	}
	l.Isolation = level
	return l, nil
}
