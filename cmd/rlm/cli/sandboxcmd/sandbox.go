// Package sandboxcmd implements `rlm __sandbox`, the host's sandbox
// supervisor: a plugin that links no sandbox code (core/plugin/native's default,
// HelperSandbox) runs each sandboxed program through it, so it gets the
// same internal/sandbox/isolate sandbox as the built-in plugins. It is hidden: only
// plugins call it, through $RLM_SANDBOX_HELPER, which rlm sets (SetHelper).
package sandboxcmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/sandbox/supervise"
)

// NewCmd builds the command. Without --levels it runs one program: the
// spec on descriptor 3, reports on descriptor 4, and its own standard files
// are the program's (see isolation.Report). SIGTERM or SIGINT (the
// command's context) kills the sandbox, which is still cleaned up and
// reported.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	var levels, run bool
	cmd := &cobra.Command{
		Use:    native.HelperCommand,
		Short:  "Supervise one sandboxed program for a plugin (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if levels {
				for _, l := range isolate.AvailableLevels() {
					fmt.Fprintln(f.IO.Out, l)
				}
				return nil
			}
			if !run {
				return cmdutil.Usagef("rlm %s is run by runtime plugins (core/plugin/native), not by hand: with %s it reads a program's spec on descriptor %d and reports on descriptor %d; rlm %s --levels lists the isolation levels this host enforces",
					native.HelperCommand, native.HelperRunFlag, native.HelperSpecFD, native.HelperReportFD, native.HelperCommand)
			}
			spec := os.NewFile(native.HelperSpecFD, "sandbox-spec")
			report := os.NewFile(native.HelperReportFD, "sandbox-report")
			defer spec.Close()
			defer report.Close()
			return supervise.Supervise(cmd.Context(), spec, report, os.Stdin, os.Stdout, os.Stderr)
		},
	}
	cmd.Flags().BoolVar(&levels, "levels", false, "list the isolation levels this host enforces, one a line")
	cmd.Flags().BoolVar(&run, strings.TrimPrefix(native.HelperRunFlag, "--"), false, "run the program whose spec is on descriptor 3 (plugins only)")
	return cmd
}

// SetHelper tells the plugins rlm starts where the supervisor is: this
// binary, in $RLM_SANDBOX_HELPER, which every plugin inherits and no
// program does (core/plugin/program's BaseEnv scrubs it).
func SetHelper() {
	if exe, err := os.Executable(); err == nil {
		_ = os.Setenv(native.HelperEnv, exe)
	}
}
