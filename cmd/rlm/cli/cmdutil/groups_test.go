package cmdutil

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// tree is a root with a parent that only holds subcommands (like
// `rlm trace`) and one that runs itself (like `rlm daemon`).
func tree() *cobra.Command {
	root := &cobra.Command{Use: "rlm", SilenceErrors: true, SilenceUsage: true}
	group := &cobra.Command{Use: "trace", Short: "group"}
	group.AddCommand(
		&cobra.Command{Use: "view", RunE: func(*cobra.Command, []string) error { return nil }},
		&cobra.Command{Use: "show", RunE: func(*cobra.Command, []string) error { return nil }},
	)
	runs := &cobra.Command{Use: "daemon", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	runs.AddCommand(&cobra.Command{Use: "start", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(group, runs)
	RejectUnknownSubcommands(root)
	return root
}

func TestRejectUnknownSubcommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int // -1: no error
		msg  string
	}{
		{[]string{"trace", "veiw", "run.jsonl"}, ExitUsage, `unknown command "veiw" for "rlm trace": did you mean view? (see 'rlm trace --help' for its commands)`},
		{[]string{"trace", "bogus"}, ExitUsage, `unknown command "bogus" for "rlm trace" (see 'rlm trace --help' for its commands)`},
		{[]string{"daemon", "strat"}, ExitUsage, `unknown command "strat" for "rlm daemon": did you mean start?`},
		{[]string{"trace"}, -1, ""},
		{[]string{"trace", "view"}, -1, ""},
		{[]string{"daemon"}, -1, ""},
	} {
		cmd := tree()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if tc.code < 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: got %v, want exit %d with %q", tc.args, err, tc.code, tc.msg)
		}
	}
	// A group given nothing still shows its help.
	cmd := tree()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"trace"})
	if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "view") {
		t.Errorf("rlm trace: %v, help %q", err, out.String())
	}
}
