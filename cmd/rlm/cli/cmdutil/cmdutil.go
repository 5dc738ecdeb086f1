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

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/backend"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/plugin"
)

// Exit codes shared by all commands.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	ExitTimeout = 124
)

// IOStreams are a command's standard streams; tests swap in buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// System returns the process's own streams.
func System() *IOStreams { return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// Factory carries global flags and lazily loaded shared state.
type Factory struct {
	IO         *IOStreams
	ConfigPath string   // --config
	PluginDirs []string // --plugin-dir

	// DaemonDial and DaemonAlive are set when daemon support is linked in.
	DaemonDial  func(ctx context.Context, socket, runtime string) (*core.Runtime, error)
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
func (f *Factory) SearchPath() plugin.SearchPath {
	cfg, _, _ := f.Config()
	return plugin.DefaultSearchPath(f.PluginDirs, cfg.PluginDirs)
}

// BackendOptions are the options to open runtimes with backend b.
func (f *Factory) BackendOptions(b string) backend.Options {
	cfg, _, _ := f.Config()
	return backend.Options{
		Backend:      b,
		Plugins:      f.SearchPath(),
		DaemonSocket: cfg.Daemon.Socket,
		DaemonDial:   f.DaemonDial,
		DaemonAlive:  f.DaemonAlive,
	}
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

// Usagef is Usage(fmt.Errorf(...)).
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// Exit is a silent exit with code (the command already reported).
func Exit(code int) error { return &ExitError{Code: code} }
