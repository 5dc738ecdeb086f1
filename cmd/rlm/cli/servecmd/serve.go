// Package servecmd implements `rlm serve`: the HTTP sandbox server
// (core/server) on a listening socket, with signal handling.
package servecmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/modelflags"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/core/server/sandboxfusion"
	"github.com/rlmkit/rlm/internal/version"
)

// Options are serve's settings after flags, environment and config.
type Options struct {
	F *cmdutil.Factory

	Addr          string
	Mode          string
	Backend       string
	MaxConcurrent int
	Queue         int
	QueueWait     time.Duration
	BodyLimit     string
	MaxTimeout    time.Duration
	Token         string
	// AllowUnauthenticated: see config.Serve.AllowUnauthenticated.
	AllowUnauthenticated bool
	SessionIdle          time.Duration
	MaxSessions          int
	WarmSessions         int
	Grace                time.Duration
	DrainGrace           time.Duration
	// AdvertiseAddr and Replica: see replica.go.
	AdvertiseAddr string
	Replica       string
	// PodIsBoundary: see podboundary.go.
	PodIsBoundary bool
	LogFormat     string
	Limits        cmdutil.LimitFlags
	// Model gives the sessions' llm_query a model (see model.go).
	Model modelflags.SessionFlags
	// AllowUnsandboxed: see config.Serve.AllowUnsandboxed.
	AllowUnsandboxed []string
	// E2BAddr, when set, serves E2B's API there (e2b.go).
	E2BAddr string

	// Changed reports whether a flag was given.
	Changed func(name string) bool
	// Ready, when set, is called with the listening address (tests).
	Ready func(addr string)
}

