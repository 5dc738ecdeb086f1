// Package configcmd implements `rlm config show|path`.
package configcmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/config"
)

// NewCmd builds the command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective configuration or where it comes from",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration (defaults, file and environment merged) as TOML",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, file, err := f.Config()
			if err != nil {
				return err
			}
			out, err := cfg.TOML()
			if err != nil {
				return err
			}
			if file == "" {
				file = "none (defaults and environment)"
			}
			fmt.Fprintf(f.IO.Out, "# config file: %s\n%s", file, out)
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "path",
		Short: "Print the config file in use, or where rlm looks for one",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, file, err := f.Config()
			if err != nil {
				return err
			}
			if file != "" {
				fmt.Fprintln(f.IO.Out, file)
				return nil
			}
			fmt.Fprintf(f.IO.ErrOut, "no config file; rlm looks at --config, $RLM_CONFIG, %s\n", strings.Join(config.SearchPaths(), ", "))
			return cmdutil.Exit(cmdutil.ExitFailure)
		},
	})
	return cmd
}
