package tracecmd

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/traceview"
)

// ViewOptions are `rlm trace view`'s parsed arguments.
type ViewOptions struct {
	IO    *cmdutil.IOStreams
	Trace string
	Out   string // "" means TRACE.html beside the trace
}

// NewCmdView builds `rlm trace view`; runF replaces the run function in
// tests.
func NewCmdView(f *cmdutil.Factory, runF func(*ViewOptions) error) *cobra.Command {
	o := &ViewOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "view TRACE.jsonl [-o OUT.html]",
		Short: "Write a trace as one self-contained HTML page (no network, opens from disk)",
		Long: `Write a trace as one HTML page that needs nothing else: its style, script
and data are inline and it loads nothing from the network, so it opens
from disk and can be attached to a bug report.

The page shows the task, the answer and how it was given, and the run as
a tree: each loop's iterations, the model's replies, each code block with
its output, and the sub-calls each block made (rlm_query's child loops
nested under it), with tokens, cost and time per node. Search finds text
in code, outputs, replies and prompts.

A trace cut short (a run killed while writing it) or with malformed lines
still renders; the page says what is missing.`,
		Example: `  rlm run task.toml --trace run.jsonl
  rlm trace view run.jsonl               # writes run.html
  rlm trace view run.jsonl -o /tmp/page.html
  rlm run task.toml --trace-html run.html  # the same, straight from a run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Trace = args[0]
			if o.Out == "" {
				o.Out = DefaultHTML(o.Trace)
			}
			if filepath.Clean(o.Out) == filepath.Clean(o.Trace) {
				return cmdutil.Usagef("-o %s would overwrite the trace: choose another file", o.Out)
			}
			if runF != nil {
				return runF(o)
			}
			return viewRun(o)
		},
	}
	cmd.Flags().StringVarP(&o.Out, "output", "o", "", "the HTML file to write (default: the trace's name with .html)")
	return cmd
}

// DefaultHTML is the page's default name: the trace's with .html.
func DefaultHTML(trace string) string {
	ext := filepath.Ext(trace)
	if ext == ".html" {
		ext = ""
	}
	return strings.TrimSuffix(trace, ext) + ".html"
}

func viewRun(o *ViewOptions) error {
	evs, rep, err := Load(o.Trace)
	if err != nil {
		return cmdutil.Usage(err)
	}
	// Checked once the trace is read: a trace that cannot be read is the
	// first thing to fix, and the default page sits beside it anyway.
	if err := cmdutil.CheckOutputFile("-o", o.Out, DefaultHTML(filepath.Base(o.Trace))); err != nil {
		return err
	}
	warnIncomplete(o.IO.ErrOut, o.Trace, rep)
	if err := traceview.WriteFile(o.Out, traceview.Build(evs, rep)); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.ErrOut, "wrote %s (%d events)\n", o.Out, rep.Events)
	return nil
}
