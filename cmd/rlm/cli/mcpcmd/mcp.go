// Package mcpcmd implements `rlm mcp`: rlm's code-execution tools served
// to an MCP client (Claude Code, Claude Desktop, Cursor, ...) over stdio.
package mcpcmd

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/servecmd"
	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/internal/version"
)

// Options are mcp's settings: serve's engine settings (runtimes, backend,
// slots, limits, isolation), so one rlm.toml [serve] table configures both.
type Options struct {
	F     *cmdutil.Factory
	Serve servecmd.Options
}

// NewCmd builds the command; runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f, Serve: servecmd.Options{F: f}}
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve rlm's code-execution tools to an MCP client over stdio",
		Long: `Serve rlm as a Model Context Protocol server on standard input and output,
for an agent (Claude Code, Claude Desktop, Cursor, ...) that starts it as a
subprocess. Tools: run_code, list_runtimes, session_open, session_run,
session_get_variable, session_close.

Standard output carries the protocol only; logs go to standard error.
Runtimes, backend, limits and isolation take the same flags, environment
and rlm.toml [serve] settings as rlm serve, which also serves these tools
over HTTP at /mcp. See docs/mcp.md for client configuration.`,
		Example: `  rlm mcp
  rlm mcp --mode python,shell --max-concurrent 2
  claude mcp add rlm -- rlm mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Serve.Changed = cmd.Flags().Changed
			if runF != nil {
				return runF(o)
			}
			return Run(cmd.Context(), o)
		},
	}
	o.Serve.RegisterEngineFlags(cmd.Flags())
	return cmd
}

// Run serves MCP on the factory's stdin and stdout until the client closes
// stdin or ctx ends (a signal); then every session and plugin is closed.
func Run(ctx context.Context, o *Options) error {
	eng, err := servecmd.NewEngine(ctx, &o.Serve)
	if err != nil {
		return err
	}
	defer eng.Server.Close()
	ms := mcpserver.New(eng.Server, mcpserver.Options{Logger: eng.Logger})
	eng.Logger.Info("serving MCP on stdio", "modes", eng.Modes, "isolation", eng.Limits.Isolation, "version", version.String())
	err = ms.Run(ctx, mcpserver.StdioTransport(o.F.IO.In, o.F.IO.Out))
	if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
		// The client hung up, or a signal: a normal end.
		eng.Logger.Info("stopped")
		return nil
	}
	return err
}
