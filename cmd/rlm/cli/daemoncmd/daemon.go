// Package daemoncmd implements `rlm daemon`: run the daemon in the
// foreground, or start, stop and inspect a detached one.
package daemoncmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/daemon"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// Options are the daemon commands' parsed flags.
type Options struct {
	F *cmdutil.Factory

	Socket   string
	Workers  int
	Runtimes []string
	JSON     bool
	Wait     time.Duration
	Changed  func(name string) bool
}

// Actions of the daemon command, as passed to runF.
const (
	Foreground = "foreground"
	Start      = "start"
	Stop       = "stop"
	Status     = "status"
)

// NewCmd builds `rlm daemon` and its subcommands; runF, when not nil,
// replaces the run functions (tests).
func NewCmd(f *cmdutil.Factory, runF func(o *Options, action string) error) *cobra.Command {
	o := &Options{F: f}
	run := func(cmd *cobra.Command, action string, real func(context.Context, *Options) error) error {
		o.Changed = cmd.Flags().Changed
		if runF != nil {
			return runF(o, action)
		}
		return real(cmd.Context(), o)
	}
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Keep warm runtime workers behind a socket (foreground; see start, stop, status)",
		Long: `Run the rlm daemon in the foreground. It keeps runtime plugins running and
REPL sessions warm behind a Unix socket (~/.rlm/daemon.sock; on Windows the
named pipe \\.\pipe\rlm-daemon), and serves the same runtime service as a
plugin. With backend auto (the default), rlm exec and rlm run use it when it
answers.

Each warm session is handed to one client only and discarded afterwards;
the daemon opens a replacement in the background. SIGTERM or 'rlm daemon
stop' drains running requests and exits, removing the socket and pid file.
SIGHUP re-reads [daemon] workers from the configuration and resizes the
pools (idle workers above the new number are closed).`,
		Example: `  rlm daemon start --workers 4
  rlm exec -c 'print(1)'          # served by the daemon
  rlm daemon status --json
  rlm daemon stop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, Foreground, runForeground) },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.Socket, "socket", "", "socket path (default from config: ~/.rlm/daemon.sock)")
	pf.IntVar(&o.Workers, "workers", 0, "warm sessions per pooled runtime (default from config: 2)")
	pf.StringSliceVar(&o.Runtimes, "runtimes", nil, "runtimes to keep warm, comma-separated (default from config: python)")

	start := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background and wait until it is ready",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd, Start, runStart) },
	}
	start.Flags().DurationVar(&o.Wait, "wait", 60*time.Second, "how long to wait for the daemon to be ready")
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon gracefully and wait until it has exited",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd, Stop, runStop) },
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's pid, uptime, socket and per-runtime workers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd, Status, runStatus) },
	}
	status.Flags().BoolVar(&o.JSON, "json", false, "print the status as JSON")
	cmd.AddCommand(start, stop, status)
	return cmd
}

// resolve applies the config under the flags.
// sandbox is the configured isolation and limits, as exec sends them when
// no flag overrides them (cmdutil.LimitFlags): warm workers are opened
// with them so that such a request fits one.
func sandbox(cl config.Limits) *pb.Limits {
	var l core.Limits
	var none cmdutil.LimitFlags
	_ = none.Apply(cl, &l) // no flags set: only cl's values, already validated
	return pb.LimitsProto(l)
}

func (o *Options) resolve() (daemon.Config, error) {
	cfg, _, err := o.F.Config()
	if err != nil {
		return daemon.Config{}, err
	}
	dc := daemon.Config{
		Socket:         cfg.Daemon.Socket,
		Workers:        cfg.Daemon.Workers,
		Runtimes:       cfg.Daemon.Runtimes,
		Plugins:        o.F.SearchPath(),
		MaxOutputBytes: int64(cfg.Limits.MaxOutput),
		Sandbox:        sandbox(cfg.Limits),
		Drain:          time.Duration(cfg.Daemon.DrainTimeout),
	}
	if o.Socket != "" {
		dc.Socket = o.Socket
	}
	if o.Changed != nil && o.Changed("workers") {
		if o.Workers < 0 || o.Workers > 64 {
			return dc, cmdutil.Usagef("--workers %d is out of range: use 0 to 64", o.Workers)
		}
		dc.Workers = o.Workers
	}
	if o.Changed != nil && o.Changed("runtimes") {
		dc.Runtimes = nil
		for _, r := range o.Runtimes {
			if r = strings.TrimSpace(r); r != "" {
				dc.Runtimes = append(dc.Runtimes, r)
			}
		}
	}
	dc.Socket = daemon.PathsFor(dc.Socket).Socket
	if abs, err := filepath.Abs(dc.Socket); err == nil && !strings.HasPrefix(dc.Socket, `\\`) {
		// The detached daemon and later clients may run elsewhere.
		dc.Socket = abs
	}
	return dc, nil
}

// checkRuntimes refuses runtimes that have no plugin, before the daemon
// starts: it would otherwise report itself started and say so only in
// `rlm daemon status`, or to the first client. A name rlm does not ship is
// a usage error, as in exec and serve (cmdutil.UnknownRuntime); a built-in
// one whose plugin is missing is ExitNoRuntime.
func checkRuntimes(dc daemon.Config) error {
	for _, r := range dc.Runtimes {
		if _, err := launch.SearchPath(dc.Plugins).Find(r); err != nil {
			if u := cmdutil.UnknownRuntime(err, "runtime"); u != nil {
				return u
			}
			return &cmdutil.ExitError{Code: cmdutil.ExitNoRuntime, Err: err}
		}
	}
	return nil
}

func runForeground(ctx context.Context, o *Options) error {
	dc, err := o.resolve()
	if err != nil {
		return err
	}
	if err := checkRuntimes(dc); err != nil {
		return err
	}
	dc.Log = o.F.IO.ErrOut
	srv := daemon.New(dc)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			o.reloadWorkers(srv)
		}
	}()
	err = srv.Serve(ctx, nil)
	var ar *daemon.AlreadyRunningError
	if errors.As(err, &ar) {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: ar}
	}
	return err
}

// reloadWorkers re-reads the configuration (on SIGHUP) and applies its
// [daemon] workers: the pools grow, or their idle workers above the new
// number are closed. Other keys need a restart.
func (o *Options) reloadWorkers(srv *daemon.Server) {
	errOut := o.F.IO.ErrOut
	file, err := config.Find(o.F.ConfigPath)
	if err == nil {
		var cfg config.Config
		if cfg, err = config.Load(file); err == nil {
			srv.SetWorkers(cfg.Daemon.Workers)
			return
		}
	}
	fmt.Fprintf(errOut, "%s rlm daemon: SIGHUP: configuration not reloaded: %v\n", time.Now().Format(time.RFC3339), err)
}

func runStart(ctx context.Context, o *Options) error {
	dc, err := o.resolve()
	if err != nil {
		return err
	}
	if err := checkRuntimes(dc); err != nil {
		return err
	}
	p := daemon.PathsFor(dc.Socket)
	if daemon.Alive(ctx, p.Socket) {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: &daemon.AlreadyRunningError{PID: daemon.ReadPID(p.PID), Socket: p.Socket}}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the rlm executable to start the daemon: %w", err)
	}
	// argv[0] is kept: a multi-call binary (and testscript) dispatches on it.
	// Only flags given here are passed on; the rest the daemon reads from
	// the same configuration and environment, so that SIGHUP can re-read
	// them.
	args := []string{os.Args[0], "daemon", "--socket", p.Socket}
	if o.Changed("workers") {
		args = append(args, "--workers", strconv.Itoa(dc.Workers))
	}
	if o.Changed("runtimes") {
		args = append(args, "--runtimes", strings.Join(dc.Runtimes, ","))
	}
	if o.F.ConfigPath != "" {
		args = append(args, "--config", o.F.ConfigPath)
	}
	for _, d := range o.F.PluginDirs {
		args = append(args, "--plugin-dir", d)
	}
	if err := os.MkdirAll(dirOf(p.Log), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open the daemon log: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)
	cmd := &exec.Cmd{Path: exe, Args: args, Stdout: logf, Stderr: logf, SysProcAttr: detached()}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start the daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(o.Wait)
	for {
		if daemon.Alive(ctx, p.Socket) && daemon.ReadPID(p.PID) == cmd.Process.Pid {
			fmt.Fprintf(o.F.IO.Out, "rlm daemon started (pid %d)\n  socket %s\n  log    %s\n", cmd.Process.Pid, p.Socket, p.Log)
			return nil
		}
		select {
		case err := <-exited:
			return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("the daemon exited at start (%v):\n%s", err, logSince(p.Log, logStart))}
		case <-deadline:
			_ = cmd.Process.Kill()
			return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("the daemon was not ready after %s; killed it. Its log:\n%s", o.Wait, logSince(p.Log, logStart))}
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func dirOf(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i > 0 {
		return p[:i]
	}
	return "."
}

// logSince is what the daemon wrote to its log during this start.
func logSince(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return strings.TrimSpace(string(b[off:]))
}

func runStop(ctx context.Context, o *Options) error {
	dc, err := o.resolve()
	if err != nil {
		return err
	}
	pid, err := daemon.StopAndWait(ctx, dc.Socket, dc.Drain+10*time.Second)
	// Stopping what is not running succeeds, as `systemctl stop` does: the
	// caller wanted no daemon, and there is none.
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) {
		fmt.Fprintf(o.F.IO.Out, "rlm daemon is not running on %s; nothing to stop\n", nr.Socket)
		return nil
	}
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: err}
	}
	fmt.Fprintf(o.F.IO.Out, "rlm daemon stopped (pid %d)\n", pid)
	return nil
}

func runStatus(ctx context.Context, o *Options) error {
	dc, err := o.resolve()
	if err != nil {
		return err
	}
	st, err := daemon.GetStatus(ctx, dc.Socket)
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) {
		if o.JSON {
			_ = writeJSON(o.F.IO.Out, map[string]any{"running": false, "socket": dc.Socket})
			return cmdutil.Exit(cmdutil.ExitFailure)
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: err}
	}
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.F.IO.Out, struct {
			Running bool `json:"running"`
			*daemon.Status
		}{true, st})
	}
	w := o.F.IO.Out
	fmt.Fprintf(w, "rlm daemon running (pid %d)\n", st.PID)
	fmt.Fprintf(w, "  uptime   %s\n", (time.Duration(st.Uptime * float64(time.Second))).Round(time.Second))
	fmt.Fprintf(w, "  socket   %s\n", st.Socket)
	fmt.Fprintf(w, "  workers  %d per pooled runtime\n\n", st.Workers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNTIME\tWARM\tBUSY\tOPENING\tSESSIONS\tRUNS\tCRASHED\tLOST\tPLUGIN")
	for _, r := range st.Runtimes {
		warm, busy, opening, crashed := "-", "-", "-", "-"
		if r.Workers != nil {
			warm, busy, opening, crashed = strconv.Itoa(r.Workers.Idle), strconv.Itoa(r.Workers.Busy),
				strconv.Itoa(r.Workers.Opening), strconv.Itoa(r.Workers.Crashed)
		}
		plug := "not started"
		if r.PluginRunning {
			plug = "running"
		} else if r.PluginStarts > 0 {
			plug = "exited"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", r.Name, warm, busy, opening, r.Sessions, r.Runs, crashed, r.WorkersLost, plug)
	}
	tw.Flush()
	printBinaries(w, st.Runtimes)
	for _, r := range st.Runtimes {
		if r.Workers != nil && r.Workers.LastError != "" {
			fmt.Fprintf(w, "\n%s: warm sessions failing: %s\n", r.Name, r.Workers.LastError)
		}
	}
	return nil
}

// printBinaries shows which build of each running plugin is serving: a
// binary rebuilt under the daemon is restarted on its next request, and
// until then this is how to tell the old build from the new one.
func printBinaries(w io.Writer, rts []daemon.RuntimeStatus) {
	first := true
	for _, r := range rts {
		if !r.PluginRunning || r.PluginPath == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nplugin binaries in use:")
			first = false
		}
		line := fmt.Sprintf("  %s: %s", r.Name, r.PluginPath)
		if r.PluginModified != nil {
			line += fmt.Sprintf(" (modified %s, %d bytes)", r.PluginModified.Format(time.RFC3339), r.PluginSize)
		}
		if r.PluginVersion != "" {
			line += fmt.Sprintf(", plugin %s", r.PluginVersion)
		}
		if r.RuntimeVersion != "" {
			line += fmt.Sprintf(", runtime %s", r.RuntimeVersion)
		}
		fmt.Fprintln(w, line)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
