// Package versioncmd implements `rlm version`.
package versioncmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/native"
	"github.com/rlmkit/rlm/core/plugin"
)

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rlm's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(f.IO.Out, "rlm %s (plugin protocol %d, %s, %s/%s)\n",
				String(), plugin.ProtocolVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// String is the version: set at build time, else the module version.
func String() string {
	if native.Version != "dev" {
		return native.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
