// Package cmdutil is what every rlm command shares: I/O streams, config
// loading, plugin discovery, backend options and exit codes.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// Exit codes shared by all commands. Those of 124 and above say what
// stopped a program that rlm ran, so that they are not mistaken for the
// program's own status (following timeout(1) and the shell: 124 timed out,
// 126 cannot run, 127 not found, 128+N signal N).
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitTimeout     = 124 // the wall-clock limit ended it
	ExitFuel        = 125 // it used up its fuel (CPU budget)
	ExitInstall     = 126 // its requirements could not be installed
	ExitNoRuntime   = 127 // the runtime is missing or unavailable here
	ExitInterrupted = 130 // Ctrl-C or SIGTERM stopped rlm
)

// IOStreams are a command's standard streams; tests swap in buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// InPiped says In is a pipe or a file rather than a terminal or
	// /dev/null: data was given on purpose (`echo x | rlm exec ...`), and a
	// command may read it without waiting on a person's keyboard.
	InPiped bool
}

// System returns the process's own streams.
func System() *IOStreams {
	piped := false
	if st, err := os.Stdin.Stat(); err == nil {
		piped = st.Mode()&(os.ModeCharDevice|os.ModeDevice) == 0
	}
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, InPiped: piped}
}

// Factory carries global flags and lazily loaded shared state.
type Factory struct {
	IO         *IOStreams
	ConfigPath string   // --config
	PluginDirs []string // --plugin-dir

	// DaemonDial and DaemonAlive are set when daemon support is linked in.
	DaemonDial  func(ctx context.Context, socket, runtime string) (*client.Runtime, error)
	DaemonAlive func(ctx context.Context, socket string) bool

	once    sync.Once
	cfg     config.Config
	cfgFile string
	cfgErr  error
}

// Config loads the configuration once.
func (f *Factory) Config() (config.Config, string, error) {
	f.once.Do(func() {
		f.cfgFile, f.cfgErr = config.Find(f.ConfigPath)
		if f.cfgErr == nil {
			f.cfg, f.cfgErr = config.Load(f.cfgFile)
		}
		if f.cfgErr != nil {
			f.cfgErr = Usage(f.cfgErr)
		}
	})
	return f.cfg, f.cfgFile, f.cfgErr
}

// SearchPath is where plugins are looked for.
func (f *Factory) SearchPath() []string {
	cfg, _, _ := f.Config()
	return launch.DefaultSearchPath(f.PluginDirs, cfg.PluginDirs)
}

// BackendOptions are the options to open runtimes with backend b.
func (f *Factory) BackendOptions(b string) client.Options {
	cfg, _, _ := f.Config()
	o := client.Options{
		Backend:      b,
		Plugins:      f.SearchPath(),
		DaemonSocket: cfg.Daemon.Socket,
		DaemonDial:   f.DaemonDial,
		DaemonAlive:  f.DaemonAlive,
	}
	// The daemon runs the plugins it found when it started. A client that
	// names plugin directories of its own (--plugin-dir, RLM_PLUGIN_PATH)
	// means those: auto bypasses the daemon instead of ignoring them.
	if len(f.PluginDirs) > 0 || os.Getenv("RLM_PLUGIN_PATH") != "" {
		o.DaemonAlive = nil
	}
	return o
}

// ExitError carries an exit code with an optional message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usage marks err as a usage or configuration error (exit 2).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// Refused says whether err is a refusal of what was asked
// (core.RefusedError): an isolation level or a limit the runtime's plugin
// cannot hold, a runtime its backend does not run, a file clashing with the
// program's. Nothing ran and the fix is the caller's (a flag, the
// configuration), so commands exit with a usage error (2) for it, never
// with a status a program could have given.
func Refused(err error) bool {
	var r *core.RefusedError
	return errors.As(err, &r)
}

// Usagef is Usage(fmt.Errorf(...)).
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// CompleteValues gives flag name of cmd a fixed set of completions, so
// that shell completion offers the runtimes, backends or levels.
func CompleteValues(cmd *cobra.Command, flag string, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	})
}

// Override sets *dst to v when flag name was given (changed is the
// command's FlagSet.Changed; nil, as in tests that build options by hand,
// means none was). A flag comes before the task file, the configuration
// and the environment, but one left out must not reset what they said to
// the flag's zero default, so commands apply only the flags given.
func Override[T any](changed func(name string) bool, name string, dst *T, v T) {
	if changed != nil && changed(name) {
		*dst = v
	}
}

// Exit is a silent exit with code (the command already reported).
func Exit(code int) error { return &ExitError{Code: code} }
