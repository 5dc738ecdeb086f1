// Package root assembles the rlm command tree and maps errors to exit codes.
package root

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/configcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/daemoncmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/execcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/mcpcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/pluginscmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/sandboxcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/servecmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/versioncmd"
	"github.com/rlmkit/rlm/core/daemon"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/version"
)

// NewCmd builds the root command around f.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "rlm",
		Short:         "Run code written by language models, safely and fast",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version, as users try first; `rlm version` says more.
		Version: version.String(),
	}
	cmd.SetVersionTemplate("rlm {{.Version}}\n")
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetIn(f.IO.In)
	cmd.PersistentFlags().StringVar(&f.ConfigPath, "config", "", "config file (default: $RLM_CONFIG, ./rlm.toml, ~/.rlm/rlm.toml)")
	cmd.PersistentFlags().StringArrayVar(&f.PluginDirs, "plugin-dir", nil, "directory to search for rlm-plugin-* first (repeatable)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usage(err) })
	cmd.AddCommand(
		execcmd.NewCmd(f, nil),
		pluginscmd.NewCmd(f),
		versioncmd.NewCmd(f),
		configcmd.NewCmd(f),
		servecmd.NewCmd(f, nil),
		mcpcmd.NewCmd(f, nil),
		daemoncmd.NewCmd(f, nil),
		sandboxcmd.NewCmd(f),
	)
	return cmd
}

// Main runs rlm with args and returns the exit code.
func Main(args []string) int {
	proctree.KeepDescriptorsHome()
	sandboxcmd.SetHelper()
	return Run(args, cmdutil.System(), nil)
}

// Run is Main with explicit streams; configure may adjust the factory
// (tests, daemon support).
func Run(args []string, io *cmdutil.IOStreams, configure func(*cmdutil.Factory)) int {
	f := &cmdutil.Factory{IO: io, DaemonDial: daemon.Dial, DaemonAlive: daemon.Alive}
	if configure != nil {
		configure(f)
	}
	cmd := NewCmd(f)
	for _, add := range extraCommands {
		cmd.AddCommand(add(f))
	}
	cmdutil.RejectUnknownSubcommands(cmd)
	cmd.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(io.ErrOut, "rlm: %s\n", ee.Err)
		}
		return ee.Code
	}
	if isCobraUsage(err) {
		fmt.Fprintf(io.ErrOut, "rlm: %s (see 'rlm --help')\n", err)
		return cmdutil.ExitUsage
	}
	fmt.Fprintf(io.ErrOut, "rlm: %s\n", err)
	return cmdutil.ExitFailure
}

// extraCommands lets other command packages register without root
// importing them twice; filled by init functions in this package's files.
var extraCommands []func(*cmdutil.Factory) *cobra.Command

func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires ", "invalid argument", "flag needs an argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
