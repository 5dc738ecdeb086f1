package root

import (
	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/benchcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/runcmd"
	"github.com/rlmkit/rlm/cmd/rlm/cli/tracecmd"
)

// rlm run, rlm trace and rlm bench (the RLM engine's commands).
func init() {
	extraCommands = append(extraCommands,
		func(f *cmdutil.Factory) *cobra.Command { return runcmd.NewCmd(f, nil) },
		tracecmd.NewCmd,
		benchcmd.NewCmd,
	)
}