// NewCmd builds the command; runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve sandboxed execution over HTTP (POST /execute, sessions, health, metrics)",
		Long: `Serve sandboxed execution over HTTP.

Endpoints: POST /execute, GET /health, POST /sessions,
POST /sessions/{id}/execute, GET /sessions/{id}/variables/{name},
DELETE /sessions/{id}, GET /metrics (Prometheus), GET /openapi.json,
and MCP over streamable HTTP at /mcp (tools run_code, list_runtimes and
session_*; see docs/mcp.md). With a model (--provider), also RLM runs:
POST /runs streams a run's events as NDJSON, GET /runs, GET /runs/{id},
GET /runs/{id}/events, POST /runs/{id}/cancel, DELETE /runs/{id}, and the
MCP tool rlm_run.

The mode is a comma-separated list of runtimes (python, golang, node,
shell, or a plugin's name); the first is the default and a request's
"language" picks another. Without one, every runtime this host can run is
served (built-in ones and plugins on the plugin path), python first when
it is installed; the others are logged with the reason. A mode that cannot
run here stops the server at start.

A runtime whose plugin can only run code unsandboxed (isolation none) is
not served unless named in --allow-unsandboxed (or the server runs
everything at --isolation none).

Loopback addresses need no token. Any other address (0.0.0.0, a public IP,
a host name) requires a token (RLM_TOKEN) and refuses to start without one,
unless --allow-unauthenticated says something in front of rlm authenticates.

Every setting also comes from rlm.toml's [serve] table and from the
environment (RLM_MODE or SANDBOX_MODE, RLM_MAX_CONCURRENT or
SANDBOX_MAX_CONCURRENT, RLM_TOKEN, ...; see rlm.toml.example).

On SIGTERM or SIGINT the server first fails /health and keeps serving
for --drain-grace (behind a load balancer, so it stops sending before the
listener closes), then stops accepting, lets in-flight and queued requests
finish for --grace, kills what is left and exits 0.`,
		Example: `  rlm serve
  RLM_TOKEN=secret rlm serve --addr 0.0.0.0:8080 --mode python,shell --max-concurrent 4
  RLM_TOKEN=secret rlm serve --log-format json
  curl -s localhost:8080/execute -d '{"code": "print(1)"}' -H 'Content-Type: application/json'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Changed = cmd.Flags().Changed
			if runF != nil {
				return runF(o)
			}
			return Run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Addr, "addr", "", "listen address (default from config: 127.0.0.1:8080)")
	fl.StringVar(&o.BodyLimit, "body-limit", "", "largest request body, e.g. 8MiB; larger gets 413 (default from config: 8MiB)")
	fl.StringVar(&o.Token, "token", "", "bearer token required on all but /health (prefer env RLM_TOKEN: flags show in ps)")
	fl.BoolVar(&o.AllowUnauthenticated, "allow-unauthenticated", false, "listen on a non-loopback address without a token (only behind a proxy or private network that authenticates; env RLM_ALLOW_UNAUTHENTICATED)")
	fl.StringVar(&o.E2BAddr, "e2b-addr", "", "also serve E2B's sandbox API on this address, for the E2B SDKs (E2B_API_URL and E2B_SANDBOX_URL; see docs/e2b.md)")
	fl.DurationVar(&o.Grace, "grace", 0, "on SIGTERM/SIGINT, time in-flight requests get to finish (default from config: 5s)")
	o.registerDrainFlag(fl)
	o.registerReplicaFlags(fl)
	o.RegisterEngineFlags(fl)
	return cmd
}

// RegisterEngineFlags adds the flags of what runs code (runtimes, backend,
// slots and queue, timeouts, sessions, limits, isolation, log format), the
// part of serve's settings `rlm mcp` shares, so both take the same flags.
func (o *Options) RegisterEngineFlags(fl *pflag.FlagSet) {
	fl.StringVar(&o.Mode, "mode", "", "runtimes to serve, comma-separated, first is the default (default: auto-detect; env RLM_MODE, SANDBOX_MODE)")
	fl.StringVarP(&o.Backend, "backend", "b", "", "backend for the runtimes: auto, daemon, native or pyodide (default from config: auto)")
	fl.IntVar(&o.MaxConcurrent, "max-concurrent", 0, "runs in flight at once (default: number of CPUs; env RLM_MAX_CONCURRENT, SANDBOX_MAX_CONCURRENT)")
	fl.IntVar(&o.Queue, "queue", 0, "requests that may wait for a slot before 429 (default from config: 64)")
	fl.DurationVar(&o.QueueWait, "queue-wait", 0, "longest wait for a slot before 429 (default from config: 10s)")
	fl.DurationVar(&o.MaxTimeout, "max-timeout", 0, "cap on a request's timeout (default from config: 5m)")
	fl.DurationVar(&o.SessionIdle, "session-idle", 0, "close sessions unused this long (default from config: 10m)")
	fl.IntVar(&o.MaxSessions, "max-sessions", 0, "most sessions open at once (default from config: 64)")
	fl.IntVar(&o.WarmSessions, "warm-sessions", 0, "sessions of each language kept open ahead of demand, so POST /sessions without a context takes one at once (default from config: 2; 0: none)")
	fl.StringVar(&o.LogFormat, "log-format", "", "log format on stderr: text or json (default from config: text)")
	o.Limits.Register(fl)
	o.Model.Register(fl)
	o.registerUnsandboxedFlag(fl)
	o.registerPodBoundaryFlag(fl)
}

// settings merges flags over the configuration (which already holds the
// file and the RLM_ environment); the earlier server's SANDBOX_ variables
// sit just below their RLM_ equivalents.
func (o *Options) settings(cfg config.Config) (config.Serve, string, error) {
	s := cfg.Serve
	if os.Getenv("RLM_MODE") == "" {
		if v := os.Getenv("SANDBOX_MODE"); v != "" {
			s.Mode = v
		}
	}
	if os.Getenv("RLM_MAX_CONCURRENT") == "" {
		if v := os.Getenv("SANDBOX_MAX_CONCURRENT"); v != "" {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
				return s, "", fmt.Errorf("SANDBOX_MAX_CONCURRENT=%q is not a whole number", v)
			}
			s.MaxConcurrent = n
		}
	}
	cmdutil.Override(o.Changed, "addr", &s.Addr, o.Addr)
	cmdutil.Override(o.Changed, "mode", &s.Mode, o.Mode)
	cmdutil.Override(o.Changed, "token", &s.Token, o.Token)
	cmdutil.Override(o.Changed, "allow-unauthenticated", &s.AllowUnauthenticated, o.AllowUnauthenticated)
	changed := func(n string) bool { return o.Changed != nil && o.Changed(n) }
	// The checked flags: each takes its value when given, or says what is
	// wrong with it; the first error, in this order, is the answer.
	atLeast := func(name string, v, least int, dst *int, why string) error {
		if !changed(name) {
			return nil
		}
		if v < least {
			return fmt.Errorf("--%s %s", name, why)
		}
		*dst = v
		return nil
	}
	positive := func(name string, d time.Duration, dst *config.Duration) error {
		if !changed(name) {
			return nil
		}
		if d <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
		*dst = config.Duration(d)
		return nil
	}
	bodyLimit := func() error {
		if !changed("body-limit") {
			return nil
		}
		n, err := config.ParseSize(o.BodyLimit)
		if err != nil || n <= 0 {
			return fmt.Errorf("--body-limit: %q is not a positive size", o.BodyLimit)
		}
		s.BodyLimit = config.Size(n)
		return nil
	}
	logFormat := func() error {
		if !changed("log-format") {
			return nil
		}
		if o.LogFormat != "text" && o.LogFormat != "json" {
			return fmt.Errorf("--log-format %q: use text or json", o.LogFormat)
		}
		s.LogFormat = o.LogFormat
		return nil
	}
	for _, e := range []error{
		atLeast("max-concurrent", o.MaxConcurrent, 0, &s.MaxConcurrent, "must not be negative"),
		atLeast("queue", o.Queue, 0, &s.Queue, "must not be negative"),
		positive("queue-wait", o.QueueWait, &s.QueueWait),
		positive("max-timeout", o.MaxTimeout, &s.MaxTimeout),
		positive("session-idle", o.SessionIdle, &s.SessionIdle),
		positive("grace", o.Grace, &s.Grace),
		bodyLimit(),
		atLeast("max-sessions", o.MaxSessions, 1, &s.MaxSessions, "must be positive"),
		atLeast("warm-sessions", o.WarmSessions, 0, &s.WarmSessions, "must not be negative (0 keeps none)"),
		logFormat(),
	} {
		if e != nil {
			return s, "", e
		}
	}
	b := cfg.Backend
	if o.Backend != "" {
		b = o.Backend
	}
	if err := client.Check(b); err != nil {
		return s, "", err
	}
	// A server's mode names the installed runtime it serves (seed 003:
	// "mode=python but 'python3' not found" must stop it), so auto means
	// native here, never a silent fall back to WebAssembly; ask for
	// --backend pyodide explicitly.
	if b == client.Auto {
		b = client.Native
	}
	// The file's and the environment's address were checked as they were
	// loaded (config.Serve); the flag's is checked here, before the token
	// check, which could only misread a malformed address.
	if changed("addr") {
		if err := config.CheckAddr(s.Addr); err != nil {
			return s, "", fmt.Errorf("--addr: %w", err)
		}
	}
	if s.Token == "" && !s.AllowUnauthenticated && !loopback(s.Addr) {
		return s, "", fmt.Errorf("refusing to listen on %s without a token: anyone who can reach it could run code on this machine.\n"+
			"Set RLM_TOKEN (or [serve] token) to require a bearer token, listen on a loopback address (--addr 127.0.0.1:8080), "+
			"or pass --allow-unauthenticated ([serve] allow_unauthenticated) if a proxy or private network in front of rlm authenticates", s.Addr)
	}
	return s, b, nil
}

// loopback reports whether addr (host:port) listens on loopback only: a
// loopback IP or "localhost". Anything else, a host name included (it may
// resolve to a public address) and an empty host (every interface), is
// treated as reachable from the network.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// limits are the sandbox of every program and session the server runs:
// [limits] and the limit flags, with [serve] isolation (auto: the
// strongest level this host and each mode's plugin support) instead of
// exec's. Each runtime resolves the level itself (client.Runtime); Run stops
// the server when a mode's programs cannot have it.
func (o *Options) limits(cfg config.Config, st config.Serve) (core.Limits, error) {
	lc := cfg.Limits
	lc.Isolation = st.Isolation
	var l core.Limits
	if err := o.Limits.Apply(lc, &l); err != nil {
		return l, cmdutil.Usage(err)
	}
	return l, nil
}

// checkIsolation refuses to serve a mode whose programs cannot run at the
// configured level, or cannot hold the limits given as flags there (the
// same check, client.Runtime.Sandbox, that refuses each run), rather than
// failing every request. Sessions are not checked: a mode that offers none,
// or only at other levels, still serves programs, and opening a session
// says why.
func checkIsolation(ctx context.Context, rts map[string]*client.Runtime, limits core.Limits) error {
	for m, rt := range rts {
		if _, err := rt.Sandbox(ctx, limits, false); err != nil {
			return fmt.Errorf("mode=%s: %w", m, err)
		}
	}
	return nil
}

// Engine is a server built from the settings, before it listens.
type Engine struct {
	Server *server.Server
	// Settings are [serve] after flags and environment.
	Settings config.Serve
	Logger   *slog.Logger
	Modes    []string
	Limits   core.Limits
}

// NewEngine resolves config, environment and flags, opens the runtimes
// (a mode that cannot run here is an error naming it) and builds the
// server. `rlm serve` puts it on a socket; `rlm mcp` on stdio. Logs go to
// o.F.IO.ErrOut. Close the Server when done.
func NewEngine(ctx context.Context, o *Options) (*Engine, error) {
	cfg, _, err := o.F.Config()
	if err != nil {
		return nil, err
	}
	st, backendName, err := o.settings(cfg)
	if err != nil {
		return nil, cmdutil.Usage(err)
	}
	limits, err := o.limits(cfg, st)
	if err != nil {
		return nil, err
	}
	sessionBridges, runs, err := o.sessionBridges(cfg)
	if err != nil {
		return nil, err
	}
	replica, err := o.replica(st.Token)
	if err != nil {
		return nil, cmdutil.Usage(err)
	}
	var logger *slog.Logger
	if st.LogFormat == "json" {
		logger = slog.New(slog.NewJSONHandler(o.F.IO.ErrOut, nil))
	} else {
		logger = slog.New(slog.NewTextHandler(o.F.IO.ErrOut, nil))
	}

	bopts := o.F.BackendOptions(backendName)
	open := func(ctx context.Context, name string) (*client.Runtime, error) {
		return client.Open(ctx, name, bopts)
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	modes, rts, err := o.openEnabled(startCtx, open, st.Mode, o.allowedUnsandboxed(st.AllowUnsandboxed), limits.Isolation == "none", logger)
	if err == nil {
		if len(server.ParseModes(st.Mode)) == 0 {
			modes, err = keepHoldable(startCtx, modes, rts, limits, logger)
		} else {
			err = checkIsolation(startCtx, rts, limits)
		}
		if err == nil {
			err = o.checkPodBoundary(startCtx, rts, limits.Isolation, logger)
		}
		if err != nil {
			for _, rt := range rts {
				rt.Close()
			}
		}
	}
	cancel()
	if err != nil {
		return nil, modeError(err)
	}
	srv, err := server.New(server.Config{
		Modes:          modes,
		Open:           open,
		Runtimes:       rts,
		MaxConcurrent:  st.MaxConcurrent,
		Queue:          st.Queue,
		QueueWait:      time.Duration(st.QueueWait),
		BodyLimit:      int64(st.BodyLimit),
		DefaultTimeout: time.Duration(cfg.Limits.Timeout),
		MaxTimeout:     time.Duration(st.MaxTimeout),
		MaxOutput:      int64(cfg.Limits.MaxOutput),
		Limits:         limits,
		Token:          st.Token,
		SessionIdle:    time.Duration(st.SessionIdle),
		MaxSessions:    st.MaxSessions,
		WarmSessions:   st.WarmSessions,
		SessionBridges: sessionBridges,
		Runs:           runs,
		Logger:         logger,
		Replica:        replica,
	})
	if err != nil {
		for _, rt := range rts {
			rt.Close()
		}
		return nil, err
	}
	return &Engine{Server: srv, Settings: st, Logger: logger, Modes: modes, Limits: limits}, nil
}

// Run starts the server and blocks until ctx ends (a signal), then shuts
// down gracefully.
func Run(ctx context.Context, o *Options) error {
	eng, err := NewEngine(ctx, o)
	if err != nil {
		return err
	}
	srv, st, logger, modes, limits := eng.Server, eng.Settings, eng.Logger, eng.Modes, eng.Limits
	defer srv.Close()
	drainGrace, err := o.drainGrace()
	if err != nil {
		return cmdutil.Usage(err)
	}
	// MCP over streamable HTTP, behind the same token, slots and metrics.
	srv.Handle("/mcp", mcpserver.HTTPHandler(srv, mcpserver.Options{Logger: logger}))
	// SandboxFusion's POST /run_code and GET /v1/ping, on the same core.
	sandboxfusion.Mount(srv)

	ln, err := net.Listen("tcp", st.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", st.Addr, err)
	}
	// Request contexts derive from base: cancelling it after the grace
	// period kills every run still going.
	base, killRuns := context.WithCancel(context.Background())
	defer killRuns()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if o.E2BAddr != "" {
		stopE2B, err := startE2B(o.E2BAddr, srv, st.Token, st.AllowUnauthenticated, logger, base)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			stopE2B(sctx)
		}()
	}
	addr := ln.Addr().String()
	logger.Info("listening", "addr", "http://"+addr, "modes", strings.Join(modes, ","),
		"max_concurrent", srv.Capacity(), "queue", st.Queue, "auth", st.Token != "", "isolation", limits.Isolation, "version", version.String())
	if o.Ready != nil {
		o.Ready(addr)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	if err := drainFirst(srv, drainGrace, logger, served); err != nil {
		return fmt.Errorf("serving on %s: %w", addr, err)
	}
	grace := time.Duration(st.Grace)
	logger.Info("shutting down", "grace", grace.String(), "in_flight", srv.InFlight())
	srv.Drain()
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(gctx); err != nil {
		// Grace is over: cancel the runs still going (their process groups
		// are killed), give their handlers a moment to answer, then close.
		logger.Warn("grace period over; killing the runs still in flight", "in_flight", srv.InFlight())
		killRuns()
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = hs.Shutdown(fctx)
		fcancel()
		_ = hs.Close()
	}
	<-served
	srv.Close()
	logger.Info("stopped")
	return nil
}

// modeError explains a mode that cannot be served.
func modeError(err error) error {
	if u := cmdutil.UnknownRuntime(err, "mode"); u != nil {
		return u
	}
	if cmdutil.Refused(err) {
		return cmdutil.Usage(err)
	}
	return err
}
